// JsonDocument: a JSON text parsed by simdjson (a 222 KB request body:
// ~0.5 ms against nlohmann's ~2 ms; docs/PERFORMANCE.md, round 18), read in
// place through simdjson's DOM: nothing is copied out of it.
//
// A text parses, or fails, exactly as it does with nlohmann::json::parse,
// which the proxy's reader and the client library were written against:
//   - simdjson keeps every member of an object, a repeated name included;
//     readers take the last, as nlohmann keeps (LastMember below);
//   - a text simdjson refuses (malformed, invalid UTF-8, an unescaped
//     control character, an integer beyond 64 bits, a leading byte order
//     mark, a NUL byte after the value: nlohmann's end of input) is parsed
//     by nlohmann after a scan of its depth, up to any NUL byte. If nlohmann
//     reads it, the document is simdjson's parse of nlohmann's serialization
//     of that value: the same values, a big integer as the double nlohmann
//     made of it. Otherwise the error is nlohmann's.
//
// Errors (InvalidArgument): "nests deeper than <max_depth> arrays or
// objects" when the text nests more than `max_depth` (the outermost counts
// as 1), whatever else is wrong with it; "malformed JSON at byte <n>" with
// nlohmann's byte; "malformed JSON: a number is out of range" (1e400).
// ResourceExhausted when simdjson cannot allocate the document.
//
// Memory: simdjson's padded copy of the text and its document, about twice
// the text's size (a 12.7 MB request body: +26 MB at peak).
//
// Thread-safe: a document is immutable once parsed; each parse uses a
// parser of its own.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_JSON_DOCUMENT_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_JSON_DOCUMENT_H_

#include <simdjson.h>

#include <memory>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"

namespace cachewatch {

class JsonDocument {
 public:
  static absl::StatusOr<JsonDocument> Parse(std::string_view text,
                                            int max_depth);

  // The value the text holds; valid while this document lives.
  simdjson::dom::element root() const { return root_; }

 private:
  JsonDocument() = default;

  std::unique_ptr<simdjson::dom::parser> parser_;
  simdjson::dom::element root_;
};

// The object or array `value` holds, which it must (copied out of simdjson's
// result: iterating the result itself would read a destroyed temporary).
inline simdjson::dom::object ObjectOf(simdjson::dom::element value) {
  return value.get_object().value_unsafe();
}
inline simdjson::dom::array ArrayOf(simdjson::dom::element value) {
  return value.get_array().value_unsafe();
}

// The last member named `name` of `value`, as nlohmann keeps it; nullopt
// when `value` is not an object or has no such member.
std::optional<simdjson::dom::element> LastMember(simdjson::dom::element value,
                                                 std::string_view name);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_JSON_DOCUMENT_H_
