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
// The parts below are what the two functions write with, for a writer over
// another parsed representation (the daemon's proxy writes from simdjson's
// document). Such a writer is canonical, and fails as these functions do,
// when it writes no whitespace; checks each array or object with
// CheckCanonicalDepth and then each object's member names with
// CheckCanonicalMemberName; keeps the last of a repeated member name; sorts
// members with CanonicalNameLess; and writes names and strings with
// AppendCanonicalString and numbers with AppendCanonicalNumber.
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

// InvalidArgument when an array or object sits inside `depth` others: deeper
// than kMaxCanonicalJsonDepth.
absl::Status CheckCanonicalDepth(int depth);

// InvalidArgument when the member name `name` is not valid UTF-8.
absl::Status CheckCanonicalMemberName(std::string_view name);

// Whether member name `a` sorts before `b` (UTF-16 code units); both valid
// UTF-8.
bool CanonicalNameLess(std::string_view a, std::string_view b);

// Appends `text` as a canonical JSON string; InvalidArgument when it is not
// valid UTF-8.
absl::Status AppendCanonicalString(std::string_view text, std::string* out);

// Appends `value` as a canonical JSON number; InvalidArgument when it is not
// finite.
absl::Status AppendCanonicalNumber(double value, std::string* out);

}  // namespace cachewatch::client

#endif  // CACHEWATCH_CLIENT_CANONICAL_JSON_H_
