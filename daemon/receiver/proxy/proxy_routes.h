// Where the HTTP proxy sends a request (docs/PROXY.md, "Routes"): the
// upstreams named by --proxy-upstream ROUTE=URL and the rule that picks one.
//
//   anthropic=URL  requests carrying an `anthropic-version` header (every
//                  Anthropic SDK and Claude Code send it). Default
//                  https://api.anthropic.com.
//   openai=URL     every other request. Default https://api.openai.com.
//   /PREFIX=URL    requests whose path is /PREFIX or starts with /PREFIX/ or
//                  /PREFIX?, with the prefix removed (checked before the two
//                  above, longest prefix first).
//
// URL is http:// or https://, a host, an optional port and an optional base
// path, which is put in front of the (remaining) request path:
// `openai=https://dashscope-intl.aliyuncs.com/compatible-mode` sends
// /v1/chat/completions to .../compatible-mode/v1/chat/completions.
//
// Pure functions of their arguments. ProxyRoutes is immutable after Make and
// may be used from any number of threads.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_ROUTES_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_ROUTES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace cachewatch {

struct ProxyUpstream {
  std::string route;        // "anthropic", "openai" or "/prefix".
  bool tls = true;          // https.
  std::string host;         // Without brackets for IPv6.
  std::string port;         // "443" unless given.
  std::string base_path;    // "" or "/compatible-mode" (no trailing '/').
  std::string host_header;  // host, or host:port for a non-default port.
  std::string url;          // As configured, for logs.
};

// Parses one --proxy-upstream value, ROUTE=URL. InvalidArgument naming the
// flag and what is wrong.
absl::StatusOr<ProxyUpstream> ParseProxyUpstream(std::string_view flag);

// The error body the agent gets when the proxy itself answers, in the shape
// of the provider its SDK expects.
enum class ErrorShape { kAnthropic, kOpenAI };
// `type` is the provider's error type, e.g. "api_error".
std::string ProxyErrorBody(ErrorShape shape, std::string_view type,
                           std::string_view message);

class ProxyRoutes {
 public:
  // Every value of --proxy-upstream; anthropic and openai get their
  // defaults unless given. InvalidArgument for a bad value or a route given
  // twice.
  static absl::StatusOr<ProxyRoutes> Make(
      const std::vector<std::string>& flags);

  struct Match {
    const ProxyUpstream* upstream;  // Never null.
    std::string target;             // Path and query to send upstream.
  };
  // `target` is the request's path and query as received;
  // `anthropic_request` whether it carries an anthropic-version header.
  Match Route(std::string_view target, bool anthropic_request) const;

  const std::vector<ProxyUpstream>& upstreams() const { return upstreams_; }

 private:
  ProxyRoutes() = default;
  // Prefix routes longest first, then anthropic, then openai.
  std::vector<ProxyUpstream> upstreams_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_ROUTES_H_
