#include "cachewatch/client/canonical_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/util/status_macros.h"
#include "utf8.h"

namespace cachewatch::client {
namespace {

using Json = nlohmann::json;

// Appends `value`, finite, in ECMAScript Number::toString form (ECMA-262
// 6.1.6.1.20).
void AppendFiniteNumber(double value, std::string* out) {
  if (value == 0) {  // Both +0 and -0.
    out->push_back('0');
    return;
  }
  // Shortest round-trip digits as "[-]d[.ddd]e±x", then laid out again.
  char buffer[32];
  const std::to_chars_result result = std::to_chars(
      buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  const std::string_view scientific(buffer, result.ptr - buffer);
  const size_t e = scientific.find('e');
  std::string_view mantissa = scientific.substr(0, e);
  if (mantissa.front() == '-') {
    out->push_back('-');
    mantissa.remove_prefix(1);
  }
  char digit_buffer[20];  // The k significant digits (at most 17).
  int k = 0;
  for (const char c : mantissa) {
    if (c != '.') digit_buffer[k++] = c;
  }
  const std::string_view digits(digit_buffer, k);
  // value = 0.digits × 10^n, the exponent written as [+-]ddd.
  const std::string_view exponent = scientific.substr(e + 2);
  int magnitude = 0;
  std::from_chars(exponent.data(), exponent.data() + exponent.size(),
                  magnitude);
  const int n = (scientific[e + 1] == '-' ? -magnitude : magnitude) + 1;
  if (k <= n && n <= 21) {
    out->append(digits);
    out->append(n - k, '0');
  } else if (0 < n && n <= 21) {
    out->append(digits.substr(0, n));
    out->push_back('.');
    out->append(digits.substr(n));
  } else if (-6 < n && n <= 0) {
    out->append("0.");
    out->append(-n, '0');
    out->append(digits);
  } else {
    out->push_back(digits[0]);
    if (k > 1) {
      out->push_back('.');
      out->append(digits.substr(1));
    }
    out->push_back('e');
    out->push_back(n - 1 < 0 ? '-' : '+');
    out->append(std::to_string(std::abs(n - 1)));
  }
}

// Whether any of the eight bytes at `p` is escaped in a JSON string: a
// control character (below 0x20), '"' or '\\'. SWAR: has_byte_below(x, n)
// is exact for n <= 128 ("Determine if a word has a byte less than n", Bit
// Twiddling Hacks), and a byte equal to b is a zero byte of x ^ bb...b.
bool HasEscapedByte(const char* p) {
  constexpr uint64_t kOnes = 0x0101010101010101;
  constexpr uint64_t kHighBits = 0x8080808080808080;
  uint64_t x;
  std::memcpy(&x, p, 8);
  auto has_byte_below = [](uint64_t word, uint64_t n) {
    return ((word - kOnes * n) & ~word & kHighBits) != 0;
  };
  return has_byte_below(x, 0x20) || has_byte_below(x ^ (kOnes * '"'), 1) ||
         has_byte_below(x ^ (kOnes * '\\'), 1);
}

// Appends the canonical form of `value`, which sits inside `depth` arrays or
// objects.
absl::Status AppendValue(const Json& value, int depth, std::string* out) {
  if (value.is_structured()) {
    CACHEWATCH_RETURN_IF_ERROR(CheckCanonicalDepth(depth));
  }
  switch (value.type()) {
    case Json::value_t::null:
      out->append("null");
      return absl::OkStatus();
    case Json::value_t::boolean:
      out->append(value.get<bool>() ? "true" : "false");
      return absl::OkStatus();
    case Json::value_t::number_integer:
      AppendFiniteNumber(static_cast<double>(value.get<int64_t>()), out);
      return absl::OkStatus();
    case Json::value_t::number_unsigned:
      AppendFiniteNumber(static_cast<double>(value.get<uint64_t>()), out);
      return absl::OkStatus();
    case Json::value_t::number_float:
      return AppendCanonicalNumber(value.get<double>(), out);
    case Json::value_t::string:
      return AppendCanonicalString(value.get_ref<const Json::string_t&>(), out);
    case Json::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const Json& element : value) {
        if (!first) out->push_back(',');
        first = false;
        CACHEWATCH_RETURN_IF_ERROR(AppendValue(element, depth + 1, out));
      }
      out->push_back(']');
      return absl::OkStatus();
    }
    case Json::value_t::object: {
      const auto& object = value.get_ref<const Json::object_t&>();
      std::vector<const Json::object_t::value_type*> members;
      members.reserve(object.size());
      for (const auto& member : object) {
        CACHEWATCH_RETURN_IF_ERROR(CheckCanonicalMemberName(member.first));
        members.push_back(&member);
      }
      std::sort(members.begin(), members.end(), [](auto* a, auto* b) {
        return CanonicalNameLess(a->first, b->first);
      });
      out->push_back('{');
      bool first = true;
      for (const auto* member : members) {
        if (!first) out->push_back(',');
        first = false;
        CACHEWATCH_RETURN_IF_ERROR(AppendCanonicalString(member->first, out));
        out->push_back(':');
        CACHEWATCH_RETURN_IF_ERROR(AppendValue(member->second, depth + 1, out));
      }
      out->push_back('}');
      return absl::OkStatus();
    }
    case Json::value_t::binary:
      return absl::InvalidArgumentError("binary values have no JSON form");
    case Json::value_t::discarded:
      break;
  }
  return absl::InvalidArgumentError("discarded value has no JSON form");
}

}  // namespace

