#include "daemon/receiver/proxy/json_document.h"

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace cachewatch {
namespace {

using Json = nlohmann::json;

// The request body's bound, as the proxy's reader passes it.
constexpr int kDepth = 256;

Json Parse(const std::string& text) {
  return ParseJsonDocument(text, kDepth).value();
}

// Equal, and of the same type all the way down (nlohmann's == takes signed
// 1, unsigned 1 and 1.0 for equal; the readers of a body do not).
void ExpectSameValue(const Json& expected, const Json& actual,
                     const std::string& where) {
  ASSERT_EQ(expected.type(), actual.type())
      << where << ": " << expected.dump() << " against " << actual.dump();
  if (expected.is_object()) {
    ASSERT_EQ(expected.size(), actual.size()) << where;
    for (const auto& [key, value] : expected.items()) {
      ASSERT_TRUE(actual.contains(key)) << where << "." << key;
      ExpectSameValue(value, actual.at(key), where + "." + key);
    }
  } else if (expected.is_array()) {
    ASSERT_EQ(expected.size(), actual.size()) << where;
    for (size_t i = 0; i < expected.size(); ++i) {
      ExpectSameValue(expected[i], actual[i],
                      where + "[" + std::to_string(i) + "]");
    }
  } else {
    EXPECT_EQ(expected, actual) << where;
    EXPECT_EQ(expected.dump(), actual.dump()) << where;
  }
}

void ExpectParsedAsNlohmannDoes(const std::string& text) {
  ExpectSameValue(Json::parse(text), Parse(text), text);
}

TEST(JsonDocumentTest, ValuesAndTypesAreNlohmanns) {
  const std::vector<std::string> texts = {
      R"({})",
      R"([])",
      R"({"a":{"b":[1,[2,[3,{}]],[]]},"c":[]})",
      R"({"t":true,"f":false,"n":null,"s":"","e":{},"l":[]})",
      R"({"escapes":"\"\\\/\b\f\n\r\t \u00e9 \ud83d\ude00 \u0000 end"})",
      R"({"utf8":"é 😀 日本"})",
      R"({"ints":[0,1,-1,42,-42,9223372036854775807,-9223372036854775808]})",
      R"({"unsigned":[9223372036854775808,18446744073709551615]})",
      R"({"doubles":[0.0,-0.0,0.1,1.5,-2.25,1E2,1e-2,1e-400,4.9e-324]})",
      R"({"doubles":[2.2250738585072011e-308,1.7976931348623157e308]})",
      R"({"long":123456789012345678901234567890.5})",
      R"({"a":1,"a":"last one wins"})",
      " \t\r\n{\"padded\" : [ 1 , 2 ] }\n ",
      R"("a string alone")",
      R"(3)",
  };
  for (const std::string& text : texts) ExpectParsedAsNlohmannDoes(text);
}

// simdjson refuses these; nlohmann reads them, and so do we.
TEST(JsonDocumentTest, TextsOnlyNlohmannReadsAreReadAsItDoes) {
  ExpectParsedAsNlohmannDoes(R"({"a":18446744073709551616})");
  ExpectParsedAsNlohmannDoes(R"({"a":-9223372036854775809})");
  ExpectParsedAsNlohmannDoes("\xef\xbb\xbf{\"a\":1}");  // A byte order mark.
  ExpectParsedAsNlohmannDoes(std::string("{\"a\":1}\0", 8));  // A NUL after.
  EXPECT_TRUE(Parse(R"({"a":18446744073709551616})")["a"].is_number_float());
}

TEST(JsonDocumentTest, MinusZeroIsZero) {
  const Json value = Parse(R"({"a":-0})");
  EXPECT_EQ(value, Json::parse(R"({"a":-0})"));
  EXPECT_EQ(value.dump(), R"({"a":0})");
}

