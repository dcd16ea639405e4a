#include "cli/claude_code_transcript.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "simdjson.h"

namespace cachewatch::cli {
namespace {

namespace ondemand = simdjson::ondemand;

// Entry types Claude Code writes that carry no request (tallied as known,
// never as unknown).
bool IsKnownType(std::string_view type) {
  static constexpr std::string_view kKnown[] = {"user",
                                                "assistant",
                                                "system",
                                                "summary",
                                                "file-history-snapshot",
                                                "queue-operation",
                                                "progress",
                                                "custom-title",
                                                "tag",
                                                "agent-name",
                                                "pr-link",
                                                "attachment"};
  return std::find(std::begin(kKnown), std::end(kKnown), type) !=
         std::end(kKnown);
}

// The fields of one entry this reader uses, as views into the line or the
// parser's string buffer (valid until the next line).
struct Entry {
  std::string_view type;
  std::string_view uuid;
  std::string_view parent_uuid;
  std::string_view session_id;
  std::string_view timestamp;
  std::string_view request_id;
  std::string_view version;
  std::string_view subtype;
  std::string_view agent_id;
  bool sidechain = false;
  bool compact_summary = false;
  bool api_error = false;
  bool has_message = false;
  std::string_view message_id;
  std::string_view model;
  std::string_view content;  // Raw JSON.
  std::string_view usage;    // Raw JSON of an object; empty when none.
};

// The raw JSON text of `value`, whatever its type.
simdjson::error_code RawJson(ondemand::value value, std::string_view* raw) {
  ondemand::json_type type;
  if (auto error = value.type().get(type)) return error;
  if (type == ondemand::json_type::object) {
    ondemand::object object;
    if (auto error = value.get_object().get(object)) return error;
    return object.raw_json().get(*raw);
  }
  if (type == ondemand::json_type::array) {
    ondemand::array array;
    if (auto error = value.get_array().get(array)) return error;
    return array.raw_json().get(*raw);
  }
  *raw = value.raw_json_token();
  return simdjson::SUCCESS;
}

// A string member, or empty for another type (null parentUuid, ...).
simdjson::error_code StringOrEmpty(ondemand::value value,
                                   std::string_view* text) {
  ondemand::json_type type;
  if (auto error = value.type().get(type)) return error;
  if (type != ondemand::json_type::string) {
    *text = {};
    return simdjson::SUCCESS;
  }
  return value.get_string().get(*text);
}

simdjson::error_code TrueOrFalse(ondemand::value value, bool* flag) {
  ondemand::json_type type;
  if (auto error = value.type().get(type)) return error;
  *flag = false;
  if (type != ondemand::json_type::boolean) return simdjson::SUCCESS;
  return value.get_bool().get(*flag);
}

simdjson::error_code ReadMessage(ondemand::value value, Entry& entry) {
  ondemand::object message;
  if (value.get_object().get(message) != simdjson::SUCCESS) {
    return simdjson::SUCCESS;  // Not an object: no message.
  }
  entry.has_message = true;
  for (auto field : message) {
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return error;
    ondemand::value member;
    if (auto error = field.value().get(member)) return error;
    simdjson::error_code error = simdjson::SUCCESS;
    if (key == "id") {
      error = StringOrEmpty(member, &entry.message_id);
    } else if (key == "model") {
      error = StringOrEmpty(member, &entry.model);
    } else if (key == "content") {
      error = RawJson(member, &entry.content);
    } else if (key == "usage") {
      ondemand::json_type type;
      error = member.type().get(type);
      if (!error && type == ondemand::json_type::object) {
        error = RawJson(member, &entry.usage);
      }
    }
    if (error) return error;
  }
  return simdjson::SUCCESS;
}

simdjson::error_code ReadEntry(ondemand::document& document, Entry& entry) {
  ondemand::object object;
  if (auto error = document.get_object().get(object)) return error;
  for (auto field : object) {
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return error;
    ondemand::value value;
    if (auto error = field.value().get(value)) return error;
    simdjson::error_code error = simdjson::SUCCESS;
    if (key == "type") {
      error = StringOrEmpty(value, &entry.type);
    } else if (key == "uuid") {
      error = StringOrEmpty(value, &entry.uuid);
    } else if (key == "parentUuid") {
      error = StringOrEmpty(value, &entry.parent_uuid);
    } else if (key == "sessionId") {
      error = StringOrEmpty(value, &entry.session_id);
    } else if (key == "timestamp") {
      error = StringOrEmpty(value, &entry.timestamp);
    } else if (key == "requestId") {
      error = StringOrEmpty(value, &entry.request_id);
    } else if (key == "version") {
      error = StringOrEmpty(value, &entry.version);
    } else if (key == "subtype") {
      error = StringOrEmpty(value, &entry.subtype);
    } else if (key == "agentId") {
      error = StringOrEmpty(value, &entry.agent_id);
    } else if (key == "isSidechain") {
      error = TrueOrFalse(value, &entry.sidechain);
    } else if (key == "isCompactSummary") {
      error = TrueOrFalse(value, &entry.compact_summary);
    } else if (key == "isApiErrorMessage") {
      error = TrueOrFalse(value, &entry.api_error);
    } else if (key == "message") {
      error = ReadMessage(value, entry);
    }
    if (error) return error;
  }
  return simdjson::SUCCESS;
}

// The summary Claude Code puts at the head of a compacted conversation
// (older versions mark it by its opening words only).
bool IsCompactSummary(const Entry& entry) {
  if (entry.compact_summary) return true;
  constexpr std::string_view kContinued =
      "This session is being continued from a previous conversation";
  const std::string_view head = entry.content.substr(0, 200);
  return head.find(kContinued) != std::string_view::npos;
}

}  // namespace

ClaudeCodeTranscript::ClaudeCodeTranscript(std::string path, ReadTally& tally,
                                           SeenRequests& seen, TurnSink sink)
    : context_(std::move(path), tally, seen, std::move(sink)) {}

std::vector<uint64_t> ClaudeCodeTranscript::ChainTo(int32_t prompt_end) {
  std::vector<uint64_t> chain;
  for (int32_t at = prompt_end; at >= 0; at = nodes_[at].parent) {
    if (nodes_[at].prompt_end) chain.push_back(nodes_[at].running);
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

void ClaudeCodeTranscript::Line(std::string_view line, int64_t number) {
  // simdjson reads up to SIMDJSON_PADDING bytes past the end.
  buffer_.reserve(line.size() + simdjson::SIMDJSON_PADDING);
  buffer_.assign(line);
  ondemand::document document;
  Entry entry;
  if (parser_.iterate(buffer_.data(), buffer_.size(), buffer_.capacity())
              .get(document) != simdjson::SUCCESS ||
      ReadEntry(document, entry) != simdjson::SUCCESS) {
    context_.CorruptLine(number);
    return;
  }
  if (entry.type.empty()) {
    context_.tally.Skip("claude-code: entry without type");
    return;
  }
  if (!IsKnownType(entry.type)) {
    context_.tally.Skip(
        absl::StrCat("claude-code: unknown type: ", std::string(entry.type)));
  }
  if (!entry.version.empty()) {
    ++context_.tally.versions[absl::StrCat(kClaudeCodeAgent, " ",
                                           std::string(entry.version))];
  }
  if (entry.uuid.empty()) return;  // Not part of the conversation tree.

  // The entry joins the tree (even an unknown type, so that its children
  // keep their path).
  const int32_t index = static_cast<int32_t>(nodes_.size());
  Node node;
  if (auto parent = node_by_uuid_.find(std::string(entry.parent_uuid));
      !entry.parent_uuid.empty() && parent != node_by_uuid_.end()) {
    node.parent = parent->second;
    node.root = nodes_[parent->second].root;
    node.running = nodes_[parent->second].running;
  } else {
    node.root = index;
    root_uuid_[index] = std::string(entry.uuid);
  }
  const bool conversation = entry.type == "user" || entry.type == "assistant";
  if (entry.has_message && conversation) {
    node.running =
        ChainStep(ChainStep(node.running, entry.type), entry.content);
  }
  nodes_.push_back(node);
  node_by_uuid_.emplace(std::string(entry.uuid), index);

  std::string lane = "main";
  if (entry.sidechain) {
    lane = !entry.agent_id.empty()
               ? absl::StrCat("agent-", std::string(entry.agent_id))
               : "sidechain-" + root_uuid_[node.root].substr(0, 8);
  }
  if ((entry.type == "system" && entry.subtype == "compact_boundary") ||
      (entry.type == "user" && IsCompactSummary(entry))) {
    compaction_pending_.insert(lane);
    return;
  }
  if (entry.type != "assistant") return;
  if (!entry.has_message) {
    context_.tally.Skip("claude-code: assistant entry without message");
    return;
  }
  if (entry.usage.empty()) {
    context_.tally.Skip("claude-code: assistant entry without usage");
    return;
  }
  if (entry.model == "<synthetic>" || entry.api_error) {
    context_.tally.Skip("claude-code: synthetic or API error message");
    return;
  }
  if (entry.model.empty()) {
    context_.tally.Skip("claude-code: assistant entry without model");
    return;
  }
  const std::string message_id(entry.message_id);
  std::string request_id(entry.request_id);
  if (!context_.seen.Insert(
          kClaudeCodeAgent,
          absl::StrCat(message_id, ":", request_id, ":",
                       message_id.empty() && request_id.empty()
                           ? std::string(entry.uuid)
                           : std::string()))) {
    ++context_.tally.duplicate_requests;
    return;
  }
  RequestFields fields;
  if (!ParseTimestampMicros(entry.timestamp, &fields.time_us)) {
    context_.tally.Skip("claude-code: request without a valid timestamp");
    context_.tally.Problem(context_.path, number,
                           "request without a valid timestamp");
    return;
  }
  if (request_id.empty()) {
    request_id = message_id.empty() ? std::string(entry.uuid) : message_id;
  }
  fields.agent = kClaudeCodeAgent;
  fields.session_id = entry.session_id.empty() ? context_.file_session_id
                                               : std::string(entry.session_id);
  fields.lane = lane;
  fields.request_id = std::move(request_id);
  fields.provider = v1::PROVIDER_ANTHROPIC;
  fields.model = std::string(entry.model);
  // A request that turns out unreadable marks no prompt end.
  const bool was_prompt_end =
      node.parent >= 0 && nodes_[node.parent].prompt_end;
  if (node.parent >= 0) {
    nodes_[node.parent].prompt_end = true;
    fields.message_chain = ChainTo(node.parent);
  }
  const bool compaction = compaction_pending_.erase(lane) > 0;
  if (compaction) fields.expected_drop = v1::EXPECTED_DROP_COMPACTION;
  fields.raw_usage_json = std::string(entry.usage);
  if (!context_.EmitTurn(MakeTurn(std::move(fields)), number, kClaudeCodeAgent,
                         "unreadable usage")) {
    if (node.parent >= 0) nodes_[node.parent].prompt_end = was_prompt_end;
    if (compaction) compaction_pending_.insert(lane);
  }
}

}  // namespace cachewatch::cli
