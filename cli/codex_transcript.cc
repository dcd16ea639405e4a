#include "cli/codex_transcript.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cli/json_member.h"
#include "nlohmann/json.hpp"

namespace cachewatch::cli {
namespace {

using Json = nlohmann::json;

int64_t CountMember(const Json& object, const char* name) {
  const Json* value = Member(object, name);
  return value != nullptr && value->is_number_integer()
             ? std::max<int64_t>(0, value->get<int64_t>())
             : 0;
}

}  // namespace

CodexTranscript::CodexTranscript(std::string path, ReadTally& tally,
                                 SeenRequests& seen, TurnSink sink)
    : context_(std::move(path), tally, seen, std::move(sink)),
      session_id_(context_.file_session_id) {}

void CodexTranscript::Line(std::string_view line, int64_t number) {
  const Json entry = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (entry.is_discarded() || !entry.is_object()) {
    context_.CorruptLine(number);
    return;
  }
  const std::string type = StringMember(entry, "type");
  const Json* payload = Member(entry, "payload");
  if (type.empty() || payload == nullptr || !payload->is_object()) {
    context_.tally.Skip(
        "codex: line without type and payload (pre-0.30 format)");
    return;
  }
  if (type == "session_meta") {
    if (std::string id = StringMember(*payload, "id");
        !id.empty() && !session_fixed_) {
      session_id_ = std::move(id);
      session_fixed_ = true;
    }
    if (const std::string version = StringMember(*payload, "cli_version");
        !version.empty()) {
      ++context_.tally.versions[absl::StrCat(kCodexAgent, " ", version)];
    }
    return;
  }
  if (type == "turn_context") {
    if (std::string model = StringMember(*payload, "model"); !model.empty()) {
      model_ = std::move(model);
    }
    return;
  }
  if (type == "response_item") {
    running_ = ChainStep(running_, payload->dump());
    return;
  }
  if (type == "compacted") {
    running_ = ChainStep(0, payload->dump());
    request_points_.clear();
    compaction_pending_ = true;
    return;
  }
  if (type != "event_msg") {
    context_.tally.Skip("codex: unknown type: " + type);
    return;
  }
  if (StringMember(*payload, "type") != "token_count") return;
  session_fixed_ = true;
  const Json* info = Member(*payload, "info");
  if (info == nullptr || !info->is_object()) {
    context_.tally.Skip("codex: token_count without info");
    return;
  }
  auto totals_of = [](const Json* usage) -> std::optional<Totals> {
    if (usage == nullptr || !usage->is_object()) return std::nullopt;
    Totals totals;
    totals.input = CountMember(*usage, "input_tokens");
    totals.cached = CountMember(*usage, "cached_input_tokens");
    if (totals.cached == 0) {
      totals.cached = CountMember(*usage, "cache_read_input_tokens");
    }
    totals.output = CountMember(*usage, "output_tokens");
    totals.reasoning = CountMember(*usage, "reasoning_output_tokens");
    totals.total = CountMember(*usage, "total_tokens");
    return totals;
  };
  const std::optional<Totals> cumulative =
      totals_of(Member(*info, "total_token_usage"));
  std::optional<Totals> last = totals_of(Member(*info, "last_token_usage"));
  if (cumulative.has_value()) {
    if (previous_totals_.has_value() && *previous_totals_ == *cumulative) {
      // Repeated (e.g. a rate-limit update).
      ++context_.tally.duplicate_requests;
      return;
    }
    if (!last.has_value()) {
      const Totals before = previous_totals_.value_or(Totals{});
      last =
          Totals{std::max<int64_t>(0, cumulative->input - before.input),
                 std::max<int64_t>(0, cumulative->cached - before.cached),
                 std::max<int64_t>(0, cumulative->output - before.output),
                 std::max<int64_t>(0, cumulative->reasoning - before.reasoning),
                 std::max<int64_t>(0, cumulative->total - before.total)};
    }
    previous_totals_ = cumulative;
  }
  if (!last.has_value()) {
    context_.tally.Skip("codex: token_count without token usage");
    return;
  }
  const std::string request_id = cumulative.has_value()
                                     ? absl::StrCat("total-", cumulative->total)
                                     : absl::StrCat("line-", number);
  if (!context_.seen.Insert(kCodexAgent,
                            absl::StrCat(session_id_, "/", request_id))) {
    ++context_.tally.duplicate_requests;
    return;
  }
  if (model_.empty()) {
    context_.tally.Skip("codex: token_count before any turn_context model");
    return;
  }
  RequestFields fields;
  if (!ParseTimestampMicros(StringMember(entry, "timestamp"),
                            &fields.time_us)) {
    context_.tally.Skip("codex: token_count without a valid timestamp");
    context_.tally.Problem(context_.path, number,
                           "token_count without a valid timestamp");
    return;
  }
  request_points_.push_back(running_);
  fields.agent = kCodexAgent;
  fields.session_id = session_id_;
  fields.lane = "main";
  fields.request_id = request_id;
  fields.provider = v1::PROVIDER_OPENAI;
  fields.model = model_;
  fields.message_chain = request_points_;
  const bool compaction = compaction_pending_;
  if (compaction) fields.expected_drop = v1::EXPECTED_DROP_COMPACTION;
  compaction_pending_ = false;
  // The OpenAI Responses usage shape, which the normalizer reads:
  // input_tokens includes the cached ones.
  const Json usage = {
      {"input_tokens", last->input},
      {"input_tokens_details",
       {{"cached_tokens", std::min(last->cached, last->input)}}},
      {"output_tokens", last->output},
      {"output_tokens_details", {{"reasoning_tokens", last->reasoning}}}};
  fields.raw_usage_json = usage.dump();
  if (!context_.EmitTurn(MakeTurn(std::move(fields)), number, kCodexAgent,
                         "unreadable usage")) {
    request_points_.pop_back();  // An unreadable request is no prompt end.
    compaction_pending_ = compaction;
  }
}

}  // namespace cachewatch::cli
