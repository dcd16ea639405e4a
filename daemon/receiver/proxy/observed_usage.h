// Reads the usage out of a response the proxy forwarded, from the JSON body
// or from the event stream: Anthropic's message_start usage merged with
// message_delta's; OpenAI Chat Completions' chunk that carries usage (sent
// when the request set stream_options.include_usage); the Responses API's
// response.completed (or .incomplete / .failed). The provider's own cache
// diagnostics travel with it: Anthropic `diagnostics` (on the message, or on
// message_start's), OpenAI Responses `prompt_cache_diagnostics`.
//
// Pure function; thread-safe.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_OBSERVED_USAGE_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_OBSERVED_USAGE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "cachewatch/v1/usage.pb.h"
#include "daemon/receiver/proxy/http_exchange.h"
#include "daemon/receiver/proxy/proxy_endpoint.h"

namespace cachewatch {

struct ObservedUsage {
  // The provider's id of the response (msg_…, chatcmpl-…, resp_…); empty
  // when the response carried none.
  std::string response_id;
  // The model the response names; empty when none.
  std::string model;
  // {"usage": <the provider's usage object verbatim>}, with the provider's
  // diagnostics object beside it under its own name ("diagnostics",
  // "prompt_cache_diagnostics") when the response has one — the shape of a
  // whole response, which NormalizeRawUsage reads. Empty when the response
  // carried no usage.
  std::string raw_usage_json;
  // The diagnostics' miss reason, when the provider named one (Anthropic
  // cache_miss_reason.type; OpenAI's reason for a cache_miss, else its
  // outcome other than cache_hit).
  std::optional<v1::ProviderCacheDiagnostics> diagnostics;
  // The usage is final. False with a usage when a stream was cut after its
  // first usage (Anthropic: message_start's input and cache counts are
  // final, the output count is not).
  bool complete = false;
  // Why the usage is absent or not final; empty when it is complete.
  std::string note;
};

// The usage of a response to a request to `api` (`include_usage` as the
// request set it), answered with `status`, `headers` and `body`;
// `body_complete` is false when the response ended early. Bodies over
// `max_body_bytes` are not read (a note says so).
ObservedUsage ReadObservedUsage(ProxyApi api, bool include_usage, int status,
                                const HttpHeaders& headers,
                                std::string_view body, bool body_complete,
                                size_t max_body_bytes);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_OBSERVED_USAGE_H_
