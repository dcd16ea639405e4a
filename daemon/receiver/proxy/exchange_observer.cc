#include "daemon/receiver/proxy/exchange_observer.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cachewatch/client/hash.h"
#include "daemon/receiver/proxy/lane_inference.h"
#include "daemon/receiver/proxy/observed_request.h"
#include "daemon/receiver/proxy/observed_usage.h"
#include "daemon/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace cachewatch {
namespace {

// The daemon's limits (daemon/pipeline/validation.h).
constexpr size_t kMaxAgentOrLaneBytes = 128;
constexpr size_t kMaxSessionOrRequestIdBytes = 256;

std::string_view HeaderValue(const HttpHeaders& headers,
                             std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return {};
}

bool HasHeader(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (key == name) return true;
  }
  return false;
}

// An x-cachewatch-* header's value: absent → empty; present → 1..max_bytes
// printable ASCII.
absl::StatusOr<std::string_view> IdentityHeader(const HttpHeaders& headers,
                                                std::string_view name,
                                                size_t max_bytes) {
  if (!HasHeader(headers, name)) return std::string_view();
  const std::string_view value = HeaderValue(headers, name);
  bool printable = !value.empty() && value.size() <= max_bytes;
  for (const char c : value) printable = printable && c >= 0x20 && c < 0x7f;
  if (!printable) {
    return absl::InvalidArgumentError(
        absl::StrCat(absl::string_view(name.data(), name.size()),
                     " must be 1..", max_bytes, " bytes of printable ASCII"));
  }
  return value;
}

void SetTimestamp(int64_t unix_us, google::protobuf::Timestamp* timestamp) {
  int64_t seconds = unix_us / 1'000'000;
  int64_t micros = unix_us % 1'000'000;
  if (micros < 0) {
    micros += 1'000'000;
    --seconds;
  }
  timestamp->set_seconds(seconds);
  timestamp->set_nanos(static_cast<int32_t>(micros * 1000));
}

// The request id: the provider's response id, else its request id header,
// else one made from the exchange.
std::string RequestIdOf(const HttpExchange& exchange,
                        const ObservedUsage& usage) {
  if (!usage.response_id.empty()) return usage.response_id;
  for (const char* header : {"request-id", "x-request-id"}) {
    const std::string_view value =
        HeaderValue(exchange.response_headers, header);
    if (!value.empty() && value.size() <= kMaxSessionOrRequestIdBytes) {
      return std::string(value);
    }
  }
  std::string key = absl::StrCat(exchange.request_unix_us, ":");
  key.append(exchange.request_body);
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016" PRIx64, client::HashBytes(key));
  return absl::StrCat("proxy-", buffer);
}

// The agent: x-cachewatch-agent, else one known by its User-Agent, else
// the configured default.
std::string AgentOf(std::string_view header, const HttpHeaders& headers,
                    const std::string& default_agent) {
  if (!header.empty()) return std::string(header);
  const std::string_view user_agent = HeaderValue(headers, "user-agent");
  if (user_agent.starts_with("claude-cli/")) return "claude-code";
  if (user_agent.starts_with("codex_cli_rs/")) return "codex";
  return default_agent;
}

// Whether an OpenAI model takes prompt_cache_options (GPT-5.6 and later).
bool TakesPromptCacheOptions(std::string_view model) {
  if (!model.starts_with("gpt-")) return false;
  model.remove_prefix(4);
  int major = 0;
  size_t i = 0;
  while (i < model.size() && model[i] >= '0' && model[i] <= '9') {
    major = major * 10 + (model[i++] - '0');
    if (major > 1000) return false;
  }
  if (i == 0) return false;
  int minor = 0;
  if (i < model.size() && model[i] == '.') {
    ++i;
    const size_t start = i;
    while (i < model.size() && model[i] >= '0' && model[i] <= '9') {
      minor = minor * 10 + (model[i++] - '0');
      if (minor > 1000) return false;
    }
    if (i == start) return false;
  }
  return major > 5 || (major == 5 && minor >= 6);
}

// `body` with `member` ("name":value) inserted as its first member; the
// body is a JSON object with at least one member.
std::string WithFirstMember(std::string_view body, std::string_view member) {
  const size_t open = body.find('{');
  std::string out;
  out.reserve(body.size() + member.size() + 1);
  out.append(body.substr(0, open + 1));
  out.append(member);
  out.push_back(',');
  out.append(body.substr(open + 1));
  return out;
}

}  // namespace

class ExchangeObserver::Impl {
 public:
  explicit Impl(const ExchangeObserverOptions& options)
      : options_(options), lanes_(options.max_inferred_lanes) {}

