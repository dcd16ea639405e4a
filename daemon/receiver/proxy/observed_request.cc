#include "daemon/receiver/proxy/observed_request.h"

#include <algorithm>
#include <array>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cachewatch/client/breakpoints.h"
#include "cachewatch/client/canonical_json.h"
#include "cachewatch/client/hash.h"
#include "cachewatch/client/message_chain.h"
#include "daemon/receiver/proxy/json_document.h"
#include "daemon/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace cachewatch {
namespace {

using Json = nlohmann::json;

// Debian's Abseil has a string_view of its own, the one absl::StrCat takes.
absl::string_view Sv(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("request body: ", what));
}

// The request options that key each provider's cache (docs/PROXY.md).
constexpr std::array<const char*, 8> kAnthropicOptionKeys = {
    "tool_choice",        "thinking",  "output_config", "output_format",
    "context_management", "container", "mcp_servers",   "speed"};
constexpr std::array<const char*, 11> kOpenAiOptionKeys = {
    "tool_choice",     "parallel_tool_calls",
    "response_format", "text",
    "reasoning",       "reasoning_effort",
    "verbosity",       "prompt_cache_key",
    "service_tier",    "enable_thinking",
    "thinking"};

// Claude Code's compaction: the new history opens with this summary text.
constexpr std::string_view kClaudeCodeCompactionPrefix =
    "This session is being continued from a previous conversation";

absl::StatusOr<Json> ParseBody(std::string_view body, size_t max_body_bytes) {
  if (body.size() > max_body_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("request body: ", body.size(), " bytes, more than the ",
                     max_body_bytes, " observed"));
  }
  std::optional<Json> parsed;
  try {
    parsed = ParseJsonDocument(body, kMaxRequestBodyDepth);
  } catch (const Json::parse_error& error) {
    return Invalid(absl::StrCat("malformed JSON at byte ", error.byte));
  } catch (const Json::exception& error) {  // A number out of range.
    return Invalid("malformed JSON: a number is out of range");
  }
  if (!parsed) {
    return Invalid(absl::StrCat("nests deeper than ", kMaxRequestBodyDepth,
                                " arrays or objects"));
  }
  if (!parsed->is_object()) {
    return Invalid(
        absl::StrCat("is a JSON ", parsed->type_name(), ", not an object"));
  }
  return std::move(*parsed);
}

// The member `key` of `object`; nullptr when absent or null.
const Json* Member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string_view StringMember(const Json& object, const char* key) {
  const Json* value = Member(object, key);
  if (value == nullptr || !value->is_string()) return {};
  return value->get_ref<const std::string&>();
}

bool TrueMember(const Json& object, const char* key) {
  const Json* value = Member(object, key);
  return value != nullptr && value->is_boolean() && value->get<bool>();
}

uint32_t TtlSeconds(const Json& cache_control) {
  const std::string_view ttl = StringMember(cache_control, "ttl");
  if (ttl == "1h") return 3600;
  if (ttl == "5m") return 300;
  return 0;
}

// Removes `value`'s cache_control member (a breakpoint marker, reported in
// the layout, not part of the cached content) and returns it.
std::optional<Json> TakeCacheControl(Json& value) {
  if (!value.is_object()) return std::nullopt;
  const auto it = value.find("cache_control");
  if (it == value.end()) return std::nullopt;
  Json marker = std::move(*it);
  value.erase(it);
  if (marker.is_null()) return std::nullopt;
  return marker;
}

// Removes the markers inside a block's nested content (a tool_result's
// blocks) too; returns the last one found.
std::optional<Json> TakeCacheControls(Json& block) {
  std::optional<Json> marker = TakeCacheControl(block);
  if (block.is_object()) {
    const auto content = block.find("content");
    if (content != block.end() && content->is_array()) {
      for (Json& inner : *content) {
        if (std::optional<Json> nested = TakeCacheControl(inner)) {
          marker = std::move(nested);
        }
      }
    }
  }
  return marker;
}

void AddBreakpoint(v1::PromptSegment segment, int index, const Json& marker,
                   v1::CacheControl* layout) {
  v1::Breakpoint* breakpoint = layout->add_breakpoints();
  breakpoint->set_segment(segment);
  breakpoint->set_index(static_cast<uint32_t>(index));
  breakpoint->set_ttl_seconds(TtlSeconds(marker));
}

