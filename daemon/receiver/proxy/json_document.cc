#include "daemon/receiver/proxy/json_document.h"

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace cachewatch {
namespace {

namespace dom = simdjson::dom;

absl::Status TooDeep(int max_depth) {
  return absl::InvalidArgumentError(
      absl::StrCat("nests deeper than ", max_depth, " arrays or objects"));
}

// Whether `element`, inside `depth` arrays and objects, nests more than
// `max_depth` of them. simdjson bounds the recursion: it refuses a text
// nesting more than its own bound, one above `max_depth`.
bool NestsDeeperThan(dom::element element, int depth, int max_depth) {
  switch (element.type()) {
    case dom::element_type::OBJECT:
      if (depth == max_depth) return true;
      for (const dom::key_value_pair field : ObjectOf(element)) {
        if (NestsDeeperThan(field.value, depth + 1, max_depth)) return true;
      }
      return false;
    case dom::element_type::ARRAY:
      if (depth == max_depth) return true;
      for (const dom::element value : ArrayOf(element)) {
        if (NestsDeeperThan(value, depth + 1, max_depth)) return true;
      }
      return false;
    default:
      return false;
  }
}

// Whether `text` nests more than `max_depth` arrays and objects, read
// without parsing it (brackets inside strings do not count). It ends at a
// NUL byte, as nlohmann reads it.
bool TextNestsDeeperThan(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (c == '\0') break;
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// nlohmann's reading of a text simdjson refused, serialized again; or its
// error.
absl::StatusOr<std::string> ReadByNlohmann(std::string_view text) {
  try {
    return nlohmann::json::parse(text.begin(), text.end()).dump();
  } catch (const nlohmann::json::parse_error& error) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON at byte ", error.byte));
  } catch (const nlohmann::json::exception&) {  // A number out of range.
    return absl::InvalidArgumentError(
        "malformed JSON: a number is out of range");
  }
}

absl::Status NoMemoryFor(std::string_view text) {
  return absl::ResourceExhaustedError(
      absl::StrCat("no memory for the document of ", text.size(), " bytes"));
}

}  // namespace

absl::StatusOr<JsonDocument> JsonDocument::Parse(std::string_view text,
                                                 int max_depth) {
  JsonDocument document;
  document.parser_ = std::make_unique<dom::parser>();
  // simdjson refuses `max_depth` nested objects at a bound of `max_depth`
  // (arrays it reads), so its bound is one more, and NestsDeeperThan() holds
  // the text to `max_depth` exactly.
  const auto parse = [&](std::string_view json) {
    simdjson::error_code error = document.parser_->allocate(
        json.size(), static_cast<size_t>(max_depth) + 1);
    if (error != simdjson::SUCCESS) return error;
    return document.parser_->parse(json.data(), json.size(), true)
        .get(document.root_);
  };
  simdjson::error_code error = parse(text);
  // Without memory for simdjson's document, none for nlohmann's either:
  // its fallback would end in std::bad_alloc.
  if (error == simdjson::MEMALLOC) return NoMemoryFor(text);
  if (error != simdjson::SUCCESS && error != simdjson::DEPTH_ERROR) {
    if (TextNestsDeeperThan(text, max_depth)) return TooDeep(max_depth);
    absl::StatusOr<std::string> serialized = ReadByNlohmann(text);
    if (!serialized.ok()) return serialized.status();
    error = parse(*serialized);
  }
  if (error == simdjson::DEPTH_ERROR ||
      (error == simdjson::SUCCESS &&
       NestsDeeperThan(document.root_, 0, max_depth))) {
    return TooDeep(max_depth);
  }
  if (error == simdjson::MEMALLOC) return NoMemoryFor(text);
  if (error != simdjson::SUCCESS) {  // nlohmann's serialization refused.
    return absl::InternalError(absl::StrCat(
        "simdjson refused nlohmann's text: ", simdjson::error_message(error)));
  }
  return document;
}

std::optional<dom::element> LastMember(dom::element value,
                                       std::string_view name) {
  if (!value.is_object()) return std::nullopt;
  std::optional<dom::element> last;
  for (const dom::key_value_pair field : ObjectOf(value)) {
    if (field.key == name) last = field.value;
  }
  return last;
}

}  // namespace cachewatch
