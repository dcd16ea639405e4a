// Canonical JSON: the JSON Canonicalization Scheme of RFC 8785 (JCS).
//
// The canonical form is the byte string every cachewatch client, in every
// language, hashes; the shared vectors in tests/vectors/ fix it. It is:
//   - no whitespace between tokens;
//   - object members sorted by their names compared as UTF-16 code units
//     (JavaScript's `<`; not UTF-8 byte order, which differs for characters
//     above U+FFFF against those in U+E000..U+FFFF);
//   - every number read as an IEEE 754 double (as JavaScript does, so
//     integers beyond 2^53 round) and written in ECMAScript Number-to-String
//     form: shortest round-trip digits, exponent form ("1e+21", "1e-7") at
//     1e21 and above and below 1e-6, "-0" written as "0";
//   - strings with only '"', '\\' and controls below U+0020 escaped ("\b",
//     "\f", "\n", "\r", "\t", others as "\u00xx" in lowercase hex), every
//     other character as raw UTF-8.
//
// Rejected with absl::InvalidArgumentError: text that is not JSON (RFC 8259,
// including a leading byte-order mark), text over kMaxCanonicalJsonBytes,
// nesting deeper than kMaxCanonicalJsonDepth, an object with a repeated
// member name, strings that are not valid Unicode (ill-formed UTF-8, lone
// surrogate escapes), and numbers that are not finite doubles (1e400).
//
// Thread-safe: these are pure functions.

#ifndef CACHEWATCH_CLIENT_CANONICAL_JSON_H_
#define CACHEWATCH_CLIENT_CANONICAL_JSON_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace cachewatch::client {

// The largest JSON text accepted: 1 MiB.
inline constexpr size_t kMaxCanonicalJsonBytes = size_t{1} << 20;

// The deepest nesting accepted: 128 arrays or objects inside one another
// ("[]" has depth 1; a scalar has depth 0).
inline constexpr int kMaxCanonicalJsonDepth = 128;

// Returns the canonical form of the JSON text `json_text`.
absl::StatusOr<std::string> CanonicalizeJson(std::string_view json_text);

// Returns the canonical form of an already parsed value. Integers are read as
// doubles; strings and member names must be valid UTF-8; binary values,
// discarded values and non-finite numbers are rejected. (A separate name:
// a std::string converts to both std::string_view and nlohmann::json.)
absl::StatusOr<std::string> CanonicalizeJsonValue(const nlohmann::json& value);

}  // namespace cachewatch::client

#endif  // CACHEWATCH_CLIENT_CANONICAL_JSON_H_
