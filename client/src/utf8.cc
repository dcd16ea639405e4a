#include "utf8.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cachewatch::client::internal {
namespace {

// The high bit of each of eight bytes: set in a byte that is not ASCII.
constexpr uint64_t kHighBits = 0x8080808080808080;

// Decodes the well-formed sequence starting at text[i].
char32_t DecodeAt(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) {
    return static_cast<char32_t>(static_cast<unsigned char>(text[i + k]));
  };
  const char32_t lead = byte(0);
  if (lead < 0x80) return lead;
  if (lead < 0xE0) return ((lead & 0x1F) << 6) | (byte(1) & 0x3F);
  if (lead < 0xF0) {
    return ((lead & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
  }
  return ((lead & 0x07) << 18) | ((byte(1) & 0x3F) << 12) |
         ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
}

// A key whose order is the order of the code point's first UTF-16 code unit:
// U+E000..U+FFFF sort after the surrogate pairs of U+10000..U+10FFFF.
char32_t Utf16SortKey(char32_t code_point) {
  return code_point >= 0xE000 && code_point <= 0xFFFF ? code_point + 0x110000
                                                      : code_point;
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    const unsigned char lead = *p;
    if (lead < 0x80) {
      ++p;
      // Eight ASCII bytes at a time while they last.
      while (end - p >= 8) {
        uint64_t eight;
        std::memcpy(&eight, p, 8);
        if ((eight & kHighBits) != 0) break;
        p += 8;
      }
      continue;
    }
    int length;
    unsigned char low = 0x80;  // Bounds of the second byte (table 3-7).
    unsigned char high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;   // Overlong.
      if (lead == 0xED) high = 0x9F;  // Surrogates.
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;   // Overlong.
      if (lead == 0xF4) high = 0x8F;  // Above U+10FFFF.
    } else {
      return false;
    }
    if (end - p < length || p[1] < low || p[1] > high) return false;
    for (int k = 2; k < length; ++k) {
      if ((p[k] & 0xC0) != 0x80) return false;
    }
    p += length;
  }
  return true;
}

int CompareUtf16(std::string_view a, std::string_view b) {
  const auto [mismatch_a, mismatch_b] =
      std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  size_t i = static_cast<size_t>(mismatch_a - a.begin());
  const bool a_ended = mismatch_a == a.end();
  const bool b_ended = mismatch_b == b.end();
  if (a_ended || b_ended) return a_ended == b_ended ? 0 : (a_ended ? -1 : 1);
  // The common prefix ends inside or before one code point that starts at the
  // same offset in both strings.
  while (i > 0 && (static_cast<unsigned char>(a[i]) & 0xC0) == 0x80) --i;
  return Utf16SortKey(DecodeAt(a, i)) < Utf16SortKey(DecodeAt(b, i)) ? -1 : 1;
}

}  // namespace cachewatch::client::internal
