// The HTTP proxy's Prometheus metrics (docs/METRICS.md), registered in the
// daemon's registry next to the pipeline's:
//   cachewatch_proxy_requests_total{outcome}        every request the proxy
//     took: forwarded, upstream_unreachable (answered 502), upstream_dropped
//     (the response broke off), client_gone, bad_request (answered 400),
//     too_large (answered 413)
//   cachewatch_proxy_observe_failures_total{reason} exchanges forwarded but
//     not (fully) observed: queue_full, unknown_endpoint, invalid_body,
//     response_too_large, undecodable_response (a content-encoding other
//     than gzip/deflate, or corrupt), rejected (the pipeline refused a
//     record), store_unavailable, internal
//   cachewatch_proxy_observe_queue_exchanges        exchanges waiting
//
// Every series exists from the start (at 0). Thread-safe.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_METRICS_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <array>
#include <cstddef>

namespace cachewatch {

class ProxyMetrics {
 public:
  enum class Outcome {
    kForwarded,
    kUpstreamUnreachable,
    kUpstreamDropped,
    kClientGone,
    kBadRequest,
    kTooLarge,
  };
  enum class ObserveFailure {
    kQueueFull,
    kUnknownEndpoint,
    kInvalidBody,
    kResponseTooLarge,
    kUndecodableResponse,
    kRejected,
    kStoreUnavailable,
    kInternal,
  };

  explicit ProxyMetrics(prometheus::Registry& registry);

  ProxyMetrics(const ProxyMetrics&) = delete;
  ProxyMetrics& operator=(const ProxyMetrics&) = delete;

  void OnRequest(Outcome outcome);
  void OnObserveFailure(ObserveFailure reason);
  void SetQueueDepth(size_t exchanges);

 private:
  std::array<prometheus::Counter*, 6> requests_;
  std::array<prometheus::Counter*, 8> observe_failures_;
  prometheus::Gauge* queue_depth_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_METRICS_H_
