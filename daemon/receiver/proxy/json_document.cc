#include "daemon/receiver/proxy/json_document.h"

#include <simdjson.h>

#include <cstdint>
#include <string>

namespace cachewatch {
namespace {

using Json = nlohmann::json;
namespace dom = simdjson::dom;

// `element`, at `depth` arrays and objects, as nlohmann's value, into
// `out`; false when it nests more than `max_depth` of them.
bool Convert(dom::element element, int depth, int max_depth, Json& out) {
  switch (element.type()) {
    case dom::element_type::OBJECT: {
      if (depth == max_depth) return false;
      out = Json::object();
      const dom::object object = element.get_object().value_unsafe();
      for (const dom::key_value_pair field : object) {
        if (!Convert(field.value, depth + 1, max_depth,
                     out[std::string(field.key)])) {
          return false;
        }
      }
      return true;
    }
    case dom::element_type::ARRAY: {
      if (depth == max_depth) return false;
      out = Json::array();
      const dom::array array = element.get_array().value_unsafe();
      Json::array_t& values = out.get_ref<Json::array_t&>();
      values.reserve(array.size());
      for (const dom::element value : array) {
        if (!Convert(value, depth + 1, max_depth, values.emplace_back())) {
          return false;
        }
      }
      return true;
    }
    case dom::element_type::STRING:
      out = std::string(element.get_string().value_unsafe());
      return true;
    case dom::element_type::INT64: {
      const int64_t value = element.get_int64().value_unsafe();
      if (value >= 0) {
        out = static_cast<uint64_t>(value);
      } else {
        out = value;
      }
      return true;
    }
    case dom::element_type::UINT64:
      out = element.get_uint64().value_unsafe();
      return true;
    case dom::element_type::DOUBLE:
      out = element.get_double().value_unsafe();
      return true;
    case dom::element_type::BOOL:
      out = element.get_bool().value_unsafe();
      return true;
    case dom::element_type::NULL_VALUE:
      out = nullptr;
      return true;
  }
  return true;
}

// Whether `text` nests more than `max_depth` arrays and objects, read
// without parsing it (brackets inside strings do not count).
bool NestsDeeperThan(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
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

}  // namespace

std::optional<Json> ParseJsonDocument(std::string_view text, int max_depth) {
  dom::parser parser;
  dom::element root;
  const simdjson::padded_string padded(text);
  // simdjson refuses `max_depth` nested objects at a bound of `max_depth`
  // (arrays it reads), so its bound is one more, and Convert() holds the
  // text to `max_depth` exactly.
  simdjson::error_code error =
      parser.allocate(padded.size(), static_cast<size_t>(max_depth) + 1);
  if (error == simdjson::SUCCESS) error = parser.parse(padded).get(root);
  if (error == simdjson::DEPTH_ERROR) return std::nullopt;
  if (error != simdjson::SUCCESS) {
    if (NestsDeeperThan(text, max_depth)) return std::nullopt;
    return Json::parse(text.begin(), text.end());
  }
  Json value;
  if (!Convert(root, 0, max_depth, value)) return std::nullopt;
  return value;
}

}  // namespace cachewatch
