// libFuzzer target: ExchangeObserver (daemon/receiver/proxy/
// exchange_observer.h), and through it the request reader, the usage
// reader, the event-stream reader and the lane inference.
//
// Input: the first byte picks the exchange's shape — bits 0-1 the endpoint
// (0 /v1/messages, 1 /v1/chat/completions, 2 /v1/responses, 3
// /v1/messages?beta=true), bit 2 a text/event-stream response, bit 3 a
// response cut short, bit 4 an HTTP 500 answer; the rest is the request
// body, a NUL byte, and the response body (no NUL: an empty response). An
// empty input is skipped.
//
// Invariants checked, beyond "no crash, no leak, no undefined behaviour":
//   - an error is InvalidArgument or ResourceExhausted whose message starts
//     "request body: " (the endpoints are observed, the headers are valid);
//   - a turn has a snapshot exactly when the request was answered (2xx),
//     and then the snapshot and usage carry the same lane key and request
//     id; a usage has raw JSON; usage_complete implies a usage; a turn
//     without a complete usage says why in its note;
//   - the snapshot's breakpoints point inside their segment;
//   - observing the same exchange again gives the same snapshot hashes and
//     lane (the second request repeats the first's chain);
//   - WithDiagnosticsRequest either declines or returns the body with one
//     member added first, which parses as JSON and, without that member,
//     equals the body.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/receiver/proxy/exchange_observer.h"
#include "fuzz/fuzz_check.h"
#include "nlohmann/json.hpp"

namespace {

using cachewatch::ExchangeObserver;
using cachewatch::HttpExchange;
using cachewatch::ObservedTurn;

constexpr const char* kTargets[] = {"/v1/messages", "/v1/chat/completions",
                                    "/v1/responses", "/v1/messages?beta=true"};

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

void CheckTurn(const HttpExchange& exchange,
               const absl::StatusOr<ObservedTurn>& turn) {
  if (!turn.ok()) {
    FUZZ_CHECK(turn.status().code() == absl::StatusCode::kInvalidArgument ||
               turn.status().code() == absl::StatusCode::kResourceExhausted);
    const absl::string_view message = turn.status().message();
    FUZZ_CHECK(StartsWith(std::string_view(message.data(), message.size()),
                          "request body: "));
    return;
  }
  const bool answered = exchange.response_status == 200;
  FUZZ_CHECK(turn->snapshot.has_value() == answered);
  FUZZ_CHECK(!turn->usage_complete || turn->usage.has_value());
  FUZZ_CHECK(turn->usage_complete || !turn->note.empty());
  if (!answered) {
    FUZZ_CHECK(!turn->usage.has_value());
    return;
  }
  const cachewatch::v1::Snapshot& snapshot = *turn->snapshot;
  FUZZ_CHECK(!snapshot.agent().empty() && !snapshot.session_id().empty() &&
             !snapshot.lane().empty() && !snapshot.request_id().empty() &&
             !snapshot.model().empty());
  for (const cachewatch::v1::Breakpoint& breakpoint :
       snapshot.cache_control().breakpoints()) {
    const int index = static_cast<int>(breakpoint.index());
    switch (breakpoint.segment()) {
      case cachewatch::v1::PROMPT_SEGMENT_TOOLS:
        FUZZ_CHECK(index < snapshot.tools_size());
        break;
      case cachewatch::v1::PROMPT_SEGMENT_MESSAGES:
        FUZZ_CHECK(index < snapshot.message_chain_size());
        break;
      case cachewatch::v1::PROMPT_SEGMENT_SYSTEM:
        break;  // Chat system breakpoints count system messages.
      default:
        FUZZ_CHECK(false);
    }
  }
  if (turn->usage.has_value()) {
    const cachewatch::v1::Usage& usage = *turn->usage;
    FUZZ_CHECK(!usage.raw_usage_json().empty());
    FUZZ_CHECK(usage.agent() == snapshot.agent() &&
               usage.session_id() == snapshot.session_id() &&
               usage.lane() == snapshot.lane() &&
               usage.request_id() == snapshot.request_id());
  }
}

bool SameHashes(const cachewatch::v1::Snapshot& a,
                const cachewatch::v1::Snapshot& b) {
  if (a.system_hash() != b.system_hash() ||
      a.options_hash() != b.options_hash() ||
      a.tools_size() != b.tools_size() ||
      a.message_chain_size() != b.message_chain_size() ||
      a.session_id() != b.session_id() || a.lane() != b.lane()) {
    return false;
  }
  for (int i = 0; i < a.tools_size(); ++i) {
    if (a.tools(i).schema_hash() != b.tools(i).schema_hash()) return false;
  }
  for (int i = 0; i < a.message_chain_size(); ++i) {
    if (a.message_chain(i) != b.message_chain(i)) return false;
  }
  return true;
}

void CheckDiagnosticsRequest(ExchangeObserver& observer,
                             const HttpExchange& exchange) {
  const std::optional<std::string> body = observer.WithDiagnosticsRequest(
      exchange.target, exchange.request_headers, exchange.request_body);
  if (!body.has_value()) return;
  nlohmann::json sent = nlohmann::json::parse(*body, nullptr, false);
  const nlohmann::json original =
      nlohmann::json::parse(exchange.request_body, nullptr, false);
  FUZZ_CHECK(sent.is_object() && original.is_object());
  FUZZ_CHECK(sent.size() == original.size() + 1);
  sent.erase(sent.contains("diagnostics") ? "diagnostics"
                                          : "prompt_cache_options");
  FUZZ_CHECK(sent == original);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t shape = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1,
                              size - 1);
  const size_t split = rest.find('\0');
  HttpExchange exchange;
  exchange.method = "POST";
  exchange.target = kTargets[shape & 3];
  exchange.request_headers = {{"anthropic-beta", "b,a"},
                              {"user-agent", "claude-cli/2.1.0"}};
  exchange.request_body = std::string(rest.substr(0, split));
  exchange.response_status = (shape & 16) != 0 ? 500 : 200;
  exchange.response_headers = {{"content-type", (shape & 4) != 0
                                                    ? "text/event-stream"
                                                    : "application/json"}};
  if (split != std::string_view::npos) {
    exchange.response_body = std::string(rest.substr(split + 1));
  }
  exchange.response_complete = (shape & 8) == 0;
  exchange.request_unix_us = 1'790'000'000'000'000;
  exchange.response_unix_us = 1'790'000'001'000'000;

  ExchangeObserver observer({.max_inferred_lanes = 4});
  CheckDiagnosticsRequest(observer, exchange);
  const absl::StatusOr<ObservedTurn> first = observer.Observe(exchange);
  CheckTurn(exchange, first);
  CheckDiagnosticsRequest(observer, exchange);
  const absl::StatusOr<ObservedTurn> second = observer.Observe(exchange);
  CheckTurn(exchange, second);
  FUZZ_CHECK(first.ok() == second.ok());
  if (first.ok() && first->snapshot.has_value()) {
    FUZZ_CHECK(SameHashes(*first->snapshot, *second->snapshot));
  }
  return 0;
}
