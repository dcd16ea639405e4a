// The HTTP proxy as one receiver of the daemon: the ExchangeObserver, the
// ObservationQueue feeding the ingest pipeline, the proxy's metrics and the
// ProxyServer, started together and stopped in order: BeginShutdown (no new
// connections, idle ones closed), WaitForRequests (the requests in flight
// answered), then the destructor (what is still in flight cut off, every
// queued exchange observed and committed).
//
// Thread-compatible: Start, BeginShutdown, WaitForRequests and the
// destructor from one thread.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_RECEIVER_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_RECEIVER_H_

#include <prometheus/registry.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/pipeline/ingest_pipeline.h"
#include "daemon/receiver/proxy/exchange_observer.h"
#include "daemon/receiver/proxy/observation_queue.h"
#include "daemon/receiver/proxy/proxy_metrics.h"
#include "daemon/receiver/proxy/proxy_options.h"
#include "daemon/receiver/proxy/proxy_server.h"

namespace cachewatch {

class ProxyReceiver {
 public:
  // Serves options.listen; its metrics go into `registry`. `pipeline` must
  // outlive the receiver. Lane inference starts from `recent_lanes`, the
  // lanes IngestPipeline::RestoreLanes read (ExchangeObserver::RestoreLanes).
  // Errors as ProxyRoutes::Make and ProxyServer::Start.
  static absl::StatusOr<std::unique_ptr<ProxyReceiver>> Start(
      const ProxyOptions& options, IngestPipeline* pipeline,
      prometheus::Registry& registry,
      absl::Span<const RestoredLane> recent_lanes);

  ~ProxyReceiver();

  // host:port the proxy listens on.
  std::string address() const { return server_->address(); }

  // ProxyServer::BeginShutdown and ProxyServer::WaitForRequests.
  void BeginShutdown() { server_->BeginShutdown(); }
  bool WaitForRequests(std::chrono::steady_clock::time_point deadline) {
    return server_->WaitForRequests(deadline);
  }

 private:
  ProxyReceiver(const ProxyOptions& options, IngestPipeline* pipeline,
                prometheus::Registry& registry);

  ProxyMetrics metrics_;
  ExchangeObserver observer_;
  ObservationQueue queue_;
  std::unique_ptr<ProxyServer> server_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_RECEIVER_H_
