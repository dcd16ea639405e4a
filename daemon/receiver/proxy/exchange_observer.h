// Turns the exchanges the HTTP proxy forwarded into the Snapshot and Usage
// records the client library would have sent for them: tools in request
// order with the shared RFC 8785 + XXH3 schema hashes, system sections, the
// message chain, cache_control breakpoints, model and the cache-keying
// request options; the usage (with provider diagnostics) from the JSON body
// or the event stream; the provider's response id as request id. Lanes come
// from the x-cachewatch-* headers, else the session id in the body, else
// inference from the message chain (docs/PROXY.md, "Observation" and
// "Lanes"; lane_inference.h has the rules).
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
#include "absl/types/span.h"
#include "cachewatch/v1/service.pb.h"
#include "daemon/receiver/proxy/http_exchange.h"
#include "daemon/receiver/proxy/proxy_endpoint.h"
#include "daemon/store/record.h"

namespace cachewatch {

struct ObservedTurn {
  // Absent when the request was not answered (no response, or an HTTP
  // status other than 2xx: the provider processed no prompt).
  std::optional<v1::Snapshot> snapshot;
  // Absent when the response carried no usage (an error, a stream cut
  // before its usage, a Chat Completions stream without include_usage).
  std::optional<v1::Usage> usage;
  // False when `usage` is absent or not final (an Anthropic stream cut after
  // message_start: its input and cache counts are final, output is not).
  bool usage_complete = false;
  // Why there is no snapshot, or the usage is absent or not final; empty
  // otherwise. For logs and metrics; never holds prompt text.
  std::string note;
};

struct ExchangeObserverOptions {
  // Agent name when the request names none (x-cachewatch-agent). Default
  // "proxy".
  std::string default_agent = "proxy";
  // Lanes remembered for lane inference; the least recently used beyond
  // this are forgotten. Default 10,000.
  size_t max_inferred_lanes = 10000;
  // Request and response bodies larger than this are not read (the
  // request: ResourceExhausted; the response: no usage, noted). Default
  // 32 MiB, Anthropic's request size limit.
  size_t max_body_bytes = size_t{32} << 20;
  // Upstream host suffix → provider, checked before the built-in hosts
  // (proxy_endpoint.h), e.g. {"llm.example.com", v1::PROVIDER_DEEPSEEK}.
  ProviderHosts provider_hosts{};
};

class ExchangeObserver {
 public:
  explicit ExchangeObserver(const ExchangeObserverOptions& options);
  ~ExchangeObserver();

  ExchangeObserver(const ExchangeObserver&) = delete;
  ExchangeObserver& operator=(const ExchangeObserver&) = delete;

  // NotFound for an endpoint that is not observed (anything but POST
  // /v1/messages, /chat/completions, /v1/responses, under any base path);
  // InvalidArgument, naming what is wrong, for a request body that cannot be
  // read or an x-cachewatch-* header that is not 1..128 (agent, lane) or
  // 1..256 (session) bytes of printable ASCII; ResourceExhausted for a request
  // body over max_body_bytes. Never affects what was forwarded.
  absl::StatusOr<ObservedTurn> Observe(const HttpExchange& exchange);

  // For a restart: lane inference remembers `lanes` (the store's lanes, each
  // with its last turn, as IngestPipeline::RestoreLanes read them) as the
  // heads of their histories, most recent first, up to max_inferred_lanes,
  // so that a request continuing one goes to it as before the restart.
  void RestoreLanes(absl::Span<const RestoredLane> lanes);

  // For --proxy-request-diagnostics: the request body with the provider's
  // own cache diagnostics requested against the lane's previous response,
  // the rest of the body byte for byte unchanged. Anthropic (Messages API):
  // `"diagnostics":{"previous_message_id":ID}` on every request, with null
  // on a lane's first turn (the API keeps a fingerprint only of requests
  // that carry the object). OpenAI Responses, GPT-5.6 and later models:
  // `"prompt_cache_options":{"comparison_response_id":ID}` once the lane
  // has a previous response. nullopt to forward the body unchanged: another
  // endpoint or provider, a body that cannot be read, a body that already
  // has the field, no previous response (OpenAI), an older model (OpenAI).
  // The previous response is the last one Observe() saw for the lane. The
  // upstream is not known here: call it only for requests routed to
  // Anthropic's or OpenAI's own API (Kimi's Anthropic-compatible endpoint,
  // Bedrock and Vertex do not take the field).
  std::optional<std::string> WithDiagnosticsRequest(
      std::string_view target, const HttpHeaders& request_headers,
      std::string_view request_body);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_EXCHANGE_OBSERVER_H_
