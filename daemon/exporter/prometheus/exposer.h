// Serves a Prometheus registry over HTTP on /metrics (prometheus-cpp's
// embedded civetweb server), with bind failures returned as a status instead
// of the exception prometheus-cpp throws.
//
// The returned Exposer serves until it is destroyed; it is thread-safe.
#ifndef CACHEWATCH_DAEMON_EXPORTER_PROMETHEUS_EXPOSER_H_
#define CACHEWATCH_DAEMON_EXPORTER_PROMETHEUS_EXPOSER_H_

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace cachewatch {

// Starts serving `registry` on http://`address`/metrics. `address` is
// "host:port" (e.g. "127.0.0.1:9464"); port 0 picks a free port, which
// Exposer::GetListeningPorts() reports. The exposer holds the registry only
// weakly: the caller keeps it alive (Metrics does) for as long as it should
// be served.
//
// Returns InvalidArgument when `address` is empty or `registry` is null, and
// Unavailable when the server cannot listen on `address` (e.g. the port is
// taken).
absl::StatusOr<std::unique_ptr<prometheus::Exposer>> StartExposer(
    const std::string& address, std::shared_ptr<prometheus::Registry> registry);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_EXPORTER_PROMETHEUS_EXPOSER_H_
