#include "cli/claude_code_transcript.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace cachewatch::cli {
namespace {

using Json = nlohmann::json;

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
                                                "pr-link"};
  return std::find(std::begin(kKnown), std::end(kKnown), type) !=
         std::end(kKnown);
}

const Json* Member(const Json& object, const char* name) {
  auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}

std::string StringMember(const Json& object, const char* name) {
  const Json* value = Member(object, name);
  return value != nullptr && value->is_string() ? value->get<std::string>()
                                                : std::string();
}

bool TrueMember(const Json& object, const char* name) {
  const Json* value = Member(object, name);
  return value != nullptr && value->is_boolean() && value->get<bool>();
}

// The summary Claude Code puts at the head of a compacted conversation.
bool IsCompactSummary(const Json& entry) {
  if (TrueMember(entry, "isCompactSummary")) return true;
  const Json* message = Member(entry, "message");
  if (message == nullptr || !message->is_object()) return false;
  const Json* content = Member(*message, "content");
  if (content == nullptr) return false;
  constexpr std::string_view kContinued =
      "This session is being continued from a previous conversation";
  if (content->is_string()) {
    return content->get_ref<const std::string&>().starts_with(kContinued);
  }
  if (content->is_array() && !content->empty() && (*content)[0].is_object()) {
    const std::string text = StringMember((*content)[0], "text");
    return text.starts_with(kContinued);
  }
  return false;
}

}  // namespace

ClaudeCodeTranscript::ClaudeCodeTranscript(std::string path, ReadTally& tally,
                                           SeenRequests& seen, TurnSink sink)
    : path_(std::move(path)),
      file_session_id_(std::filesystem::path(path_).stem().string()),
      tally_(tally),
      seen_(seen),
      sink_(std::move(sink)) {}

std::vector<uint64_t> ClaudeCodeTranscript::ChainTo(int32_t prompt_end) {
  std::vector<uint64_t> chain;
  for (int32_t at = prompt_end; at >= 0; at = nodes_[at].parent) {
    if (nodes_[at].prompt_end) chain.push_back(nodes_[at].running);
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

void ClaudeCodeTranscript::Line(std::string_view line, int64_t number) {
  const Json entry = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (entry.is_discarded() || !entry.is_object()) {
    ++tally_.corrupt_lines;
    tally_.Problem(path_, number, "not a JSON object (truncated or corrupt)");
    return;
  }
  const std::string type = StringMember(entry, "type");
  if (type.empty()) {
    tally_.Skip("claude-code: entry without type");
    return;
  }
  if (!IsKnownType(type)) tally_.Skip("claude-code: unknown type: " + type);
  if (const std::string version = StringMember(entry, "version");
      !version.empty()) {
    ++tally_.versions[absl::StrCat(kClaudeCodeAgent, " ", version)];
  }
  const std::string uuid = StringMember(entry, "uuid");
  if (uuid.empty()) return;  // Not part of the conversation tree.

  const Json* message = Member(entry, "message");
  const bool has_message = message != nullptr && message->is_object();
  const bool sidechain = TrueMember(entry, "isSidechain");

  // The entry joins the tree (even an unknown type, so that its children
  // keep their path).
  const int32_t index = static_cast<int32_t>(nodes_.size());
  Node node;
  const std::string parent_uuid = StringMember(entry, "parentUuid");
  if (auto parent = node_by_uuid_.find(parent_uuid);
      !parent_uuid.empty() && parent != node_by_uuid_.end()) {
    node.parent = parent->second;
    node.root = nodes_[parent->second].root;
    node.running = nodes_[parent->second].running;
  } else {
    node.root = index;
    root_uuid_[index] = uuid;
  }
  if (has_message && (type == "user" || type == "assistant")) {
    const Json* content = Member(*message, "content");
    const std::string text = absl::StrCat(
        type, "\n", content != nullptr ? content->dump() : std::string());
    node.running = ChainStep(node.running, text);
  }
  nodes_.push_back(node);
  node_by_uuid_.emplace(uuid, index);

  std::string lane = "main";
  if (sidechain) {
    const std::string agent_id = StringMember(entry, "agentId");
    lane = !agent_id.empty()
               ? "agent-" + agent_id
               : "sidechain-" + root_uuid_[node.root].substr(0, 8);
  }
  if ((type == "system" &&
       StringMember(entry, "subtype") == "compact_boundary") ||
      (type == "user" && IsCompactSummary(entry))) {
    compaction_pending_.insert(lane);
    return;
  }
  if (type != "assistant") return;
  if (!has_message) {
    tally_.Skip("claude-code: assistant entry without message");
    return;
  }
  const Json* usage = Member(*message, "usage");
  if (usage == nullptr || !usage->is_object()) {
    tally_.Skip("claude-code: assistant entry without usage");
    return;
  }
  const std::string model = StringMember(*message, "model");
  if (model == "<synthetic>" || TrueMember(entry, "isApiErrorMessage")) {
    tally_.Skip("claude-code: synthetic or API error message");
    return;
  }
  if (model.empty()) {
    tally_.Skip("claude-code: assistant entry without model");
    return;
  }
  const std::string message_id = StringMember(*message, "id");
  std::string request_id = StringMember(entry, "requestId");
  if (!seen_.Insert(kClaudeCodeAgent,
                    absl::StrCat(message_id, ":", request_id, ":",
                                 message_id.empty() && request_id.empty()
                                     ? uuid
                                     : std::string()))) {
    ++tally_.duplicate_requests;
    return;
  }
  RequestFields fields;
  if (!ParseTimestampMicros(StringMember(entry, "timestamp"),
                            &fields.time_us)) {
    tally_.Skip("claude-code: request without a valid timestamp");
    tally_.Problem(path_, number, "request without a valid timestamp");
    return;
  }
  if (request_id.empty()) request_id = message_id.empty() ? uuid : message_id;
  fields.agent = kClaudeCodeAgent;
  fields.session_id = StringMember(entry, "sessionId");
  if (fields.session_id.empty()) fields.session_id = file_session_id_;
  fields.lane = lane;
  fields.request_id = std::move(request_id);
  fields.provider = v1::PROVIDER_ANTHROPIC;
  fields.model = model;
  if (node.parent >= 0) {
    nodes_[node.parent].prompt_end = true;
    fields.message_chain = ChainTo(node.parent);
  }
  if (compaction_pending_.erase(lane) > 0) {
    fields.expected_drop = v1::EXPECTED_DROP_COMPACTION;
  }
  fields.raw_usage_json = usage->dump();
  absl::StatusOr<TranscriptTurn> turn = MakeTurn(std::move(fields));
  if (!turn.ok()) {
    tally_.Skip(absl::IsFailedPrecondition(turn.status())
                    ? "claude-code: request with no prompt tokens"
                    : "claude-code: unreadable usage");
    if (!absl::IsFailedPrecondition(turn.status())) {
      tally_.Problem(path_, number, std::string(turn.status().message()));
    }
    return;
  }
  ++tally_.requests;
  sink_(*std::move(turn));
}

}  // namespace cachewatch::cli
