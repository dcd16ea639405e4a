#include "daemon/receiver/proxy/proxy_receiver.h"

#include <algorithm>
#include <utility>

#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

ExchangeObserverOptions ObserverOptions(const ProxyOptions& options) {
  ExchangeObserverOptions observer;
  observer.max_body_bytes =
      std::max(options.max_request_bytes, options.max_observed_bytes);
  return observer;
}

}  // namespace

ProxyReceiver::ProxyReceiver(const ProxyOptions& options,
                             IngestPipeline* pipeline,
                             prometheus::Registry& registry)
    : metrics_(registry),
      observer_(ObserverOptions(options)),
      queue_(options.observe_queue, options.max_observed_bytes, &observer_,
             pipeline, &metrics_) {}

ProxyReceiver::~ProxyReceiver() {
  server_.reset();  // No more exchanges; then queue_ drains as it goes.
}

absl::StatusOr<std::unique_ptr<ProxyReceiver>> ProxyReceiver::Start(
    const ProxyOptions& options, IngestPipeline* pipeline,
    prometheus::Registry& registry,
    absl::Span<const RestoredLane> recent_lanes) {
  CACHEWATCH_ASSIGN_OR_RETURN(ProxyRoutes routes,
                              ProxyRoutes::Make(options.upstreams));
  std::unique_ptr<ProxyReceiver> receiver(
      new ProxyReceiver(options, pipeline, registry));
  receiver->observer_.RestoreLanes(recent_lanes);
  CACHEWATCH_ASSIGN_OR_RETURN(
      receiver->server_,
      ProxyServer::Start(options, std::move(routes), &receiver->observer_,
                         &receiver->queue_, &receiver->metrics_));
  return receiver;
}

}  // namespace cachewatch