absl::StatusOr<std::string> Canonical(const Json& value,
                                      absl::string_view where) {
  absl::StatusOr<std::string> canonical = client::CanonicalizeJsonValue(value);
  if (!canonical.ok()) {
    return Invalid(absl::StrCat(where, ": ", canonical.status().message()));
  }
  return canonical;
}

// The snapshot under construction and what the observer needs besides.
class Reader {
 public:
  explicit Reader(ObservedRequest* out) : out_(out) {}

  v1::Snapshot& snapshot() { return out_->snapshot; }
  v1::CacheControl& layout() { return *out_->snapshot.mutable_cache_control(); }

  // The model, required.
  absl::Status ReadModel(const Json& body) {
    const std::string_view model = StringMember(body, "model");
    if (model.empty()) return Invalid("model is missing or not a string");
    snapshot().set_model(std::string(model));
    return absl::OkStatus();
  }

  // The tools in request order; deferred ones (defer_loading) are not in
  // the cached prefix and not listed. `name_of` names a tool.
  template <typename NameOf>
  absl::Status ReadTools(const Json& body, NameOf name_of) {
    const Json* tools = Member(body, "tools");
    if (tools == nullptr) return absl::OkStatus();
    if (!tools->is_array()) return Invalid("tools is not an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& tool = (*tools)[i];
      if (!tool.is_object()) {
        return Invalid(absl::StrCat("tools[", i, "] is not an object"));
      }
      if (TrueMember(tool, "defer_loading")) continue;
      // The whole definition as sent, a cache_control marker included: the
      // shared contract (tests/vectors, tool_anthropic_shell).
      const Json* marker = Member(tool, "cache_control");
      // The daemon requires a name: a tool without one is named by place.
      std::string name(name_of(tool));
      if (name.empty()) name = absl::StrCat("tools[", i, "]");
      CACHEWATCH_ASSIGN_OR_RETURN(
          const std::string canonical,
          Canonical(tool, absl::StrCat("tools[", i, "] (\"", name, "\")")));
      v1::ToolRef* ref = snapshot().add_tools();
      ref->set_name(name);
      ref->set_schema_hash(client::HashBytes(canonical));
      if (marker != nullptr) {
        AddBreakpoint(v1::PROMPT_SEGMENT_TOOLS, snapshot().tools_size() - 1,
                      *marker, &layout());
      }
    }
    return absl::OkStatus();
  }

  // Adds one content block to the message chain, its markers taken out.
  absl::Status AddBlock(Json block, absl::string_view where) {
    const std::optional<Json> marker = TakeCacheControls(block);
    CACHEWATCH_ASSIGN_OR_RETURN(const std::string canonical,
                                Canonical(block, where));
    chain_ = client::ChainHash(chain_, canonical);
    snapshot().add_message_chain(chain_);
    if (marker.has_value()) {
      AddBreakpoint(v1::PROMPT_SEGMENT_MESSAGES,
                    snapshot().message_chain_size() - 1, *marker, &layout());
    }
    return absl::OkStatus();
  }

  void AddSystemSection(std::string name, std::string_view text) {
    v1::SystemSection* section = snapshot().add_system_sections();
    section->set_name(std::move(name));
    section->set_hash(client::HashBytes(text));
  }

  void SetSystemPrompt(std::string_view text) {
    snapshot().set_system_hash(client::HashBytes(text));
  }

  // The options listed in `keys` that the body has, plus `extra` members,
  // hashed as one canonical JSON object.
  template <typename Keys>
  absl::Status ReadOptions(const Json& body, const Keys& keys, Json extra) {
    Json options = std::move(extra);
    for (const char* key : keys) {
      if (const Json* value = Member(body, key)) options[key] = *value;
    }
    CACHEWATCH_ASSIGN_OR_RETURN(const std::string canonical,
                                Canonical(options, "options"));
    snapshot().set_options_hash(client::HashBytes(canonical));
    return absl::OkStatus();
  }

  void SetPrefixIdentity() {
    out_->prefix_identity =
        PrefixIdentityOf(snapshot().system_hash(), snapshot().tools());
  }

 private:
  ObservedRequest* out_;
  uint64_t chain_ = 0;
};

// --- Anthropic Messages --------------------------------------------------

std::string_view AnthropicToolName(const Json& tool) {
  for (const char* key : {"name", "mcp_server_name", "type"}) {
    const std::string_view name = StringMember(tool, key);
    if (!name.empty()) return name;
  }
  return {};
}

