#include "daemon/receiver/proxy/observed_request.h"

#include <simdjson.h>

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
#include "daemon/receiver/proxy/canonical_element.h"
#include "daemon/receiver/proxy/json_document.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

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

// The marker of a breakpoint: not part of the cached content.
constexpr std::string_view kCacheControl = "cache_control";

// nlohmann's name for a value's type, as the errors have always said it.
std::string_view TypeName(element value) {
  switch (value.type()) {
    case element_type::OBJECT:
      return "object";
    case element_type::ARRAY:
      return "array";
    case element_type::STRING:
      return "string";
    case element_type::BOOL:
      return "boolean";
    case element_type::NULL_VALUE:
      return "null";
    default:
      return "number";
  }
}

absl::StatusOr<JsonDocument> ParseBody(std::string_view body,
                                       size_t max_body_bytes) {
  if (body.size() > max_body_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("request body: ", body.size(), " bytes, more than the ",
                     max_body_bytes, " observed"));
  }
  absl::StatusOr<JsonDocument> parsed =
      JsonDocument::Parse(body, kMaxRequestBodyDepth);
  if (!parsed.ok()) {
    return absl::Status(
        parsed.status().code(),
        absl::StrCat("request body: ", parsed.status().message()));
  }
  if (!parsed->root().is_object()) {
    return Invalid(absl::StrCat("is a JSON ", Sv(TypeName(parsed->root())),
                                ", not an object"));
  }
  return parsed;
}

// The member `key` of `value`; nullopt when absent or null, or when `value`
// is not an object.
std::optional<element> Member(element value, std::string_view key) {
  std::optional<element> member = LastMember(value, key);
  if (member.has_value() && member->is_null()) return std::nullopt;
  return member;
}

std::string_view StringMember(element value, std::string_view key) {
  const std::optional<element> member = Member(value, key);
  if (!member.has_value() || !member->is_string()) return {};
  return member->get_string().value_unsafe();
}

bool TrueMember(element value, std::string_view key) {
  const std::optional<element> member = Member(value, key);
  return member.has_value() && member->is_bool() &&
         member->get_bool().value_unsafe();
}

std::string_view StringOf(element value) {
  return value.get_string().value_unsafe();
}

uint32_t TtlSeconds(element cache_control) {
  const std::string_view ttl = StringMember(cache_control, "ttl");
  if (ttl == "1h") return 3600;
  if (ttl == "5m") return 300;
  return 0;
}

// The breakpoint marker of `value`, an object: its cache_control member
// unless null. The canonical form of the value leaves the member out.
std::optional<element> CacheControlOf(element value) {
  return Member(value, kCacheControl);
}

// The marker of a content block put together in `block`, taken out of it:
// its own cache_control, or the last one of the blocks in its content (a
// tool_result's), which are written without theirs.
std::optional<element> TakeCacheControls(CanonicalObject& block) {
  std::optional<element> marker = block.Get(kCacheControl);
  if (marker.has_value() && marker->is_null()) marker.reset();
  block.Remove(kCacheControl);
  const std::optional<element> content = block.Get("content");
  if (content.has_value() && content->is_array()) {
    for (const element inner : ArrayOf(*content)) {
      if (std::optional<element> nested = CacheControlOf(inner)) {
        marker = nested;
      }
    }
    block.SetWithout("content", *content, kCacheControl);
  }
  return marker;
}

void AddBreakpoint(v1::PromptSegment segment, int index, element marker,
                   v1::CacheControl* layout) {
  v1::Breakpoint* breakpoint = layout->add_breakpoints();
  breakpoint->set_segment(segment);
  breakpoint->set_index(static_cast<uint32_t>(index));
  breakpoint->set_ttl_seconds(TtlSeconds(marker));
}

// `canonical`, or its error as the body's, naming `where`.
absl::StatusOr<std::string> Canonical(absl::StatusOr<std::string> canonical,
                                      absl::string_view where) {
  if (!canonical.ok()) {
    return Invalid(absl::StrCat(where, ": ", canonical.status().message()));
  }
  return canonical;
}

