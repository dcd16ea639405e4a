// Which provider API an exchange the proxy forwarded belongs to, and whose
// cache rules apply to it (docs/PROXY.md, "Observation"). Pure functions;
// thread-safe.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_ENDPOINT_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_ENDPOINT_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cachewatch/v1/snapshot.pb.h"

namespace cachewatch {

enum class ProxyApi {
  kAnthropicMessages,  // POST .../v1/messages
  kOpenAiChat,         // POST .../chat/completions
  kOpenAiResponses,    // POST .../v1/responses
};

// The API of a request: POST to a path (the query ignored) that ends in
// /v1/messages, /chat/completions or /v1/responses, under any base path.
// NotFound for any other method or path.
absl::StatusOr<ProxyApi> EndpointOf(std::string_view method,
                                    std::string_view target);

// Host suffix → provider, e.g. {"llm.internal.example", PROVIDER_DEEPSEEK};
// a host matches a suffix when it equals it or ends in "." + suffix.
using ProviderHosts = std::vector<std::pair<std::string, v1::Provider>>;

// The provider of a request to `api`, forwarded to `upstream_host` (may be
// empty) at `target`: the first of `hosts`, then of the built-in hosts
// (anthropic.com, openai.com, openrouter.ai → OpenAI, aliyuncs.com →
// DashScope, deepseek.com, moonshot.cn / moonshot.ai / kimi.com → Kimi) that
// the host matches, then a "/compatible-mode/" path → DashScope, else the
// API's own provider. The Messages API is Anthropic unless the host is
// Kimi's (its Anthropic-compatible usage is normalized as Kimi); the OpenAI
// APIs are OpenAI unless the host names an OpenAI-compatible provider.
v1::Provider ProviderOf(ProxyApi api, std::string_view upstream_host,
                        std::string_view target, const ProviderHosts& hosts);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_PROXY_ENDPOINT_H_
