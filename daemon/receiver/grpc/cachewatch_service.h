// The gRPC receiver: the cachewatch.v1.CacheWatch service (synchronous API).
// Ingest RPCs go through the IngestPipeline and answer once the record is
// durable; query RPCs read BreakQueries; WatchBreaks follows the BreakHub.
//
// Thread-safe; gRPC calls it from its own thread pool.
#ifndef CACHEWATCH_DAEMON_RECEIVER_GRPC_CACHEWATCH_SERVICE_H_
#define CACHEWATCH_DAEMON_RECEIVER_GRPC_CACHEWATCH_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "cachewatch/v1/service.grpc.pb.h"
#include "daemon/exporter/watch/break_hub.h"
#include "daemon/pipeline/clock.h"
#include "daemon/pipeline/ingest_pipeline.h"
#include "daemon/receiver/grpc/client_gate.h"
#include "daemon/store/break_queries.h"

namespace cachewatch {

class CacheWatchService final : public v1::CacheWatch::Service {
 public:
  // All pointers must outlive the service. Every call passes `gate`:
  // UNAUTHENTICATED without a valid token (when tokens are configured), and
  // ingest calls are charged to the client's rate limit.
  CacheWatchService(IngestPipeline* pipeline, BreakQueries* queries,
                    BreakHub* hub, ClientGate* gate, const Clock* clock)
      : pipeline_(pipeline),
        queries_(queries),
        hub_(hub),
        gate_(gate),
        clock_(clock) {}

  // Makes open WatchBreaks calls end (each within 200 ms, its wait for the
  // next break); Record streams end when the gRPC server shuts down.
  void BeginShutdown() { shutting_down_ = true; }

  grpc::Status RecordSnapshot(grpc::ServerContext* context,
                              const v1::RecordSnapshotRequest* request,
                              v1::RecordSnapshotResponse* response) override;
  grpc::Status RecordUsage(grpc::ServerContext* context,
                           const v1::RecordUsageRequest* request,
                           v1::RecordUsageResponse* response) override;
  grpc::Status Record(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::RecordAck, v1::RecordRequest>* stream)
      override;
  grpc::Status ListBreaks(grpc::ServerContext* context,
                          const v1::ListBreaksRequest* request,
                          v1::ListBreaksResponse* response) override;
  grpc::Status ExplainBreak(grpc::ServerContext* context,
                            const v1::ExplainBreakRequest* request,
                            v1::ExplainBreakResponse* response) override;
  grpc::Status WatchBreaks(
      grpc::ServerContext* context, const v1::WatchBreaksRequest* request,
      grpc::ServerWriter<v1::PromptCacheBreak>* writer) override;
  grpc::Status GetLaneTimeline(grpc::ServerContext* context,
                               const v1::GetLaneTimelineRequest* request,
                               v1::GetLaneTimelineResponse* response) override;

 private:
  // The caller's identity, or UNAUTHENTICATED.
  absl::StatusOr<std::string> Authenticate(grpc::ServerContext* context) const;
  // Authenticates and charges one record; the refusal, if any, is counted.
  absl::Status Admit(grpc::ServerContext* context, RecordKind kind);

  IngestPipeline* const pipeline_;
  BreakQueries* const queries_;
  BreakHub* const hub_;
  ClientGate* const gate_;
  const Clock* const clock_;
  std::atomic<bool> shutting_down_{false};
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_GRPC_CACHEWATCH_SERVICE_H_
