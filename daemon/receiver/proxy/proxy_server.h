// The HTTP proxy receiver (docs/PROXY.md): an HTTP/1.1 server with
// keep-alive that forwards every request to the upstream its route names
// (proxy_routes.h), streams the response back as it arrives (each piece
// written and flushed at once; never buffered whole), and hands each
// finished exchange to the ObservationQueue, off the request path.
//
// Forwarding is byte-for-byte but for what HTTP requires of a proxy:
// hop-by-hop headers (RFC 9110 §7.6.1) are not forwarded, Host is the
// upstream's, a request body is sent with Content-Length, and a response
// without Content-Length is sent to the agent chunked. The agent's API key
// passes through and is neither logged nor given to the observer.
//
// Fails open: observation never alters, delays or fails a request. When the
// upstream cannot be reached the agent gets a 502 with a JSON error body in
// its provider's shape (Anthropic when the request has an anthropic-version
// header, else OpenAI).
//
// Stopping (docs/PROXY.md, "Shutdown"): BeginShutdown stops accepting and
// closes the agent connections that wait for their next request; requests
// in flight run on, their responses marked `Connection: close`, until they
// end or the destructor cuts them off. WaitForRequests waits for them.
//
// Thread-safe: Start once; BeginShutdown, WaitForRequests and the
// destructor from one thread, in that order.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_SERVER_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_SERVER_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/receiver/proxy/exchange_observer.h"
#include "daemon/receiver/proxy/observation_queue.h"
#include "daemon/receiver/proxy/proxy_metrics.h"
#include "daemon/receiver/proxy/proxy_options.h"
#include "daemon/receiver/proxy/proxy_routes.h"

namespace cachewatch {

class ProxyServer {
 public:
  // Binds options.listen and serves on options.threads threads. `observer`
  // rewrites request bodies when options.request_diagnostics is set.
  // InvalidArgument for a bad address or CA file, Unavailable when the
  // address cannot be bound. The pointers must outlive the server.
  static absl::StatusOr<std::unique_ptr<ProxyServer>> Start(
      const ProxyOptions& options, ProxyRoutes routes,
      ExchangeObserver* observer, ObservationQueue* queue,
      ProxyMetrics* metrics);

  // Stops: no new connections; requests still in flight are cut off.
  ~ProxyServer();

  ProxyServer(const ProxyServer&) = delete;
  ProxyServer& operator=(const ProxyServer&) = delete;

  // The address bound, host:port (the real port when 0 was asked for).
  std::string address() const;

  // No new connections from now on; idle agent connections are closed, and
  // each request in flight ends its connection when it is answered.
  // Returns at once; idempotent.
  void BeginShutdown();

  // Blocks until no request is in flight or until `deadline`; true when
  // none is left. Meaningful after BeginShutdown (before it, new requests
  // may start at any time).
  bool WaitForRequests(std::chrono::steady_clock::time_point deadline);

  class Impl;

 private:
  explicit ProxyServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_SERVER_H_