// Claude Code's metadata.user_id: "user_<hash>_account_<uuid>_session_<uuid>"
// before v2.1.78, a JSON text with "session_id" since.
std::string ClaudeCodeSessionId(const Json& body) {
  const Json* metadata = Member(body, "metadata");
  if (metadata == nullptr) return {};
  const std::string_view user_id = StringMember(*metadata, "user_id");
  std::string session;
  if (!user_id.empty() && user_id.front() == '{') {
    const Json parsed = Json::parse(user_id.begin(), user_id.end(), nullptr,
                                    /*allow_exceptions=*/false);
    session = std::string(StringMember(parsed, "session_id"));
  } else if (const size_t at = user_id.rfind("_session_");
             at != std::string_view::npos) {
    session =
        std::string(user_id.substr(at + std::string_view("_session_").size()));
  }
  if (session.size() > kMaxBodySessionIdBytes) return {};
  return session;
}

// The anthropic-beta header values as a sorted set: the set keys the cache.
Json AnthropicBetas(const HttpHeaders& headers) {
  std::set<std::string> betas;
  for (const auto& [name, value] : headers) {
    if (name != "anthropic-beta") continue;
    for (absl::string_view beta : absl::StrSplit(Sv(value), ',')) {
      beta = absl::StripAsciiWhitespace(beta);
      if (!beta.empty()) betas.emplace(beta);
    }
  }
  return Json(std::vector<std::string>(betas.begin(), betas.end()));
}

absl::Status ReadAnthropicSystem(const Json& body, Reader& reader) {
  const Json* system = Member(body, "system");
  if (system == nullptr) {
    reader.SetSystemPrompt("");
    return absl::OkStatus();
  }
  if (system->is_string()) {
    reader.SetSystemPrompt(system->get_ref<const std::string&>());
    return absl::OkStatus();
  }
  if (!system->is_array()) return Invalid("system is not a string or an array");
  std::vector<std::string> texts;
  for (size_t i = 0; i < system->size(); ++i) {
    Json block = (*system)[i];
    if (!block.is_object()) {
      return Invalid(absl::StrCat("system[", i, "] is not an object"));
    }
    const std::optional<Json> marker = TakeCacheControl(block);
    std::string text(StringMember(block, "text"));
    if (StringMember(block, "type") != "text") {
      CACHEWATCH_ASSIGN_OR_RETURN(
          text, Canonical(block, absl::StrCat("system[", i, "]")));
    }
    reader.AddSystemSection(absl::StrCat("system[", i, "]"), text);
    if (marker.has_value()) {
      AddBreakpoint(v1::PROMPT_SEGMENT_SYSTEM, static_cast<int>(i), *marker,
                    &reader.layout());
    }
    texts.push_back(std::move(text));
  }
  reader.SetSystemPrompt(absl::StrJoin(texts, "\n\n"));
  return absl::OkStatus();
}

// The first text of the history, for the compaction marker.
std::string_view FirstText(const Json& messages) {
  if (messages.empty()) return {};
  const Json* first = Member(messages.front(), "content");
  if (first == nullptr) return {};
  if (first->is_string()) return first->get_ref<const std::string&>();
  if (first->is_array() && !first->empty()) {
    return StringMember(first->front(), "text");
  }
  return {};
}

absl::Status ReadAnthropicMessages(const Json& body, Reader& reader,
                                   ObservedRequest* out) {
  const Json* messages = Member(body, "messages");
  if (messages == nullptr || !messages->is_array()) {
    return Invalid("messages is missing or not an array");
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    const std::string_view role = StringMember(message, "role");
    if (role.empty()) {
      return Invalid(absl::StrCat("messages[", i, "] has no role"));
    }
    const Json* content = Member(message, "content");
    if (content != nullptr && content->is_string()) {
      CACHEWATCH_RETURN_IF_ERROR(reader.AddBlock(
          Json{{"role", role}, {"type", "text"}, {"text", *content}},
          absl::StrCat("messages[", i, "].content")));
      continue;
    }
    if (content == nullptr || !content->is_array()) {
      return Invalid(absl::StrCat(
          "messages[", i, "].content is missing or not a string or an array"));
    }
    for (size_t j = 0; j < content->size(); ++j) {
      const Json& part = (*content)[j];
      const std::string where =
          absl::StrCat("messages[", i, "].content[", j, "]");
      if (!part.is_object())
        return Invalid(absl::StrCat(where, " is not an object"));
      Json block = part;
      block["role"] = role;
      CACHEWATCH_RETURN_IF_ERROR(reader.AddBlock(std::move(block), where));
    }
  }
  const std::string_view first = FirstText(*messages);
  out->compaction_marker =
      first.substr(0, kClaudeCodeCompactionPrefix.size()) ==
      kClaudeCodeCompactionPrefix;
  return absl::OkStatus();
}

