#include "daemon/receiver/proxy/json_document.h"

#include <simdjson.h>

#include <cstdint>
#include <string>

namespace cachewatch {
namespace {

using Json = nlohmann::json;
namespace dom = simdjson::dom;

// `element` as nlohmann's value, into `out`.
void Convert(dom::element element, Json& out) {
  switch (element.type()) {
    case dom::element_type::OBJECT: {
      out = Json::object();
      const dom::object object = element.get_object().value_unsafe();
      for (const dom::key_value_pair field : object) {
        Convert(field.value, out[std::string(field.key)]);
      }
      return;
    }
    case dom::element_type::ARRAY: {
      out = Json::array();
      const dom::array array = element.get_array().value_unsafe();
      Json::array_t& values = out.get_ref<Json::array_t&>();
      values.reserve(array.size());
      for (const dom::element value : array) {
        Convert(value, values.emplace_back());
      }
      return;
    }
    case dom::element_type::STRING:
      out = std::string(element.get_string().value_unsafe());
      return;
    case dom::element_type::INT64: {
      const int64_t value = element.get_int64().value_unsafe();
      if (value >= 0) {
        out = static_cast<uint64_t>(value);
      } else {
        out = value;
      }
      return;
    }
    case dom::element_type::UINT64:
      out = element.get_uint64().value_unsafe();
      return;
    case dom::element_type::DOUBLE:
      out = element.get_double().value_unsafe();
      return;
    case dom::element_type::BOOL:
      out = element.get_bool().value_unsafe();
      return;
    case dom::element_type::NULL_VALUE:
      out = nullptr;
      return;
  }
}

}  // namespace

Json ParseJsonDocument(std::string_view text) {
  dom::parser parser;
  dom::element root;
  const simdjson::padded_string padded(text);
  if (parser.parse(padded).get(root) != simdjson::SUCCESS) {
    return Json::parse(text.begin(), text.end());
  }
  Json value;
  Convert(root, value);
  return value;
}

}  // namespace cachewatch
