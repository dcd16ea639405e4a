// HealthService: the daemon's grpc.health.v1.Health, in place of gRPC's
// default health service. gRPC 1.51's default one is on the callback API:
// registering it makes the server start the callback completion queue and
// its polling threads, and every unary ingest call then went through them
// (docs/PERFORMANCE.md, round 9a). This one is on the synchronous API, on
// the thread pool the query calls use; health calls are a probe every few
// seconds, a thread hand-off each is of no cost there, and the ingest
// queue's threads stay the ingest's alone.
//
// Contract, as gRPC's default service: the server, "", is SERVING from the
// start; other services are known once SetServingStatus names them.
// - Check answers the service's status, NOT_FOUND for an unknown service.
// - Watch sends the service's status at once (SERVICE_UNKNOWN for an unknown
//   service, and the call stays open), then each change; changes close
//   together may be sent as the last one only.
// - Shutdown turns every service NOT_SERVING and ignores SetServingStatus
//   from then on; Check keeps answering. Each Watch call sends NOT_SERVING
//   if it had not, then ends with UNAVAILABLE, so the gRPC server's
//   Shutdown never waits on one.
// A Watch call holds a thread of the synchronous pool while it is open, as
// WatchBreaks does; one whose client went away ends within
// kWatchCancelPoll.
//
// Thread-safe.
#ifndef CACHEWATCH_DAEMON_SERVER_HEALTH_SERVICE_H_
#define CACHEWATCH_DAEMON_SERVER_HEALTH_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "health.grpc.pb.h"

namespace cachewatch {

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  // How often an idle Watch call checks whether its client went away.
  static constexpr std::chrono::seconds kWatchCancelPoll{1};

  HealthService();

  // Sets the status of `service` (SERVING or NOT_SERVING), which becomes
  // known if it was not. Ignored after Shutdown.
  void SetServingStatus(const std::string& service, bool serving);
  // Every service NOT_SERVING, for good; ends the Watch calls. Idempotent.
  void Shutdown();

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>*
                         writer) override;

 private:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // SERVICE_UNKNOWN if `service` is not known.
  ServingStatus StatusLocked(const std::string& service) const;

  std::mutex mutex_;
  std::condition_variable changed_;                // Any status, or shut_down_.
  std::map<std::string, ServingStatus> statuses_;  // Guarded by mutex_.
  bool shut_down_ = false;                         // Guarded by mutex_.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_SERVER_HEALTH_SERVICE_H_