absl::Status ReadAnthropic(const Json& body, const HttpHeaders& headers,
                           ObservedRequest* out) {
  Reader reader(out);
  CACHEWATCH_RETURN_IF_ERROR(reader.ReadModel(body));
  CACHEWATCH_RETURN_IF_ERROR(reader.ReadTools(body, AnthropicToolName));
  CACHEWATCH_RETURN_IF_ERROR(ReadAnthropicSystem(body, reader));
  CACHEWATCH_RETURN_IF_ERROR(ReadAnthropicMessages(body, reader, out));
  Json extra = Json::object();
  Json betas = AnthropicBetas(headers);
  if (!betas.empty()) extra["betas"] = std::move(betas);
  CACHEWATCH_RETURN_IF_ERROR(
      reader.ReadOptions(body, kAnthropicOptionKeys, extra));
  v1::CacheControl& layout = reader.layout();
  if (const Json* automatic = Member(body, "cache_control")) {
    layout.set_automatic(true);
    layout.set_ttl_seconds(TtlSeconds(*automatic));
  }
  layout.set_enabled(layout.automatic() || layout.breakpoints_size() > 0);
  out->body_session_id = ClaudeCodeSessionId(body);
  out->stream = TrueMember(body, "stream");
  out->has_diagnostics_field = body.contains("diagnostics");
  return absl::OkStatus();
}

// --- OpenAI Chat Completions and Responses ---------------------------------

std::string_view OpenAiToolName(const Json& tool) {
  if (const Json* function = Member(tool, "function")) {
    const std::string_view name = StringMember(*function, "name");
    if (!name.empty()) return name;
  }
  for (const char* key : {"name", "server_label", "type"}) {
    const std::string_view name = StringMember(tool, key);
    if (!name.empty()) return name;
  }
  return {};
}

bool IsSystemMessage(const Json& message) {
  const std::string_view role = StringMember(message, "role");
  const std::string_view type = StringMember(message, "type");
  return (role == "system" || role == "developer") &&
         (type.empty() || type == "message");
}

// Adds a message's content as blocks: a string as one text block, an array
// part by part, anything else as one "content" block. `extra` members go
// into every block.
absl::Status AddContent(std::string_view role, const Json* content,
                        const Json& extra, absl::string_view where,
                        Reader& reader) {
  if (content == nullptr) return absl::OkStatus();
  if (content->is_string()) {
    Json block = extra;
    block["role"] = role;
    block["type"] = "text";
    block["text"] = *content;
    return reader.AddBlock(std::move(block), where);
  }
  if (content->is_array()) {
    for (size_t j = 0; j < content->size(); ++j) {
      const Json& part = (*content)[j];
      const std::string part_where = absl::StrCat(where, "[", j, "]");
      if (!part.is_object()) {
        return Invalid(absl::StrCat(part_where, " is not an object"));
      }
      Json block = part;
      for (const auto& [key, value] : extra.items()) block[key] = value;
      block["role"] = role;
      CACHEWATCH_RETURN_IF_ERROR(reader.AddBlock(std::move(block), part_where));
    }
    return absl::OkStatus();
  }
  Json block = extra;
  block["role"] = role;
  block["type"] = "content";
  block["content"] = *content;
  return reader.AddBlock(std::move(block), where);
}

