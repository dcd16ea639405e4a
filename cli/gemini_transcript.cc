#include "cli/gemini_transcript.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cli/json_member.h"

namespace cachewatch::cli {
namespace {

using Json = nlohmann::json;

int64_t CountMember(const Json& object, const char* name) {
  const Json* value = Member(object, name);
  return value != nullptr && value->is_number_integer() ? value->get<int64_t>()
                                                        : 0;
}

bool IsConversationType(std::string_view type) {
  return type == "user" || type == "gemini";
}

// Messages the CLI shows but never sends to the model.
bool IsDisplayType(std::string_view type) {
  return type == "info" || type == "error" || type == "warning";
}

uint64_t MessageHash(const std::string& type, const Json& message) {
  const Json* content = Member(message, "content");
  return ChainStep(
      0, absl::StrCat(type, "\n", content != nullptr ? content->dump() : ""));
}

}  // namespace

GeminiTranscript::GeminiTranscript(std::string path, ReadTally& tally,
                                   SeenRequests& seen, TurnSink sink)
    : context_(std::move(path), tally, seen, std::move(sink)),
      session_id_(context_.file_session_id) {}

void GeminiTranscript::Metadata(const Json& record) {
  const std::string session_id = StringMember(record, "sessionId");
  if (session_id.empty() || session_fixed_) return;
  session_fixed_ = true;
  if (StringMember(record, "kind") == "subagent") {
    // chats/<parent session>/<subagent session>.jsonl
    session_id_ =
        std::filesystem::path(context_.path).parent_path().filename().string();
    lane_ = "subagent-" + session_id;
  } else {
    session_id_ = session_id;
  }
}

void GeminiTranscript::Rewind(const std::string& id) {
  auto it = index_by_id_.find(id);
  const size_t keep = it == index_by_id_.end() ? 0 : it->second;
  for (size_t i = keep; i < history_.size(); ++i) {
    index_by_id_.erase(history_[i].id);
  }
  history_.resize(keep);
}

void GeminiTranscript::ReplaceMessages(const Json& messages) {
  std::unordered_map<std::string, bool> prompt_end;
  for (const Message& message : history_) {
    prompt_end[message.id] = message.prompt_end;
  }
  const size_t before = history_.size();
  history_.clear();
  index_by_id_.clear();
  for (const Json& message : messages) {
    const std::string id = StringMember(message, "id");
    const std::string type = StringMember(message, "type");
    if (id.empty() || !IsConversationType(type)) continue;
    index_by_id_[id] = history_.size();
    history_.push_back({id, MessageHash(type, message), prompt_end[id]});
  }
  // A shorter history in place of the old one is a compression.
  if (history_.size() < before) compaction_pending_ = true;
}

void GeminiTranscript::AddMessage(const Json& message, int64_t number) {
  const std::string id = StringMember(message, "id");
  const std::string type = StringMember(message, "type");
  if (IsDisplayType(type)) return;
  if (id.empty() || !IsConversationType(type)) {
    context_.tally.Skip("gemini-cli: unknown message type: " +
                        (type.empty() ? std::string("(none)") : type));
    return;
  }
  session_fixed_ = true;
  const uint64_t hash = MessageHash(type, message);
  size_t index;
  if (auto it = index_by_id_.find(id); it != index_by_id_.end()) {
    index = it->second;
    history_[index].hash = hash;  // Re-appended: its latest state.
  } else {
    index = history_.size();
    index_by_id_[id] = index;
    history_.push_back({id, hash, false});
  }
  const Json* tokens = Member(message, "tokens");
  if (type != "gemini" || tokens == nullptr || !tokens->is_object()) return;
  if (!context_.seen.Insert(kGeminiAgent, absl::StrCat(session_id_, "/", id))) {
    ++context_.tally.duplicate_requests;  // The same message re-appended.
    return;
  }
  RequestFields fields;
  fields.model = StringMember(message, "model");
  if (fields.model.empty()) {
    context_.tally.Skip("gemini-cli: message with tokens but no model");
    return;
  }
  if (!ParseTimestampMicros(StringMember(message, "timestamp"),
                            &fields.time_us)) {
    context_.tally.Skip("gemini-cli: message without a valid timestamp");
    context_.tally.Problem(context_.path, number,
                           "message without a valid timestamp");
    return;
  }
  // A request that turns out unreadable marks no prompt end.
  const bool was_prompt_end = index > 0 && history_[index - 1].prompt_end;
  if (index > 0) history_[index - 1].prompt_end = true;
  uint64_t running = 0;
  for (size_t i = 0; i < index; ++i) {
    const uint64_t block = history_[i].hash;
    running = ChainStep(
        running,
        std::string_view(reinterpret_cast<const char*>(&block), sizeof block));
    if (history_[i].prompt_end) fields.message_chain.push_back(running);
  }
  fields.agent = kGeminiAgent;
  fields.session_id = session_id_;
  fields.lane = lane_;
  fields.request_id = id;
  fields.provider = v1::PROVIDER_GEMINI;
  const bool compaction = compaction_pending_;
  if (compaction) fields.expected_drop = v1::EXPECTED_DROP_COMPACTION;
  compaction_pending_ = false;
  const Json usage = {
      {"promptTokenCount", CountMember(*tokens, "input")},
      {"cachedContentTokenCount", CountMember(*tokens, "cached")},
      {"candidatesTokenCount", CountMember(*tokens, "output")},
      {"thoughtsTokenCount", CountMember(*tokens, "thoughts")},
      {"toolUsePromptTokenCount", CountMember(*tokens, "tool")}};
  fields.raw_usage_json = usage.dump();
  if (!context_.EmitTurn(MakeTurn(std::move(fields)), number, kGeminiAgent,
                         "unreadable tokens")) {
    if (index > 0) history_[index - 1].prompt_end = was_prompt_end;
    compaction_pending_ = compaction;
  }
}

void GeminiTranscript::Line(std::string_view line, int64_t number) {
  const Json record = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (record.is_discarded() || !record.is_object()) {
    context_.CorruptLine(number);
    return;
  }
  if (const Json* rewind = Member(record, "$rewindTo");
      rewind != nullptr && rewind->is_string()) {
    Rewind(rewind->get<std::string>());
    return;
  }
  if (const Json* set = Member(record, "$set"); set != nullptr) {
    if (const Json* messages = Member(*set, "messages");
        messages != nullptr && messages->is_array()) {
      ReplaceMessages(*messages);
    }
    Metadata(*set);
    return;
  }
  if (Member(record, "id") != nullptr) {
    AddMessage(record, number);
    return;
  }
  if (Member(record, "sessionId") != nullptr) {
    Metadata(record);
    return;
  }
  context_.tally.Skip("gemini-cli: unknown record");
}

absl::Status GeminiTranscript::ReadLegacyFile() {
  std::ifstream in(context_.path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat(context_.path, ": cannot open"));
  std::error_code size_error;
  const auto size = std::filesystem::file_size(context_.path, size_error);
  if (!size_error) context_.tally.bytes += static_cast<int64_t>(size);
  ++context_.tally.lines;
  std::string key;  // The root member being parsed.
  int64_t messages = 0;
  Json metadata = Json::object();
  auto callback = [&](int depth, Json::parse_event_t event,
                      Json& parsed) -> bool {
    if (depth == 1 && event == Json::parse_event_t::key) {
      key = parsed.get<std::string>();
    } else if (depth == 1 && event == Json::parse_event_t::value &&
               (key == "sessionId" || key == "kind")) {
      metadata[key] = parsed;
      Metadata(metadata);
    } else if (depth == 2 && key == "messages" &&
               event == Json::parse_event_t::object_end) {
      AddMessage(parsed, ++messages);
      return false;  // Handled: never kept.
    }
    return true;
  };
  const Json root = Json::parse(in, callback, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    ++context_.tally.corrupt_lines;
    context_.tally.Problem(
        context_.path, messages,
        "malformed JSON after this many messages (truncated?)");
  }
  return absl::OkStatus();
}

}  // namespace cachewatch::cli
