// The HTTP proxy's settings (the --proxy-* flags; docs/PROXY.md).
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_OPTIONS_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_OPTIONS_H_

#include <cstddef>
#include <string>
#include <vector>

namespace cachewatch {

struct ProxyOptions {
  std::string listen;                  // host:port; "" disables the proxy.
  std::vector<std::string> upstreams;  // ROUTE=URL (proxy_routes.h).
  // PEM CA bundle trusted for https upstreams instead of the system store.
  std::string upstream_ca;
  // Ask the provider for its cache diagnostics against the lane's previous
  // response (changes the request body; off by default).
  bool request_diagnostics = false;
  int threads = 2;                        // I/O threads.
  size_t observe_queue = 1024;            // Exchanges waiting to be observed.
  size_t max_request_bytes = 32u << 20;   // Larger: 413.
  size_t max_observed_bytes = 16u << 20;  // Response bytes copied per exchange.
  int upstream_timeout_seconds = 600;     // Silence from the upstream.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_OPTIONS_H_