// Members copied from a message into each of its blocks.
using ExtraMembers = std::vector<std::pair<std::string_view, element>>;

// The snapshot under construction and what the observer needs besides.
class Reader {
 public:
  explicit Reader(ObservedRequest* out) : out_(out) {}

  v1::Snapshot& snapshot() { return out_->snapshot; }
  v1::CacheControl& layout() { return *out_->snapshot.mutable_cache_control(); }

  // The model, required.
  absl::Status ReadModel(element body) {
    const std::string_view model = StringMember(body, "model");
    if (model.empty()) return Invalid("model is missing or not a string");
    snapshot().set_model(std::string(model));
    return absl::OkStatus();
  }

  // The tools in request order; deferred ones (defer_loading) are not in
  // the cached prefix and not listed. `name_of` names a tool.
  template <typename NameOf>
  absl::Status ReadTools(element body, NameOf name_of) {
    const std::optional<element> tools = Member(body, "tools");
    if (!tools.has_value()) return absl::OkStatus();
    if (!tools->is_array()) return Invalid("tools is not an array");
    size_t i = 0;
    for (const element tool : ArrayOf(*tools)) {
      const size_t index = i++;
      if (!tool.is_object()) {
        return Invalid(absl::StrCat("tools[", index, "] is not an object"));
      }
      if (TrueMember(tool, "defer_loading")) continue;
      // The whole definition as sent, a cache_control marker included: the
      // shared contract (tests/vectors, tool_anthropic_shell).
      const std::optional<element> marker = CacheControlOf(tool);
      // The daemon requires a name: a tool without one is named by place.
      std::string name(name_of(tool));
      if (name.empty()) name = absl::StrCat("tools[", index, "]");
      CACHEWATCH_ASSIGN_OR_RETURN(
          const std::string canonical,
          Canonical(CanonicalElement(tool),
                    absl::StrCat("tools[", index, "] (\"", name, "\")")));
      v1::ToolRef* ref = snapshot().add_tools();
      ref->set_name(name);
      ref->set_schema_hash(client::HashBytes(canonical));
      if (marker.has_value()) {
        AddBreakpoint(v1::PROMPT_SEGMENT_TOOLS, snapshot().tools_size() - 1,
                      *marker, &layout());
      }
    }
    return absl::OkStatus();
  }

