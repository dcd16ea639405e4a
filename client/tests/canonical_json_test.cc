#include "cachewatch/client/canonical_json.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace cachewatch::client {
namespace {

using Json = nlohmann::json;

std::string Nested(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// Expects `status` to be an InvalidArgument error mentioning `fragment`.
void ExpectInvalid(const absl::StatusOr<std::string>& result,
                   std::string_view fragment) {
  ASSERT_FALSE(result.ok()) << "accepted as " << *result;
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(result.status().message()).find(fragment),
            std::string_view::npos)
      << result.status();
}

TEST(CanonicalJsonTest, FormatsNumbersAsEcmaScript) {
  static const struct {
    double value;
    std::string_view expected;
  } kCases[] = {
      {0.0, "0"},
      {-0.0, "0"},
      {1.0, "1"},
      {-1.0, "-1"},
      {0.5, "0.5"},
      {1234.5678, "1234.5678"},
      {1e20, "100000000000000000000"},
      {1e21, "1e+21"},
      {1.5e21, "1.5e+21"},
      {123456789012345680000.0, "123456789012345680000"},
      {1e-6, "0.000001"},
      {1.5e-6, "0.0000015"},
      {1e-7, "1e-7"},
      {-1.25e-7, "-1.25e-7"},
      {1.23e-18, "1.23e-18"},
      {1e100, "1e+100"},
      {0.1 + 0.2, "0.30000000000000004"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {9007199254740992.0, "9007199254740992"},
  };
  for (const auto& c : kCases) {
    const absl::StatusOr<std::string> canonical =
        CanonicalizeJsonValue(Json(c.value));
    ASSERT_TRUE(canonical.ok()) << canonical.status();
    EXPECT_EQ(*canonical, c.expected) << "value " << c.value;
  }
}

TEST(CanonicalJsonTest, ReadsIntegersAsDoubles) {
  EXPECT_EQ(*CanonicalizeJsonValue(Json(int64_t{9007199254740993})),
            "9007199254740992");
  EXPECT_EQ(*CanonicalizeJsonValue(Json(std::numeric_limits<uint64_t>::max())),
            "18446744073709552000");
  EXPECT_EQ(*CanonicalizeJsonValue(Json(std::numeric_limits<int64_t>::min())),
            "-9223372036854776000");
  EXPECT_EQ(*CanonicalizeJson("-0"), "0");
}

TEST(CanonicalJsonTest, SortsKeysByUtf16CodeUnits) {
  // U+1F600 (F0 9F 98 80) sorts before U+E000 (EE 80 80) in UTF-16, after it
  // in UTF-8 byte order.
  EXPECT_EQ(*CanonicalizeJson("{\"\xEE\x80\x80\":1,\"\xF0\x9F\x98\x80\":2,"
                              "\"z\":3}"),
            "{\"z\":3,\"\xF0\x9F\x98\x80\":2,\"\xEE\x80\x80\":1}");
}

TEST(CanonicalJsonTest, EscapesMinimally) {
  EXPECT_EQ(
      *CanonicalizeJsonValue(Json("q\" b\\ /\b\f\n\r\t\x01\x1f\x7f \xC3\xA9")),
      "\"q\\\" b\\\\ /\\b\\f\\n\\r\\t\\u0001\\u001f\x7f \xC3\xA9\"");
  EXPECT_EQ(*CanonicalizeJsonValue(Json(std::string("a\0b", 3))),
            "\"a\\u0000b\"");
}

// Characters to escape at every offset of a string long enough to be
// copied in runs and scanned eight bytes at a time: each written escaped,
// the rest as it is.
TEST(CanonicalJsonTest, EscapesAtEveryOffsetOfALongString) {
  const std::string plain = "The quick brown fox \xC3\xA9 jumps";
  for (size_t offset = 0; offset <= plain.size(); ++offset) {
    const bool inside_e_acute =
        offset < plain.size() && (plain[offset] & 0xC0) == 0x80;
    if (inside_e_acute) continue;
    for (const auto& [raw, escaped] :
         std::vector<std::pair<std::string, std::string>>{
             {"\"", "\\\""},
             {"\\", "\\\\"},
             {"\n", "\\n"},
             {std::string(1, '\0'), "\\u0000"},
             {"\x1f\"", "\\u001f\\\""},
             // The neighbours of '"', '\\' and 0x1f, written as they are.
             {" !#[]\x7f", " !#[]\x7f"}}) {
      std::string text = plain;
      text.insert(offset, raw);
      std::string expected = plain;
      expected.insert(offset, escaped);
      EXPECT_EQ(*CanonicalizeJsonValue(Json(text)), "\"" + expected + "\"")
          << "offset " << offset;
    }
  }
}

TEST(CanonicalJsonTest, TextAndValueAgree) {
  const std::string_view text =
      R"({"b":[1.50,"x",null],"a":{"d":false,"c":1e3}})";
  const Json value = Json::parse(text);
  EXPECT_EQ(*CanonicalizeJson(text), *CanonicalizeJsonValue(value));
  EXPECT_EQ(*CanonicalizeJson(text),
            R"({"a":{"c":1000,"d":false},"b":[1.5,"x",null]})");
}

TEST(CanonicalJsonTest, RejectsMalformedText) {
  for (std::string_view text :
       {"", "{", "[1,]", "{'a':1}", "{a:1}", "01", "NaN", "1 2", "\"abc",
        "{\"a\" 1}", "[1e400]"}) {
    ExpectInvalid(CanonicalizeJson(text), "not valid JSON");
  }
  ExpectInvalid(CanonicalizeJson("\xEF\xBB\xBF{}"), "byte-order mark");
}

TEST(CanonicalJsonTest, RejectsDuplicateKeys) {
  ExpectInvalid(CanonicalizeJson(R"({"a":1,"a":2})"), "duplicate key");
  ExpectInvalid(CanonicalizeJson(R"({"a":1,"\u0061":2})"), "duplicate key");
  ExpectInvalid(CanonicalizeJson(R"([{"x":{"b":1,"b":1}}])"), "duplicate key");
  // The same name in different objects is fine.
  EXPECT_TRUE(CanonicalizeJson(R"({"a":{"a":{"a":1}},"b":{"a":2}})").ok());
}

TEST(CanonicalJsonTest, LimitsDepth) {
  EXPECT_TRUE(CanonicalizeJson(Nested(kMaxCanonicalJsonDepth)).ok());
  ExpectInvalid(CanonicalizeJson(Nested(kMaxCanonicalJsonDepth + 1)),
                "deeper than 128");
  // As deep as the size limit allows: rejected, without exhausting the stack.
  ExpectInvalid(CanonicalizeJson(Nested(kMaxCanonicalJsonBytes / 2)),
                "deeper than 128");

  Json deep = Json::array();
  for (int i = 0; i < kMaxCanonicalJsonDepth; ++i) deep = Json::array({deep});
  ExpectInvalid(CanonicalizeJsonValue(deep), "deeper than 128");
}

TEST(CanonicalJsonTest, LimitsSize) {
  const std::string largest =
      "\"" + std::string(kMaxCanonicalJsonBytes - 2, 'a') + "\"";
  EXPECT_TRUE(CanonicalizeJson(largest).ok());
  ExpectInvalid(CanonicalizeJson(largest + " "), "more than 1048576");
}

TEST(CanonicalJsonTest, RejectsInvalidUnicode) {
  ExpectInvalid(CanonicalizeJson("\"\xC0\xAF\""), "not valid JSON");
  ExpectInvalid(CanonicalizeJson("\"\xED\xA0\x80\""), "not valid JSON");
  ExpectInvalid(CanonicalizeJson(R"("\ud800")"), "not valid JSON");
  ExpectInvalid(CanonicalizeJson(R"("\udc00\ud800")"), "not valid JSON");
  ExpectInvalid(CanonicalizeJsonValue(Json("\xFF")), "not valid UTF-8");
  ExpectInvalid(CanonicalizeJsonValue(Json({{"\xC3", 1}})), "not valid UTF-8");
}

TEST(CanonicalJsonTest, RejectsValuesWithoutJsonForm) {
  ExpectInvalid(CanonicalizeJsonValue(Json(std::nan(""))), "not finite");
  ExpectInvalid(CanonicalizeJsonValue(
                    Json::array({std::numeric_limits<double>::infinity()})),
                "not finite");
  ExpectInvalid(CanonicalizeJsonValue(Json::binary({1, 2})), "binary");
  ExpectInvalid(CanonicalizeJsonValue(Json(Json::value_t::discarded)),
                "discarded");
}

// The parts a writer over another representation uses: the same rules and
// errors as the whole.
TEST(CanonicalJsonTest, PartsFollowTheRulesOfTheWhole) {
  EXPECT_TRUE(CheckCanonicalDepth(kMaxCanonicalJsonDepth - 1).ok());
  ExpectInvalid(
      absl::StatusOr<std::string>(CheckCanonicalDepth(kMaxCanonicalJsonDepth)),
      "deeper than 128");
  EXPECT_TRUE(CanonicalNameLess("\xf0\x9f\x98\x80", "\xee\x80\x80"));
  EXPECT_FALSE(CanonicalNameLess("\xee\x80\x80", "\xf0\x9f\x98\x80"));
  EXPECT_FALSE(CanonicalNameLess("a", "a"));
  EXPECT_TRUE(CheckCanonicalMemberName("\xc3\xa9").ok());
  EXPECT_FALSE(CheckCanonicalMemberName("\xff").ok());

  std::string out;
  EXPECT_TRUE(AppendCanonicalString("a\"\n", &out).ok());
  EXPECT_TRUE(AppendCanonicalNumber(1e21, &out).ok());
  EXPECT_EQ(out, "\"a\\\"\\n\"1e+21");
  EXPECT_FALSE(AppendCanonicalString("\xed\xa0\x80", &out).ok());
  EXPECT_FALSE(
      AppendCanonicalNumber(std::numeric_limits<double>::infinity(), &out)
          .ok());
}

}  // namespace
}  // namespace cachewatch::client
