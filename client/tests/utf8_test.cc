#include "utf8.h"

#include <string>
#include <string_view>

#include "gtest/gtest.h"

namespace cachewatch::client::internal {
namespace {

TEST(Utf8Test, IsValidUtf8) {
  static constexpr struct {
    std::string_view text;
    bool valid;
  } kCases[] = {
      {"", true},
      {"plain ASCII \x7f", true},
      {"\xC3\xA9", true},                   // U+00E9
      {"\xEF\xBF\xBF", true},               // U+FFFF
      {"\xF0\x9F\x98\x80", true},           // U+1F600
      {"\xF4\x8F\xBF\xBF", true},           // U+10FFFF
      {"\x80", false},                      // Lone continuation byte.
      {"\xFF", false},                      // Never in UTF-8.
      {"\xC3", false},                      // Truncated.
      {"\xE2\x82", false},                  // Truncated.
      {"\xE2\x28\xA1", false},              // Bad continuation.
      {"\xC0\xAF", false},                  // Overlong '/'.
      {"\xE0\x80\xAF", false},              // Overlong '/'.
      {"\xF0\x80\x80\xAF", false},          // Overlong '/'.
      {"\xED\xA0\x80", false},              // Surrogate U+D800.
      {"\xED\xBF\xBF", false},              // Surrogate U+DFFF.
      {"\xF4\x90\x80\x80", false},          // U+110000.
      {"ok \xF0\x9F\x98\x80 \xC3", false},  // Valid, then truncated.
  };
  for (const auto& c : kCases) {
    EXPECT_EQ(IsValidUtf8(c.text), c.valid) << "text: " << c.text;
  }
}

// Within and after runs of ASCII long enough to be read eight bytes at a
// time: a bad or a good sequence at every offset.
TEST(Utf8Test, SequencesAtEveryOffsetOfALongAsciiText) {
  for (size_t offset = 0; offset <= 40; ++offset) {
    std::string text(40, 'a');
    EXPECT_TRUE(IsValidUtf8(text));
    EXPECT_FALSE(IsValidUtf8(std::string(text).insert(offset, "\x80")))
        << offset;
    EXPECT_FALSE(IsValidUtf8(std::string(text).insert(offset, "\xC3")))
        << offset;
    EXPECT_FALSE(IsValidUtf8(std::string(text).insert(offset, "\xED\xA0\x80")))
        << offset;
    EXPECT_TRUE(
        IsValidUtf8(std::string(text).insert(offset, "\xF0\x9F\x98\x80")))
        << offset;
  }
}

TEST(Utf8Test, CompareUtf16OrdersByCodeUnits) {
  static constexpr struct {
    std::string_view a;
    std::string_view b;
    int sign;
  } kCases[] = {
      {"", "", 0},
      {"a", "a", 0},
      {"", "a", -1},
      {"a", "b", -1},
      {"A", "a", -1},
      {"ab", "a", 1},
      {"read", "read_file", -1},
      {"read-file", "read_file", -1},
      {"\xC3\xA9", "z", 1},                      // U+00E9 > 'z'.
      {"\xED\x9F\xBF", "\xF0\x90\x80\x80", -1},  // U+D7FF < U+10000.
      // UTF-8 byte order says the opposite for these two:
      {"\xEE\x80\x80", "\xF0\x9F\x98\x80", 1},  // U+E000 > U+1F600.
      {"\xEF\xBF\xBF", "\xF0\x90\x80\x80", 1},  // U+FFFF > U+10000.
      {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x81", -1},
      {"\xF0\x90\x80\x80"
       "a",
       "\xF0\x90\x80\x80"
       "b",
       -1},
  };
  for (const auto& c : kCases) {
    const int result = CompareUtf16(c.a, c.b);
    EXPECT_EQ((result > 0) - (result < 0), c.sign) << c.a << " vs " << c.b;
    const int reverse = CompareUtf16(c.b, c.a);
    EXPECT_EQ((reverse > 0) - (reverse < 0), -c.sign) << c.b << " vs " << c.a;
  }
}

}  // namespace
}  // namespace cachewatch::client::internal
