// Turns the exchanges the HTTP proxy forwarded into the Snapshot and Usage
// records the client library would have sent for them: tools in request
// order with the shared RFC 8785 + XXH3 schema hashes, system sections, the
// message chain, cache_control breakpoints, model and the cache-keying
// request options; the usage (with provider diagnostics) from the JSON body
// or the event stream; the provider's response id as request id. Lanes come
// from the x-cachewatch-* headers, else the session id in the body, else
// inference from the message chain (docs/PROXY.md).
//
// Only hashes, names and counts are kept: no prompt text outlives a call.
//
// Thread-safe: any number of threads may call any method.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_EXCHANGE_OBSERVER_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_EXCHANGE_OBSERVER_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "cachewatch/v1/service.pb.h"
#include "daemon/receiver/proxy/http_exchange.h"

namespace cachewatch {

struct ObservedTurn {
  // Absent when the request could not be turned into a snapshot.
  std::optional<v1::Snapshot> snapshot;
  // Absent when the response carried no usage (an error, a cut stream).
  std::optional<v1::Usage> usage;
};

struct ExchangeObserverOptions {
  // Agent name when the request names none (x-cachewatch-agent). Default
  // "proxy".
  std::string default_agent = "proxy";
  // Lanes remembered for lane inference; the least recently used beyond
  // this are forgotten. Default 10,000.
  size_t max_inferred_lanes = 10000;
};

class ExchangeObserver {
 public:
  explicit ExchangeObserver(const ExchangeObserverOptions& options);
  ~ExchangeObserver();

  ExchangeObserver(const ExchangeObserver&) = delete;
  ExchangeObserver& operator=(const ExchangeObserver&) = delete;

  // NotFound for an endpoint that is not observed (anything but POST
  // /v1/messages, /v1/chat/completions, /v1/responses, under any base
  // path); InvalidArgument, naming what is wrong, for a body that cannot
  // be read. Never affects what was forwarded.
  absl::StatusOr<ObservedTurn> Observe(const HttpExchange& exchange);

  // For --proxy-request-diagnostics: the request body with the provider's
  // own cache diagnostics requested against the lane's previous response
  // (Anthropic `diagnostics.previous_message_id`, OpenAI Responses
  // `prompt_cache_options.comparison_response_id`); nullopt to forward the
  // body unchanged (no previous response, unknown endpoint, bad body).
  std::optional<std::string> WithDiagnosticsRequest(
      std::string_view target, const HttpHeaders& request_headers,
      std::string_view request_body);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_EXCHANGE_OBSERVER_H_
