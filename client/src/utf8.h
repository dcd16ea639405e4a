// UTF-8 helpers shared by the canonical JSON writer and the tool-order
// policy. Private to the client library.
//
// Thread-safe: pure functions.

#ifndef CACHEWATCH_CLIENT_SRC_UTF8_H_
#define CACHEWATCH_CLIENT_SRC_UTF8_H_

#include <string_view>

namespace cachewatch::client::internal {

// Returns true if `text` is well-formed UTF-8 (Unicode table 3-7): no
// overlong forms, no encoded surrogates, nothing above U+10FFFF.
bool IsValidUtf8(std::string_view text);

// Compares two well-formed UTF-8 strings as sequences of UTF-16 code units,
// the order of JavaScript's `<` on strings and of RFC 8785 key sorting. It
// differs from byte order only where a character above U+FFFF meets one in
// U+E000..U+FFFF: the former sorts first. Returns <0, 0 or >0.
int CompareUtf16(std::string_view a, std::string_view b);

}  // namespace cachewatch::client::internal

#endif  // CACHEWATCH_CLIENT_SRC_UTF8_H_
