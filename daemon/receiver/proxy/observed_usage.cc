#include "daemon/receiver/proxy/observed_usage.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/usage_normalizer.h"
#include "daemon/receiver/proxy/sse_reader.h"
#include "nlohmann/json.hpp"

namespace cachewatch {
namespace {

using Json = nlohmann::json;

const Json* Member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string StringMember(const Json& object, const char* key) {
  const Json* value = Member(object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>()
                                                : std::string();
}

// Parses `text`; a discarded value when it is not JSON.
Json Parse(std::string_view text) {
  return Json::parse(text.begin(), text.end(), nullptr,
                     /*allow_exceptions=*/false);
}

bool IsEventStream(const HttpHeaders& headers) {
  for (const auto& [name, value] : headers) {
    if (name == "content-type") {
      return absl::StrContains(absl::AsciiStrToLower(value),
                               "text/event-stream");
    }
  }
  return false;
}

// What a response carried, gathered from its body or its events.
class UsageBuilder {
 public:
  explicit UsageBuilder(ProxyApi api) : api_(api) {}

  // Takes id and model from `message` unless already known.
  void SetIdentity(const Json& message) {
    if (out_.response_id.empty())
      out_.response_id = StringMember(message, "id");
    if (out_.model.empty()) out_.model = StringMember(message, "model");
  }

  void SetUsage(const Json& usage) {
    if (usage.is_object()) usage_ = usage;
  }

  // Anthropic message_delta: its non-null counts replace the ones so far.
  void MergeUsage(const Json& usage) {
    if (!usage.is_object() || !usage_.is_object()) return;
    for (const auto& [key, value] : usage.items()) {
      if (!value.is_null()) usage_[key] = value;
    }
  }

  void SetDiagnostics(const Json& response) {
    const char* key = api_ == ProxyApi::kAnthropicMessages
                          ? "diagnostics"
                          : "prompt_cache_diagnostics";
    if (const Json* diagnostics = Member(response, key)) {
      diagnostics_ = *diagnostics;
    }
  }

  bool has_usage() const { return usage_.is_object(); }

  ObservedUsage Finish(bool complete, std::string note) {
    if (!usage_.is_object()) {
      out_.note = note.empty() ? "the response carried no usage" : note;
      return std::move(out_);
    }
    Json raw = {{"usage", usage_}};
    if (!diagnostics_.is_null()) {
      raw[api_ == ProxyApi::kAnthropicMessages ? "diagnostics"
                                               : "prompt_cache_diagnostics"] =
          diagnostics_;
    }
    std::string text = raw.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (text.size() > kMaxRawUsageJsonBytes) {
      out_.note =
          absl::StrCat("the usage is ", text.size(),
                       " bytes of JSON, more than ", kMaxRawUsageJsonBytes);
      return std::move(out_);
    }
    out_.raw_usage_json = std::move(text);
    out_.diagnostics = MissReason();
    out_.complete = complete;
    out_.note = complete ? std::string() : std::move(note);
    return std::move(out_);
  }

 private:
  std::optional<v1::ProviderCacheDiagnostics> MissReason() const {
    v1::ProviderCacheDiagnostics result;
    const Json* missed = nullptr;
    if (api_ == ProxyApi::kAnthropicMessages) {
      const Json* reason = Member(diagnostics_, "cache_miss_reason");
      if (reason == nullptr) return std::nullopt;
      result.set_cache_miss_reason(StringMember(*reason, "type"));
      missed = Member(*reason, "cache_missed_input_tokens");
    } else {
      const std::string type = StringMember(diagnostics_, "type");
      if (type.empty() || type == "cache_hit") return std::nullopt;
      const std::string reason = StringMember(diagnostics_, "reason");
      result.set_cache_miss_reason(
          type == "cache_miss" && !reason.empty() ? reason : type);
      missed = Member(diagnostics_, "cache_missed_tokens");
    }
    if (result.cache_miss_reason().empty()) return std::nullopt;
    if (missed != nullptr && missed->is_number_integer() &&
        missed->get<int64_t>() >= 0) {
      result.set_cache_missed_input_tokens(missed->get<int64_t>());
    }
    return result;
  }

  ProxyApi api_;
  ObservedUsage out_;
  Json usage_;        // null until a usage object is seen.
  Json diagnostics_;  // null unless the response had diagnostics.
};

ObservedUsage ReadJsonBody(ProxyApi api, std::string_view body,
                           bool body_complete) {
  UsageBuilder builder(api);
  const Json response = Parse(body);
  if (response.is_discarded() || !response.is_object()) {
    return builder.Finish(false, body_complete
                                     ? "the response body is not a JSON object"
                                     : "the response body was cut short");
  }
  builder.SetIdentity(response);
  if (const Json* usage = Member(response, "usage")) builder.SetUsage(*usage);
  builder.SetDiagnostics(response);
  return builder.Finish(true, "");
}

// The type of an event: its "event" field, else the "type" its data names.
std::string EventType(const SseEvent& event, const Json** data_json,
                      Json* storage) {
  *data_json = nullptr;
  if (!event.type.empty()) return event.type;
  *storage = Parse(event.data);
  *data_json = storage;
  return StringMember(*storage, "type");
}

ObservedUsage ReadAnthropicStream(std::string_view body) {
  UsageBuilder builder(ProxyApi::kAnthropicMessages);
  SseReader reader(body);
  SseEvent event;
  bool delta_seen = false;
  bool stop_seen = false;
  std::string error;
  while (reader.Next(&event)) {
    Json storage;
    const Json* data = nullptr;
    const std::string type = EventType(event, &data, &storage);
    if (type != "message_start" && type != "message_delta" &&
        type != "message_stop" && type != "error") {
      continue;
    }
    if (data == nullptr) {
      storage = Parse(event.data);
      data = &storage;
    }
    if (type == "message_start") {
      if (const Json* message = Member(*data, "message")) {
        builder.SetIdentity(*message);
        if (const Json* usage = Member(*message, "usage")) {
          builder.SetUsage(*usage);
        }
        builder.SetDiagnostics(*message);
      }
    } else if (type == "message_delta") {
      if (const Json* usage = Member(*data, "usage")) {
        builder.MergeUsage(*usage);
        delta_seen = true;
      }
    } else if (type == "message_stop") {
      stop_seen = true;
    } else {
      const Json* detail = Member(*data, "error");
      error = absl::StrCat("the stream ended with an error event (",
                           detail != nullptr ? StringMember(*detail, "type")
                                             : std::string("unknown"),
                           ")");
    }
  }
  if (!builder.has_usage()) {
    return builder.Finish(
        false, error.empty() ? "the stream ended before message_start" : error);
  }
  if (delta_seen && stop_seen) return builder.Finish(true, "");
  return builder.Finish(
      false, !error.empty() ? error
             : delta_seen   ? "the stream ended before message_stop"
                            : "the stream ended before message_delta: the "
                              "output count is missing (input and cache "
                              "counts are final)");
}

// Whether a chat chunk's data has a "usage" member that is an object.
bool HasUsageObject(std::string_view data) {
  size_t at = data.find("\"usage\"");
  while (at != std::string_view::npos) {
    size_t i = at + 7;
    while (i < data.size() && (data[i] == ' ' || data[i] == ':')) ++i;
    if (i < data.size() && data[i] == '{') return true;
    at = data.find("\"usage\"", at + 7);
  }
  return false;
}

ObservedUsage ReadChatStream(std::string_view body, bool include_usage) {
  UsageBuilder builder(ProxyApi::kOpenAiChat);
  SseReader reader(body);
  SseEvent event;
  bool done = false;
  bool identified = false;
  while (reader.Next(&event)) {
    if (event.data == "[DONE]") {
      done = true;
      continue;
    }
    const bool usage = HasUsageObject(event.data);
    if (identified && !usage) continue;
    const Json chunk = Parse(event.data);
    if (!chunk.is_object()) continue;
    builder.SetIdentity(chunk);
    identified = true;
    if (const Json* value = Member(chunk, "usage")) builder.SetUsage(*value);
  }
  if (builder.has_usage()) {
    return builder.Finish(true, "");
  }
  if (!include_usage) {
    return builder.Finish(false,
                          "stream_options.include_usage was not set: the "
                          "stream carries no usage");
  }
  return builder.Finish(false, done
                                   ? "the stream carried no usage chunk"
                                   : "the stream ended before its usage chunk");
}

bool IsFinalResponseEvent(std::string_view type) {
  return type == "response.completed" || type == "response.incomplete" ||
         type == "response.failed";
}

ObservedUsage ReadResponsesStream(std::string_view body) {
  UsageBuilder builder(ProxyApi::kOpenAiResponses);
  SseReader reader(body);
  SseEvent event;
  bool final_seen = false;
  while (reader.Next(&event)) {
    Json storage;
    const Json* data = nullptr;
    if (event.type.empty() &&
        event.data.find("\"response.") == std::string::npos) {
      continue;
    }
    const std::string type = EventType(event, &data, &storage);
    if (type != "response.created" && !IsFinalResponseEvent(type)) continue;
    if (data == nullptr) {
      storage = Parse(event.data);
      data = &storage;
    }
    const Json* response = Member(*data, "response");
    if (response == nullptr) continue;
    builder.SetIdentity(*response);
    if (IsFinalResponseEvent(type)) {
      final_seen = true;
      if (const Json* usage = Member(*response, "usage")) {
        builder.SetUsage(*usage);
      }
      builder.SetDiagnostics(*response);
    }
  }
  return builder.Finish(final_seen, final_seen
                                        ? "response.completed carried no usage"
                                        : "the stream ended before "
                                          "response.completed");
}

}  // namespace

ObservedUsage ReadObservedUsage(ProxyApi api, bool include_usage, int status,
                                const HttpHeaders& headers,
                                std::string_view body, bool body_complete,
                                size_t max_body_bytes) {
  ObservedUsage out;
  if (status == 0) {
    out.note = "no response from the upstream";
    return out;
  }
  if (status < 200 || status > 299) {
    out.note = absl::StrCat("HTTP ", status, ": no usage");
    return out;
  }
  if (body.size() > max_body_bytes) {
    out.note =
        absl::StrCat("the response body is ", body.size(),
                     " bytes, more than the ", max_body_bytes, " observed");
    return out;
  }
  if (!IsEventStream(headers)) return ReadJsonBody(api, body, body_complete);
  switch (api) {
    case ProxyApi::kAnthropicMessages:
      return ReadAnthropicStream(body);
    case ProxyApi::kOpenAiChat:
      return ReadChatStream(body, include_usage);
    case ProxyApi::kOpenAiResponses:
      return ReadResponsesStream(body);
  }
  return out;
}

}  // namespace cachewatch