absl::StatusOr<std::string> CanonicalizeJson(std::string_view json_text) {
  if (json_text.size() > kMaxCanonicalJsonBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON text is ", json_text.size(), " bytes, more than ",
                     kMaxCanonicalJsonBytes));
  }
  if (json_text.starts_with("\xEF\xBB\xBF")) {
    return absl::InvalidArgumentError(
        "JSON text starts with a byte-order mark");
  }
  // The parser keeps the last of repeated member names; count each object's
  // names as they are read and compare with the object's size at its end.
  std::vector<size_t> names_read;
  bool repeated_name = false;
  const Json::parser_callback_t count_names =
      [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
        switch (event) {
          case Json::parse_event_t::object_start:
            names_read.push_back(0);
            break;
          case Json::parse_event_t::key:
            ++names_read.back();
            break;
          case Json::parse_event_t::object_end:
            repeated_name |= names_read.back() != parsed.size();
            names_read.pop_back();
            break;
          default:
            break;
        }
        return true;
      };
  const Json value =
      Json::parse(json_text, count_names, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return absl::InvalidArgumentError(
        "not valid JSON (syntax, a number out of range, or invalid Unicode)");
  }
  if (repeated_name) {
    return absl::InvalidArgumentError("JSON object has a duplicate key");
  }
  return CanonicalizeJsonValue(value);
}

absl::StatusOr<std::string> CanonicalizeJsonValue(const nlohmann::json& value) {
  std::string out;
  CACHEWATCH_RETURN_IF_ERROR(AppendValue(value, 0, &out));
  return out;
}

absl::Status CheckCanonicalDepth(int depth) {
  if (depth < kMaxCanonicalJsonDepth) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "JSON nesting is deeper than ", kMaxCanonicalJsonDepth, " levels"));
}

absl::Status CheckCanonicalMemberName(std::string_view name) {
  if (internal::IsValidUtf8(name)) return absl::OkStatus();
  return absl::InvalidArgumentError("JSON member name is not valid UTF-8");
}

bool CanonicalNameLess(std::string_view a, std::string_view b) {
  return internal::CompareUtf16(a, b) < 0;
}

absl::Status AppendCanonicalString(std::string_view text, std::string* out) {
  if (!internal::IsValidUtf8(text)) {
    return absl::InvalidArgumentError("JSON string is not valid UTF-8");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t copied = 0;  // text[0, copied) is in `out`.
  for (size_t i = 0; i < text.size(); ++i) {
    // Eight bytes at a time while none of them is escaped.
    while (text.size() - i >= 8 && !HasEscapedByte(text.data() + i)) i += 8;
    if (i == text.size()) break;
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(text.data() + copied, i - copied);
    copied = i + 1;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 0xF]);
    }
  }
  out->append(text.data() + copied, text.size() - copied);
  out->push_back('"');
  return absl::OkStatus();
}

absl::Status AppendCanonicalNumber(double value, std::string* out) {
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError("JSON number is not finite");
  }
  AppendFiniteNumber(value, out);
  return absl::OkStatus();
}

}  // namespace cachewatch::client