  absl::StatusOr<ObservedTurn> Observe(const HttpExchange& exchange);
  std::optional<std::string> WithDiagnosticsRequest(
      std::string_view target, const HttpHeaders& request_headers,
      std::string_view request_body);
  void RestoreLanes(absl::Span<const RestoredLane> lanes);

 private:
  // What the observer knows of the request and who sent it.
  struct Request {
    ProxyApi api;
    ObservedRequest observed;
    std::string agent;
    std::string_view session_header;
    std::string_view lane_header;
  };

  absl::StatusOr<Request> Read(std::string_view method, std::string_view target,
                               std::string_view upstream_host,
                               const HttpHeaders& headers,
                               std::string_view body) const;

  static LaneRequest LaneRequestOf(const Request& request) {
    LaneRequest lane;
    lane.agent = request.agent;
    lane.session_id = request.session_header.empty()
                          ? std::string_view(request.observed.body_session_id)
                          : request.session_header;
    lane.lane = request.lane_header;
    lane.prefix_identity = request.observed.prefix_identity;
    lane.message_chain = absl::MakeConstSpan(
        request.observed.snapshot.message_chain().data(),
        static_cast<size_t>(request.observed.snapshot.message_chain_size()));
    lane.compaction_marker = request.observed.compaction_marker;
    lane.previous_response_id = request.observed.previous_response_id;
    return lane;
  }

  const ExchangeObserverOptions options_;
  // std::mutex, not absl::Mutex: ThreadSanitizer sees only the former with
  // Debian's uninstrumented Abseil (docs/OPERATIONS.md, "Sanitizers").
  std::mutex mutex_;
  LaneInference lanes_;  // Guarded by mutex_.
};

absl::StatusOr<ExchangeObserver::Impl::Request> ExchangeObserver::Impl::Read(
    std::string_view method, std::string_view target,
    std::string_view upstream_host, const HttpHeaders& headers,
    std::string_view body) const {
  CACHEWATCH_ASSIGN_OR_RETURN(const ProxyApi api, EndpointOf(method, target));
  CACHEWATCH_ASSIGN_OR_RETURN(
      const std::string_view agent,
      IdentityHeader(headers, "x-cachewatch-agent", kMaxAgentOrLaneBytes));
  CACHEWATCH_ASSIGN_OR_RETURN(const std::string_view session,
                              IdentityHeader(headers, "x-cachewatch-session",
                                             kMaxSessionOrRequestIdBytes));
  CACHEWATCH_ASSIGN_OR_RETURN(
      const std::string_view lane,
      IdentityHeader(headers, "x-cachewatch-lane", kMaxAgentOrLaneBytes));
  const v1::Provider provider =
      ProviderOf(api, upstream_host, target, options_.provider_hosts);
  CACHEWATCH_ASSIGN_OR_RETURN(ObservedRequest observed,
                              ReadObservedRequest(api, provider, headers, body,
                                                  options_.max_body_bytes));
  return Request{api, std::move(observed),
                 AgentOf(agent, headers, options_.default_agent), session,
                 lane};
}

absl::StatusOr<ObservedTurn> ExchangeObserver::Impl::Observe(
    const HttpExchange& exchange) {
  CACHEWATCH_ASSIGN_OR_RETURN(
      Request request,
      Read(exchange.method, exchange.target, exchange.upstream_host,
           exchange.request_headers, exchange.request_body));
  ObservedTurn turn;
  if (exchange.response_status < 200 || exchange.response_status > 299) {
    turn.note = exchange.response_status == 0
                    ? "no response from the upstream"
                    : absl::StrCat("HTTP ", exchange.response_status,
                                   ": the request was not answered");
    return turn;
  }
  ObservedUsage usage = ReadObservedUsage(
      request.api, request.observed.include_usage, exchange.response_status,
      exchange.response_headers, exchange.response_body,
      exchange.response_complete, options_.max_body_bytes);
  LaneDecision decision;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    decision = lanes_.Assign(LaneRequestOf(request), usage.response_id);
  }
  const std::string request_id = RequestIdOf(exchange, usage);
  v1::Snapshot& snapshot = request.observed.snapshot;
  snapshot.set_agent(request.agent);
  snapshot.set_session_id(decision.session_id);
  snapshot.set_lane(decision.lane);
  snapshot.set_request_id(request_id);
  SetTimestamp(exchange.request_unix_us, snapshot.mutable_request_time());
  if (decision.rule == LaneRule::kCompaction) {
    snapshot.set_expected_drop(v1::EXPECTED_DROP_COMPACTION);
  }
  if (!usage.raw_usage_json.empty()) {
    v1::Usage& out = turn.usage.emplace();
    out.set_agent(request.agent);
    out.set_session_id(decision.session_id);
    out.set_lane(decision.lane);
    out.set_request_id(request_id);
    SetTimestamp(exchange.response_unix_us, out.mutable_response_time());
    out.set_provider(snapshot.provider());
    out.set_model(usage.model.empty() ? snapshot.model() : usage.model);
    out.set_raw_usage_json(std::move(usage.raw_usage_json));
    if (usage.diagnostics.has_value()) {
      *out.mutable_provider_diagnostics() = *std::move(usage.diagnostics);
    }
  }
  turn.snapshot = std::move(snapshot);
  turn.usage_complete = turn.usage.has_value() && usage.complete;
  turn.note = std::move(usage.note);
  return turn;
}

