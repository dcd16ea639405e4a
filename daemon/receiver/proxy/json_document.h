// ParseJsonDocument: a JSON text parsed into the nlohmann::json value that
// nlohmann::json::parse makes of it, by simdjson (a 222 KB request body:
// ~0.5 ms against nlohmann's ~2 ms; docs/PERFORMANCE.md, round 18).
//
// The value is nlohmann's, types included: integers in int64 range are
// signed when negative and unsigned otherwise, other numbers doubles (an
// integer beyond 64 bits too); a repeated key keeps its last value. One
// difference, in type only: "-0" is unsigned 0 here and signed 0 in
// nlohmann (equal, and written "0" by both).
//
// A text that nests more than `max_depth` arrays and objects (the outermost
// counts as 1) reads as nullopt, whatever else is wrong with it, before
// anything recurses into it: simdjson bounds the depth as it parses.
//
// Any other text simdjson refuses (malformed, invalid UTF-8, an unescaped
// control character, an integer beyond 64 bits, a leading byte order mark)
// is parsed by nlohmann::json::parse, after a scan of its depth, and returns
// its value or throws its usual exceptions (json::parse_error,
// json::out_of_range). So a text parses, or fails, exactly as it does with
// nlohmann alone.
//
// Memory: while the value is built, simdjson's padded copy of the text and
// its document live beside it: about 4× the text's size at peak (a 16 MB
// text: +60 MB, against +25 MB for nlohmann's parse).
//
// Thread-safe: each call uses a parser of its own.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_JSON_DOCUMENT_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_JSON_DOCUMENT_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace cachewatch {

std::optional<nlohmann::json> ParseJsonDocument(std::string_view text,
                                                int max_depth);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_JSON_DOCUMENT_H_
