#include "daemon/receiver/proxy/proxy_metrics.h"

#include <prometheus/family.h>

namespace cachewatch {
namespace {

// By ProxyMetrics::Outcome and ProxyMetrics::ObserveFailure.
constexpr std::array<const char*, 6> kOutcomeNames = {
    "forwarded",   "upstream_unreachable", "upstream_dropped",
    "client_gone", "bad_request",          "too_large"};
constexpr std::array<const char*, 8> kFailureNames = {
    "queue_full",           "unknown_endpoint",
    "invalid_body",         "response_too_large",
    "undecodable_response", "rejected",
    "store_unavailable",    "internal"};

}  // namespace

ProxyMetrics::ProxyMetrics(prometheus::Registry& registry) {
  auto& requests = prometheus::BuildCounter()
                       .Name("cachewatch_proxy_requests_total")
                       .Help("Requests the HTTP proxy took, by outcome.")
                       .Register(registry);
  for (size_t i = 0; i < kOutcomeNames.size(); ++i) {
    requests_[i] = &requests.Add({{"outcome", kOutcomeNames[i]}});
  }
  auto& failures =
      prometheus::BuildCounter()
          .Name("cachewatch_proxy_observe_failures_total")
          .Help(
              "Forwarded exchanges the proxy could not observe, by reason "
              "(the forwarded traffic is never affected).")
          .Register(registry);
  for (size_t i = 0; i < kFailureNames.size(); ++i) {
    observe_failures_[i] = &failures.Add({{"reason", kFailureNames[i]}});
  }
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("cachewatch_proxy_observe_queue_exchanges")
                      .Help("Forwarded exchanges waiting to be observed.")
                      .Register(registry)
                      .Add({});
}

void ProxyMetrics::OnRequest(Outcome outcome) {
  requests_[static_cast<size_t>(outcome)]->Increment();
}

void ProxyMetrics::OnObserveFailure(ObserveFailure reason) {
  observe_failures_[static_cast<size_t>(reason)]->Increment();
}

void ProxyMetrics::SetQueueDepth(size_t exchanges) {
  queue_depth_->Set(static_cast<double>(exchanges));
}

}  // namespace cachewatch