std::optional<std::string> ExchangeObserver::Impl::WithDiagnosticsRequest(
    std::string_view target, const HttpHeaders& request_headers,
    std::string_view request_body) {
  absl::StatusOr<Request> request =
      Read("POST", target, "", request_headers, request_body);
  if (!request.ok() || request->observed.has_diagnostics_field) {
    return std::nullopt;
  }
  std::string previous;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    previous = lanes_.Peek(LaneRequestOf(*request)).previous_response_id;
  }
  const v1::Snapshot& snapshot = request->observed.snapshot;
  switch (request->api) {
    case ProxyApi::kAnthropicMessages: {
      if (snapshot.provider() != v1::PROVIDER_ANTHROPIC) return std::nullopt;
      const nlohmann::json id =
          previous.empty() ? nlohmann::json() : nlohmann::json(previous);
      return WithFirstMember(
          request_body,
          absl::StrCat("\"diagnostics\":{\"previous_message_id\":", id.dump(),
                       "}"));
    }
    case ProxyApi::kOpenAiResponses:
      if (previous.empty() || !TakesPromptCacheOptions(snapshot.model())) {
        return std::nullopt;
      }
      return WithFirstMember(
          request_body,
          absl::StrCat("\"prompt_cache_options\":{\"comparison_response_id\":",
                       nlohmann::json(previous).dump(), "}"));
    case ProxyApi::kOpenAiChat:
      return std::nullopt;
  }
  return std::nullopt;
}

void ExchangeObserver::Impl::RestoreLanes(
    absl::Span<const RestoredLane> lanes) {
  std::vector<const RestoredLane*> recent_first;
  for (const RestoredLane& lane : lanes) {
    const std::optional<Turn>& turn = lane.state.last_turn;
    if (turn.has_value() && turn->snapshot != nullptr) {
      recent_first.push_back(&lane);
    }
  }
  std::stable_sort(recent_first.begin(), recent_first.end(),
                   [](const RestoredLane* a, const RestoredLane* b) {
                     return a->state.last_turn->request_time_us >
                            b->state.last_turn->request_time_us;
                   });
  std::lock_guard<std::mutex> lock(mutex_);
  for (const RestoredLane* lane : recent_first) {
    const Turn& turn = *lane->state.last_turn;
    const v1::Snapshot& snapshot = *turn.snapshot;
    const absl::Span<const uint64_t> chain =
        turn.message_chain.empty()
            ? absl::MakeConstSpan(
                  snapshot.message_chain().data(),
                  static_cast<size_t>(snapshot.message_chain_size()))
            : absl::MakeConstSpan(turn.message_chain);
    lanes_.Restore(StoredLaneHead{
        .agent = lane->key.agent,
        .session_id = lane->key.session_id,
        .lane = lane->key.lane,
        .prefix_identity = PrefixIdentityOf(
            snapshot.system_hash(),
            turn.tools != nullptr ? *turn.tools : snapshot.tools()),
        .message_chain = chain,
        .last_response_id = turn.request_id});
  }
}

ExchangeObserver::ExchangeObserver(const ExchangeObserverOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}

ExchangeObserver::~ExchangeObserver() = default;

absl::StatusOr<ObservedTurn> ExchangeObserver::Observe(
    const HttpExchange& exchange) {
  return impl_->Observe(exchange);
}

void ExchangeObserver::RestoreLanes(absl::Span<const RestoredLane> lanes) {
  impl_->RestoreLanes(lanes);
}

std::optional<std::string> ExchangeObserver::WithDiagnosticsRequest(
    std::string_view target, const HttpHeaders& request_headers,
    std::string_view request_body) {
  return impl_->WithDiagnosticsRequest(target, request_headers, request_body);
}

}  // namespace cachewatch