  // Adds one content block to the message chain, its markers taken out.
  absl::Status AddBlock(CanonicalObject block, absl::string_view where) {
    const std::optional<element> marker = TakeCacheControls(block);
    CACHEWATCH_ASSIGN_OR_RETURN(const std::string canonical,
                                Canonical(block.ToCanonical(), where));
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

  // The options listed in `keys` that the body has, plus the members
  // `extra` has already, hashed as one canonical JSON object.
  template <typename Keys>
  absl::Status ReadOptions(element body, const Keys& keys,
                           CanonicalObject extra) {
    CanonicalObject options = std::move(extra);
    for (const char* key : keys) {
      if (const std::optional<element> value = Member(body, key)) {
        options.Set(key, *value);
      }
    }
    CACHEWATCH_ASSIGN_OR_RETURN(const std::string canonical,
                                Canonical(options.ToCanonical(), "options"));
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

std::string_view AnthropicToolName(element tool) {
  for (const char* key : {"name", "mcp_server_name", "type"}) {
    const std::string_view name = StringMember(tool, key);
    if (!name.empty()) return name;
  }
  return {};
}

// Claude Code's metadata.user_id: "user_<hash>_account_<uuid>_session_<uuid>"
// before v2.1.78, a JSON text with "session_id" since.
std::string ClaudeCodeSessionId(element body) {
  const std::optional<element> metadata = Member(body, "metadata");
  if (!metadata.has_value()) return {};
  const std::string_view user_id = StringMember(*metadata, "user_id");
  std::string session;
  if (!user_id.empty() && user_id.front() == '{') {
    // A text of n bytes nests at most n/2 deep: no bound of its own.
    const absl::StatusOr<JsonDocument> parsed = JsonDocument::Parse(
        user_id, static_cast<int>(std::min<size_t>(user_id.size(), 1 << 20)));
    if (parsed.ok()) {
      session = std::string(StringMember(parsed->root(), "session_id"));
    }
  } else if (const size_t at = user_id.rfind("_session_");
             at != std::string_view::npos) {
    session =
        std::string(user_id.substr(at + std::string_view("_session_").size()));
  }
  if (session.size() > kMaxBodySessionIdBytes) return {};
  return session;
}

// The anthropic-beta header values as a sorted set (the set keys the
// cache), in canonical form.
absl::StatusOr<std::string> AnthropicBetas(const HttpHeaders& headers) {
  std::set<std::string> betas;
  for (const auto& [name, value] : headers) {
    if (name != "anthropic-beta") continue;
    for (absl::string_view beta : absl::StrSplit(Sv(value), ',')) {
      beta = absl::StripAsciiWhitespace(beta);
      if (!beta.empty()) betas.emplace(beta);
    }
  }
  if (betas.empty()) return std::string();
  std::string canonical = "[";
  for (const std::string& beta : betas) {
    if (canonical.size() > 1) canonical.push_back(',');
    CACHEWATCH_RETURN_IF_ERROR(client::AppendCanonicalString(beta, &canonical));
  }
  canonical.push_back(']');
  return canonical;
}

absl::Status ReadAnthropicSystem(element body, Reader& reader) {
  const std::optional<element> system = Member(body, "system");
  if (!system.has_value()) {
    reader.SetSystemPrompt("");
    return absl::OkStatus();
  }
  if (system->is_string()) {
    reader.SetSystemPrompt(StringOf(*system));
    return absl::OkStatus();
  }
  if (!system->is_array()) return Invalid("system is not a string or an array");
  std::vector<std::string> texts;
  int i = 0;
  for (const element block : ArrayOf(*system)) {
    const int index = i++;
    if (!block.is_object()) {
      return Invalid(absl::StrCat("system[", index, "] is not an object"));
    }
    const std::optional<element> marker = CacheControlOf(block);
    std::string text(StringMember(block, "text"));
    if (StringMember(block, "type") != "text") {
      CACHEWATCH_ASSIGN_OR_RETURN(
          text, Canonical(CanonicalElement(block, kCacheControl),
                          absl::StrCat("system[", index, "]")));
    }
    reader.AddSystemSection(absl::StrCat("system[", index, "]"), text);
    if (marker.has_value()) {
      AddBreakpoint(v1::PROMPT_SEGMENT_SYSTEM, index, *marker,
                    &reader.layout());
    }
    texts.push_back(std::move(text));
  }
  reader.SetSystemPrompt(absl::StrJoin(texts, "\n\n"));
  return absl::OkStatus();
}

// The first text of the history, for the compaction marker.
std::string_view FirstText(element messages) {
  for (const element message : ArrayOf(messages)) {
    const std::optional<element> content = Member(message, "content");
    if (!content.has_value()) return {};
    if (content->is_string()) return StringOf(*content);
    if (content->is_array()) {
      for (const element block : ArrayOf(*content)) {
        return StringMember(block, "text");
      }
    }
    return {};
  }
  return {};
}

absl::Status ReadAnthropicMessages(element body, Reader& reader,
                                   ObservedRequest* out) {
  const std::optional<element> messages = Member(body, "messages");
  if (!messages.has_value() || !messages->is_array()) {
    return Invalid("messages is missing or not an array");
  }
  size_t i = 0;
  for (const element message : ArrayOf(*messages)) {
    const size_t index = i++;
    const std::string_view role = StringMember(message, "role");
    if (role.empty()) {
      return Invalid(absl::StrCat("messages[", index, "] has no role"));
    }
    const std::optional<element> content = Member(message, "content");
    if (content.has_value() && content->is_string()) {
      CanonicalObject block;
      block.SetString("role", role);
      block.SetString("type", "text");
      block.Set("text", *content);
      CACHEWATCH_RETURN_IF_ERROR(reader.AddBlock(
          std::move(block), absl::StrCat("messages[", index, "].content")));
      continue;
    }
    if (!content.has_value() || !content->is_array()) {
      return Invalid(absl::StrCat("messages[", index,
                                  "].content is missing or not a string or an "
                                  "array"));
    }
    size_t j = 0;
    for (const element part : ArrayOf(*content)) {
      const std::string where =
          absl::StrCat("messages[", index, "].content[", j++, "]");
      if (!part.is_object()) {
        return Invalid(absl::StrCat(where, " is not an object"));
      }
      CanonicalObject block;
      block.SetMembersOf(part);
      block.SetString("role", role);
      CACHEWATCH_RETURN_IF_ERROR(reader.AddBlock(std::move(block), where));
    }
  }
  const std::string_view first = FirstText(*messages);
  out->compaction_marker =
      first.substr(0, kClaudeCodeCompactionPrefix.size()) ==
      kClaudeCodeCompactionPrefix;
  return absl::OkStatus();
}

absl::Status ReadAnthropic(element body, const HttpHeaders& headers,
                           ObservedRequest* out) {
  Reader reader(out);
  CACHEWATCH_RETURN_IF_ERROR(reader.ReadModel(body));
  CACHEWATCH_RETURN_IF_ERROR(reader.ReadTools(body, AnthropicToolName));
  CACHEWATCH_RETURN_IF_ERROR(ReadAnthropicSystem(body, reader));
  CACHEWATCH_RETURN_IF_ERROR(ReadAnthropicMessages(body, reader, out));
  CanonicalObject extra;
  absl::StatusOr<std::string> betas = AnthropicBetas(headers);
  if (!betas.ok() || !betas->empty()) {
    extra.SetCanonical("betas", std::move(betas));
  }
  CACHEWATCH_RETURN_IF_ERROR(
      reader.ReadOptions(body, kAnthropicOptionKeys, std::move(extra)));
  v1::CacheControl& layout = reader.layout();
  if (const std::optional<element> automatic = Member(body, kCacheControl)) {
    layout.set_automatic(true);
    layout.set_ttl_seconds(TtlSeconds(*automatic));
  }
  layout.set_enabled(layout.automatic() || layout.breakpoints_size() > 0);
  out->body_session_id = ClaudeCodeSessionId(body);
  out->stream = TrueMember(body, "stream");
  out->has_diagnostics_field = LastMember(body, "diagnostics").has_value();
  return absl::OkStatus();
}

// --- OpenAI Chat Completions and Responses ---------------------------------

std::string_view OpenAiToolName(element tool) {
  if (const std::optional<element> function = Member(tool, "function")) {
    const std::string_view name = StringMember(*function, "name");
    if (!name.empty()) return name;
  }
  for (const char* key : {"name", "server_label", "type"}) {
    const std::string_view name = StringMember(tool, key);
    if (!name.empty()) return name;
  }
  return {};
}

bool IsSystemMessage(element message) {
  const std::string_view role = StringMember(message, "role");
  const std::string_view type = StringMember(message, "type");
  return (role == "system" || role == "developer") &&
         (type.empty() || type == "message");
}

// A block of a message: `extra` members, then the role.
CanonicalObject MessageBlock(std::string_view role, const ExtraMembers& extra) {
  CanonicalObject block;
  for (const auto& [name, value] : extra) block.Set(name, value);
  block.SetString("role", role);
  return block;
}

// Adds a message's content as blocks: a string as one text block, an array
// part by part, anything else as one "content" block. `extra` members go
// into every block.
absl::Status AddContent(std::string_view role, std::optional<element> content,
                        const ExtraMembers& extra, absl::string_view where,
                        Reader& reader) {
  if (!content.has_value()) return absl::OkStatus();
  if (content->is_string()) {
    CanonicalObject block = MessageBlock(role, extra);
    block.SetString("type", "text");
    block.Set("text", *content);
    return reader.AddBlock(std::move(block), where);
  }
  if (content->is_array()) {
    size_t j = 0;
    for (const element part : ArrayOf(*content)) {
      const std::string part_where = absl::StrCat(where, "[", j++, "]");
      if (!part.is_object()) {
        return Invalid(absl::StrCat(part_where, " is not an object"));
      }
      CanonicalObject block;
      block.SetMembersOf(part);
      for (const auto& [name, value] : extra) block.Set(name, value);
      block.SetString("role", role);
      CACHEWATCH_RETURN_IF_ERROR(reader.AddBlock(std::move(block), part_where));
    }
    return absl::OkStatus();
  }
  CanonicalObject block = MessageBlock(role, extra);
  block.SetString("type", "content");
  block.Set("content", *content);
  return reader.AddBlock(std::move(block), where);
}

// The system and developer messages: the system prompt (their texts joined
// when all are strings, else the canonical JSON of their roles and
// contents) and one section each. A content's parts are written without
// their markers.
absl::Status ReadChatSystem(const std::vector<element>& system,
                            Reader& reader) {
  std::vector<std::string> texts;
  bool all_strings = true;
  for (size_t i = 0; i < system.size(); ++i) {
    const element message = system[i];
    const std::optional<element> content = LastMember(message, "content");
    const bool has_parts = content.has_value() && content->is_array();
    std::optional<element> marker;
    if (has_parts) {
      for (const element part : ArrayOf(*content)) {
        if (std::optional<element> found = CacheControlOf(part)) {
          marker = found;
        }
      }
    }
    std::string text;
    if (content.has_value() && content->is_string()) {
      text = std::string(StringOf(*content));
    } else {
      all_strings = false;
      if (content.has_value()) {
        CACHEWATCH_ASSIGN_OR_RETURN(
            text, Canonical(CanonicalElement(*content,
                                             has_parts ? kCacheControl : ""),
                            absl::StrCat("system message ", i, " content")));
      } else {
        text = "null";
      }
    }
    reader.AddSystemSection(
        absl::StrCat(Sv(StringMember(message, "role")), "[", i, "]"), text);
    if (marker.has_value()) {
      AddBreakpoint(v1::PROMPT_SEGMENT_SYSTEM, static_cast<int>(i), *marker,
                    &reader.layout());
    }
    texts.push_back(std::move(text));
  }
  if (all_strings) {
    reader.SetSystemPrompt(absl::StrJoin(texts, "\n\n"));
    return absl::OkStatus();
  }
  // [{"role": …, "content": …}, …], each object inside the array.
  std::string parts = "[";
  for (const element message : system) {
    if (parts.size() > 1) parts.push_back(',');
    CanonicalObject part;
    part.Set("role", *LastMember(message, "role"));
    const std::optional<element> content = LastMember(message, "content");
    if (!content.has_value()) {
      part.SetCanonical("content", std::string("null"));
    } else if (content->is_array()) {
      part.SetWithout("content", *content, kCacheControl);
    } else {
      part.Set("content", *content);
    }
    const absl::Status written = part.AppendTo(1, &parts);
    if (!written.ok()) {
      return Invalid(absl::StrCat("system messages: ", written.message()));
    }
  }
  parts.push_back(']');
  reader.SetSystemPrompt(parts);
  return absl::OkStatus();
}

absl::Status ReadChatMessages(element body, Reader& reader) {
  const std::optional<element> messages = Member(body, "messages");
  if (!messages.has_value() || !messages->is_array()) {
    return Invalid("messages is missing or not an array");
  }
  std::vector<element> system;
  for (const element message : ArrayOf(*messages)) {
    if (IsSystemMessage(message)) system.push_back(message);
  }
  CACHEWATCH_RETURN_IF_ERROR(ReadChatSystem(system, reader));
  size_t i = 0;
  for (const element message : ArrayOf(*messages)) {
    const std::string where = absl::StrCat("messages[", i++, "]");
    if (!message.is_object()) {
      return Invalid(absl::StrCat(where, " is not an object"));
    }
    if (IsSystemMessage(message)) continue;
    const std::string_view role = StringMember(message, "role");
    if (role.empty()) return Invalid(absl::StrCat(where, " has no role"));
    ExtraMembers extra;
    for (const char* key : {"tool_call_id", "name"}) {
      if (const std::optional<element> value = Member(message, key)) {
        extra.emplace_back(key, *value);
      }
    }
    CACHEWATCH_RETURN_IF_ERROR(
        AddContent(role, Member(message, "content"), extra,
                   absl::StrCat(where, ".content"), reader));
    if (const std::optional<element> calls = Member(message, "tool_calls")) {
      if (!calls->is_array()) {
        return Invalid(absl::StrCat(where, ".tool_calls is not an array"));
      }
      size_t j = 0;
      for (const element call : ArrayOf(*calls)) {
        const std::string call_where =
            absl::StrCat(where, ".tool_calls[", j++, "]");
        if (!call.is_object()) {
          return Invalid(absl::StrCat(call_where, " is not an object"));
        }
        CanonicalObject block;
        block.SetMembersOf(call);
        if (const std::optional<element> type = LastMember(call, "type")) {
          block.Set("call_type", *type);
        }
        block.SetString("role", role);
        block.SetString("type", "tool_call");
        CACHEWATCH_RETURN_IF_ERROR(
            reader.AddBlock(std::move(block), call_where));
      }
    }
    if (const std::optional<element> call = Member(message, "function_call")) {
      if (!call->is_object()) {
        return Invalid(absl::StrCat(where, ".function_call is not an object"));
      }
      CanonicalObject block;
      block.SetMembersOf(*call);
      block.SetString("role", role);
      block.SetString("type", "function_call");
      CACHEWATCH_RETURN_IF_ERROR(reader.AddBlock(
          std::move(block), absl::StrCat(where, ".function_call")));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadResponsesInput(element body, Reader& reader,
                                ObservedRequest* out) {
  const std::optional<element> instructions = Member(body, "instructions");
  if (!instructions.has_value()) {
    reader.SetSystemPrompt("");
  } else if (instructions->is_string()) {
    reader.SetSystemPrompt(StringOf(*instructions));
  } else {
    CACHEWATCH_ASSIGN_OR_RETURN(
        const std::string canonical,
        Canonical(CanonicalElement(*instructions), "instructions"));
    reader.SetSystemPrompt(canonical);
  }
  const std::optional<element> input = Member(body, "input");
  if (!input.has_value()) return absl::OkStatus();
  if (input->is_string()) {
    CanonicalObject block;
    block.SetString("role", "user");
    block.SetString("type", "text");
    block.Set("text", *input);
    return reader.AddBlock(std::move(block), "input");
  }
  if (!input->is_array()) return Invalid("input is not a string or an array");
  size_t i = 0;
  for (const element item : ArrayOf(*input)) {
    const std::string where = absl::StrCat("input[", i++, "]");
    if (!item.is_object()) {
      return Invalid(absl::StrCat(where, " is not an object"));
    }
    const std::string_view type = StringMember(item, "type");
    if (type == "compaction" || type == "compaction_summary") {
      out->compaction_marker = true;
    }
    const std::string_view role = StringMember(item, "role");
    if (!role.empty() && (type.empty() || type == "message")) {
      CACHEWATCH_RETURN_IF_ERROR(AddContent(role, Member(item, "content"), {},
                                            absl::StrCat(where, ".content"),
                                            reader));
      continue;
    }
    CanonicalObject block;
    block.SetMembersOf(item);
    CACHEWATCH_RETURN_IF_ERROR(reader.AddBlock(std::move(block), where));
  }
  return absl::OkStatus();
}

absl::Status ReadOpenAi(ProxyApi api, element body, ObservedRequest* out) {
  Reader reader(out);
  CACHEWATCH_RETURN_IF_ERROR(reader.ReadModel(body));
  CACHEWATCH_RETURN_IF_ERROR(reader.ReadTools(body, OpenAiToolName));
  if (api == ProxyApi::kOpenAiChat) {
    CACHEWATCH_RETURN_IF_ERROR(ReadChatMessages(body, reader));
    if (const std::optional<element> options = Member(body, "stream_options")) {
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
    out->has_diagnostics_field =
        LastMember(body, "prompt_cache_options").has_value();
  }
  CACHEWATCH_RETURN_IF_ERROR(
      reader.ReadOptions(body, kOpenAiOptionKeys, CanonicalObject()));
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
  CACHEWATCH_ASSIGN_OR_RETURN(const JsonDocument document,
                              ParseBody(body, max_body_bytes));
  const element root = document.root();
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