// The system and developer messages: the system prompt (their texts joined
// when all are strings, else the canonical JSON of their roles and
// contents) and one section each.
absl::Status ReadChatSystem(const std::vector<const Json*>& system,
                            Reader& reader) {
  std::vector<std::string> texts;
  bool all_strings = true;
  Json parts = Json::array();
  for (size_t i = 0; i < system.size(); ++i) {
    const Json& message = *system[i];
    Json content = message.contains("content") ? message["content"] : Json();
    std::optional<Json> marker;
    if (content.is_array()) {
      for (Json& part : content) {
        if (std::optional<Json> found = TakeCacheControl(part)) marker = found;
      }
    }
    std::string text;
    if (content.is_string()) {
      text = content.get<std::string>();
    } else {
      all_strings = false;
      CACHEWATCH_ASSIGN_OR_RETURN(
          text,
          Canonical(content, absl::StrCat("system message ", i, " content")));
    }
    reader.AddSystemSection(
        absl::StrCat(Sv(StringMember(message, "role")), "[", i, "]"), text);
    if (marker.has_value()) {
      AddBreakpoint(v1::PROMPT_SEGMENT_SYSTEM, static_cast<int>(i), *marker,
                    &reader.layout());
    }
    texts.push_back(std::move(text));
    parts.push_back(Json{{"role", message["role"]}, {"content", content}});
  }
  if (all_strings) {
    reader.SetSystemPrompt(absl::StrJoin(texts, "\n\n"));
    return absl::OkStatus();
  }
  CACHEWATCH_ASSIGN_OR_RETURN(const std::string canonical,
                              Canonical(parts, "system messages"));
  reader.SetSystemPrompt(canonical);
  return absl::OkStatus();
}