TEST(JsonDocumentTest, MalformedTextsThrowWhatNlohmannThrows) {
  const std::vector<std::string> texts = {
      "",
      "{",
      R"({"a":1,})",
      R"([1,2,])",
      R"({"a":01})",
      R"({"a":1.})",
      R"({"a":.5})",
      R"({"a":nul})",
      R"({"a":"\x"})",
      R"({"a":"\ud800"})",
      R"({"a":"\udc00"})",
      R"({"a":1} x)",
      std::string("{\"a\":\"x\x01y\"}"),
      std::string("{\"a\":\"x\ty\"}"),
      std::string("{\"a\":\"\xff\"}"),
      std::string("{\"a\":\"\xc0\x80\"}"),
      std::string("{\"a\":\"\xed\xa0\x80\"}"),
  };
  for (const std::string& text : texts) {
    std::string expected;
    try {
      const Json parsed = Json::parse(text);
      ADD_FAILURE() << "nlohmann reads " << text << " as " << parsed.dump();
    } catch (const Json::parse_error& error) {
      expected = error.what();
    }
    try {
      const Json parsed = Parse(text);
      ADD_FAILURE() << "read " << text << " as " << parsed.dump();
    } catch (const Json::parse_error& error) {
      EXPECT_EQ(error.what(), expected) << text;
    }
  }
  EXPECT_THROW(Parse(R"({"a":1e400})"), Json::out_of_range);
  EXPECT_THROW(Parse(R"({"a":-1e400})"), Json::out_of_range);
}

std::string NestedArrays(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

std::string NestedObjects(int depth) {
  std::string text;
  for (int i = 0; i < depth; ++i) text += "{\"a\":";
  text += "1";
  return text + std::string(depth, '}');
}

// A byte order mark sends a text to nlohmann's path.
constexpr char kByteOrderMark[] = "\xef\xbb\xbf";

// `max_depth` arrays or objects read, one more does not: on simdjson's path
// and on nlohmann's, and before anything malformed after the deepest point.
TEST(JsonDocumentTest, TheDepthIsBoundedOnBothPaths) {
  for (const auto nested : {NestedArrays, NestedObjects}) {
    for (const std::string prefix : {"", kByteOrderMark}) {
      SCOPED_TRACE(nested(2) + (prefix.empty() ? "" : " after a BOM"));
      const std::optional<Json> deepest =
          ParseJsonDocument(prefix + nested(kDepth), kDepth);
      ASSERT_TRUE(deepest.has_value());
      ExpectSameValue(Json::parse(prefix + nested(kDepth)), *deepest, "");
      EXPECT_FALSE(ParseJsonDocument(prefix + nested(kDepth + 1), kDepth));
      EXPECT_FALSE(
          ParseJsonDocument(prefix + nested(kDepth + 1) + "x", kDepth));
      EXPECT_THROW(ParseJsonDocument(prefix + nested(kDepth) + "x", kDepth),
                   Json::parse_error);
    }
  }
  EXPECT_TRUE(ParseJsonDocument("[]", 1));
  EXPECT_FALSE(ParseJsonDocument("[{}]", 1));
  EXPECT_FALSE(ParseJsonDocument(std::string(kByteOrderMark) + "[{}]", 1));
}

// Brackets inside strings, escaped quotes among them, are not nesting.
TEST(JsonDocumentTest, BracketsInStringsAreNotNesting) {
  const std::string text =
      "[\"" + std::string(300, '[') + "\\\"" + std::string(300, '{') + "\"]";
  ExpectParsedAsNlohmannDoes(text);
  const std::optional<Json> after_mark =
      ParseJsonDocument(kByteOrderMark + text, kDepth);
  ASSERT_TRUE(after_mark.has_value());
  ExpectSameValue(Json::parse(text), *after_mark, text);
}

// A request body of the size the proxy bench sends (50 tools, 200
// messages).
TEST(JsonDocumentTest, ALargeRequestBodyIsNlohmanns) {
  Json body = {{"model", "claude-sonnet-4-6"},
               {"max_tokens", 1024},
               {"temperature", 0.7},
               {"system", "You are the test agent."}};
  for (int i = 0; i < 50; ++i) {
    Json properties = Json::object();
    for (int j = 0; j < 18; ++j) {
      properties["field_" + std::to_string(j)] = {
          {"type", "string"},
          {"description", "field " + std::to_string(j) + " é\n"}};
    }
    body["tools"].push_back(
        {{"name", "tool_" + std::to_string(i)},
         {"input_schema", {{"type", "object"}, {"properties", properties}}}});
  }
  for (int i = 0; i < 200; ++i) {
    body["messages"].push_back(
        {{"role", i % 2 == 0 ? "user" : "assistant"},
         {"content", {{{"type", "text"}, {"text", std::string(600, 'q')}}}},
         {"index", i - 100}});
  }
  ExpectParsedAsNlohmannDoes(body.dump());
}

}  // namespace
}  // namespace cachewatch