absl::Status ReadChatMessages(const Json& body, Reader& reader) {
  const Json* messages = Member(body, "messages");
  if (messages == nullptr || !messages->is_array()) {
    return Invalid("messages is missing or not an array");
  }
  std::vector<const Json*> system;
  for (const Json& message : *messages) {
    if (IsSystemMessage(message)) system.push_back(&message);
  }
  CACHEWATCH_RETURN_IF_ERROR(ReadChatSystem(system, reader));
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    const std::string where = absl::StrCat("messages[", i, "]");
    if (!message.is_object())
      return Invalid(absl::StrCat(where, " is not an object"));
    if (IsSystemMessage(message)) continue;
    const std::string_view role = StringMember(message, "role");
    if (role.empty()) return Invalid(absl::StrCat(where, " has no role"));
    Json extra = Json::object();
    for (const char* key : {"tool_call_id", "name"}) {
      if (const Json* value = Member(message, key)) extra[key] = *value;
    }
    CACHEWATCH_RETURN_IF_ERROR(
        AddContent(role, Member(message, "content"), extra,
                   absl::StrCat(where, ".content"), reader));
    if (const Json* calls = Member(message, "tool_calls")) {
      if (!calls->is_array()) {
        return Invalid(absl::StrCat(where, ".tool_calls is not an array"));
      }
      for (size_t j = 0; j < calls->size(); ++j) {
        const Json& call = (*calls)[j];
        const std::string call_where =
            absl::StrCat(where, ".tool_calls[", j, "]");
        if (!call.is_object()) {
          return Invalid(absl::StrCat(call_where, " is not an object"));
        }
        Json block = call;
        if (call.contains("type")) block["call_type"] = call["type"];
        block["role"] = role;
        block["type"] = "tool_call";
        CACHEWATCH_RETURN_IF_ERROR(
            reader.AddBlock(std::move(block), call_where));
      }
    }
    if (const Json* call = Member(message, "function_call")) {
      if (!call->is_object()) {
        return Invalid(absl::StrCat(where, ".function_call is not an object"));
      }
      Json block = *call;
      block["role"] = role;
      block["type"] = "function_call";
      CACHEWATCH_RETURN_IF_ERROR(reader.AddBlock(
          std::move(block), absl::StrCat(where, ".function_call")));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadResponsesInput(const Json& body, Reader& reader,
                                ObservedRequest* out) {
  const Json* instructions = Member(body, "instructions");
  if (instructions == nullptr) {
    reader.SetSystemPrompt("");
  } else if (instructions->is_string()) {
    reader.SetSystemPrompt(instructions->get_ref<const std::string&>());
  } else {
    CACHEWATCH_ASSIGN_OR_RETURN(const std::string canonical,
                                Canonical(*instructions, "instructions"));
    reader.SetSystemPrompt(canonical);
  }
  const Json* input = Member(body, "input");
  if (input == nullptr) return absl::OkStatus();
  if (input->is_string()) {
    return reader.AddBlock(
        Json{{"role", "user"}, {"type", "text"}, {"text", *input}}, "input");
  }
  if (!input->is_array()) return Invalid("input is not a string or an array");
  for (size_t i = 0; i < input->size(); ++i) {
    const Json& item = (*input)[i];
    const std::string where = absl::StrCat("input[", i, "]");
    if (!item.is_object())
      return Invalid(absl::StrCat(where, " is not an object"));
    const std::string_view type = StringMember(item, "type");
    if (type == "compaction" || type == "compaction_summary") {
      out->compaction_marker = true;
    }
    const std::string_view role = StringMember(item, "role");
    if (!role.empty() && (type.empty() || type == "message")) {
      CACHEWATCH_RETURN_IF_ERROR(
          AddContent(role, Member(item, "content"), Json::object(),
                     absl::StrCat(where, ".content"), reader));
      continue;
    }
    CACHEWATCH_RETURN_IF_ERROR(reader.AddBlock(item, where));
  }
  return absl::OkStatus();
}

absl::Status ReadOpenAi(ProxyApi api, const Json& body, ObservedRequest* out) {
  Reader reader(out);
  CACHEWATCH_RETURN_IF_ERROR(reader.ReadModel(body));
  CACHEWATCH_RETURN_IF_ERROR(reader.ReadTools(body, OpenAiToolName));
  if (api == ProxyApi::kOpenAiChat) {
    CACHEWATCH_RETURN_IF_ERROR(ReadChatMessages(body, reader));
    if (const Json* options = Member(body, "stream_options")) {
      out->include_usage = TrueMember(*options, "include_usage");
    }
  } else {
    CACHEWATCH_RETURN_IF_ERROR(ReadResponsesInput(body, reader, out));
    out->previous_response_id =
        std::string(StringMember(body, "previous_response_id"));
    // The context lives on the provider: the blocks sent are not the
    // prefix, and a chain of them would differ every turn.
    if (!out->previous_response_id.empty()) {
      out->snapshot.clear_message_chain();
      v1::CacheControl& layout = reader.layout();
      auto* breakpoints = layout.mutable_breakpoints();
      breakpoints->erase(
          std::remove_if(breakpoints->begin(), breakpoints->end(),
                         [](const v1::Breakpoint& breakpoint) {
                           return breakpoint.segment() ==
                                  v1::PROMPT_SEGMENT_MESSAGES;
                         }),
          breakpoints->end());
    }
    out->has_diagnostics_field = body.contains("prompt_cache_options");
  }
  CACHEWATCH_RETURN_IF_ERROR(
      reader.ReadOptions(body, kOpenAiOptionKeys, Json::object()));
  v1::CacheControl& layout = reader.layout();
  layout.set_enabled(true);
  layout.set_automatic(layout.breakpoints_size() == 0);
  if (StringMember(body, "prompt_cache_retention") == "24h") {
    layout.set_ttl_seconds(86400);
  }
  const std::string_view cache_key = StringMember(body, "prompt_cache_key");
  if (cache_key.size() <= kMaxBodySessionIdBytes) {
    out->body_session_id = std::string(cache_key);
  }
  out->stream = TrueMember(body, "stream");
  return absl::OkStatus();
}

}  // namespace

uint64_t PrefixIdentityOf(
    uint64_t system_hash,
    const google::protobuf::RepeatedPtrField<v1::ToolRef>& tools) {
  std::string key;
  const auto append = [&key](uint64_t value) {
    key.append(reinterpret_cast<const char*>(&value), sizeof(value));
  };
  append(system_hash);
  for (const v1::ToolRef& tool : tools) {
    key.append(tool.name());
    key.push_back('\0');
    append(tool.schema_hash());
  }
  return client::HashBytes(key);
}

absl::StatusOr<ObservedRequest> ReadObservedRequest(ProxyApi api,
                                                    v1::Provider provider,
                                                    const HttpHeaders& headers,
                                                    std::string_view body,
                                                    size_t max_body_bytes) {
  CACHEWATCH_ASSIGN_OR_RETURN(const Json root, ParseBody(body, max_body_bytes));
  ObservedRequest out;
  out.snapshot.set_provider(provider);
  out.snapshot.set_tool_order_policy(v1::TOOL_ORDER_POLICY_REGISTRATION);
  CACHEWATCH_RETURN_IF_ERROR(api == ProxyApi::kAnthropicMessages
                                 ? ReadAnthropic(root, headers, &out)
                                 : ReadOpenAi(api, root, &out));
  client::SetBlocksAfter(out.snapshot, out.snapshot.message_chain_size());
  Reader(&out).SetPrefixIdentity();
  return out;
}

}  // namespace cachewatch
