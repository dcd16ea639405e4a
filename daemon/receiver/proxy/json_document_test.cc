#include "daemon/receiver/proxy/json_document.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace cachewatch {
namespace {

using Json = nlohmann::json;
namespace dom = simdjson::dom;

// The request body's bound, as the proxy's reader passes it.
constexpr int kDepth = 256;

// `value` as nlohmann's value, a repeated member's last value kept, every
// number a double: what the readers and canonical JSON make of it.
Json ToJson(dom::element value) {
  switch (value.type()) {
    case dom::element_type::OBJECT: {
      Json object = Json::object();
      for (const dom::key_value_pair field : ObjectOf(value)) {
        object[std::string(field.key)] = ToJson(field.value);
      }
      return object;
    }
    case dom::element_type::ARRAY: {
      Json array = Json::array();
      for (const dom::element element : ArrayOf(value)) {
        array.push_back(ToJson(element));
      }
      return array;
    }
    case dom::element_type::STRING:
      return std::string(value.get_string().value_unsafe());
    case dom::element_type::INT64:
      return static_cast<double>(value.get_int64().value_unsafe());
    case dom::element_type::UINT64:
      return static_cast<double>(value.get_uint64().value_unsafe());
    case dom::element_type::DOUBLE:
      return value.get_double().value_unsafe();
    case dom::element_type::BOOL:
      return value.get_bool().value_unsafe();
    case dom::element_type::NULL_VALUE:
      return nullptr;
  }
  return nullptr;
}

// nlohmann's value with every number a double.
Json NumbersAsDoubles(const Json& value) {
  if (value.is_number()) return value.get<double>();
  if (value.is_structured()) {
    Json copy = value;
    for (auto& [key, element] : copy.items()) {
      element = NumbersAsDoubles(element);
    }
    return copy;
  }
  return value;
}

void ExpectParsedAsNlohmannDoes(const std::string& text) {
  const absl::StatusOr<JsonDocument> document =
      JsonDocument::Parse(text, kDepth);
  ASSERT_TRUE(document.ok()) << text << ": " << document.status();
  const Json expected = NumbersAsDoubles(Json::parse(text));
  const Json actual = ToJson(document->root());
  EXPECT_EQ(expected, actual) << text;
  EXPECT_EQ(expected.dump(), actual.dump()) << text;
}

TEST(JsonDocumentTest, ValuesAreNlohmanns) {
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
  // nlohmann's text ends at the NUL: what follows does not nest it.
  ExpectParsedAsNlohmannDoes(std::string("[1]\0", 4) +
                             std::string(kDepth + 1, '['));
  const absl::StatusOr<JsonDocument> big =
      JsonDocument::Parse(R"({"a":18446744073709551616})", kDepth);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(LastMember(big->root(), "a")->get_double().value_unsafe(),
            18446744073709551616.0);
}

// A repeated name's last value is the one readers see.
TEST(JsonDocumentTest, LastMemberIsTheLastOfARepeatedName) {
  const absl::StatusOr<JsonDocument> document =
      JsonDocument::Parse(R"({"a":1,"b":2,"a":"last","c":null})", kDepth);
  ASSERT_TRUE(document.ok());
  EXPECT_EQ(LastMember(document->root(), "a")->get_string().value_unsafe(),
            "last");
  EXPECT_TRUE(LastMember(document->root(), "c")->is_null());
  EXPECT_FALSE(LastMember(document->root(), "d").has_value());
  const absl::StatusOr<JsonDocument> array = JsonDocument::Parse("[1]", 1);
  ASSERT_TRUE(array.ok());
  EXPECT_FALSE(LastMember(array->root(), "a").has_value());
}

TEST(JsonDocumentTest, MalformedTextsFailAtNlohmannsByte) {
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
    size_t byte = 0;
    try {
      const Json parsed = Json::parse(text);
      ADD_FAILURE() << "nlohmann reads " << text << " as " << parsed.dump();
    } catch (const Json::parse_error& error) {
      byte = error.byte;
    }
    const absl::StatusOr<JsonDocument> document =
        JsonDocument::Parse(text, kDepth);
    EXPECT_EQ(document.status(),
              absl::InvalidArgumentError("malformed JSON at byte " +
                                         std::to_string(byte)))
        << text;
  }
  for (const std::string text : {R"({"a":1e400})", R"({"a":-1e400})"}) {
    EXPECT_EQ(
        JsonDocument::Parse(text, kDepth).status(),
        absl::InvalidArgumentError("malformed JSON: a number is out of range"))
        << text;
  }
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
  const absl::Status too_deep = absl::InvalidArgumentError(
      "nests deeper than " + std::to_string(kDepth) + " arrays or objects");
  for (const auto nested : {NestedArrays, NestedObjects}) {
    for (const std::string prefix : {"", kByteOrderMark}) {
      SCOPED_TRACE(nested(2) + (prefix.empty() ? "" : " after a BOM"));
      ExpectParsedAsNlohmannDoes(prefix + nested(kDepth));
      EXPECT_EQ(
          JsonDocument::Parse(prefix + nested(kDepth + 1), kDepth).status(),
          too_deep);
      EXPECT_EQ(JsonDocument::Parse(prefix + nested(kDepth + 1) + "x", kDepth)
                    .status(),
                too_deep);
      EXPECT_NE(
          JsonDocument::Parse(prefix + nested(kDepth) + "x", kDepth).status(),
          too_deep);
    }
  }
  EXPECT_TRUE(JsonDocument::Parse("[]", 1).ok());
  EXPECT_FALSE(JsonDocument::Parse("[{}]", 1).ok());
  EXPECT_FALSE(
      JsonDocument::Parse(std::string(kByteOrderMark) + "[{}]", 1).ok());
}

// Brackets inside strings, escaped quotes among them, are not nesting.
TEST(JsonDocumentTest, BracketsInStringsAreNotNesting) {
  const std::string text =
      "[\"" + std::string(300, '[') + "\\\"" + std::string(300, '{') + "\"]";
  ExpectParsedAsNlohmannDoes(text);
  ExpectParsedAsNlohmannDoes(kByteOrderMark + text);
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

// The sanitizers reserve far more address space than any limit below.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Bytes of address space the process has mapped, from /proc/self/statm.
size_t MappedBytes() {
  FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return 0;
  size_t pages = 0;
  const int read = std::fscanf(statm, "%zu", &pages);
  std::fclose(statm);
  return read == 1 ? pages * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// With too little memory left for simdjson's document, the answer is
// ResourceExhausted, not nlohmann's fallback (which ends in an uncaught
// std::bad_alloc). In a child process, under an address-space limit.
TEST(JsonDocumentTest, NoMemoryForTheDocumentIsResourceExhausted) {
  if (kSanitized)
    GTEST_SKIP() << "address-space limits and sanitizers mix badly";
  std::string text = "[";
  for (int i = 0; i < (16 << 20); ++i) text += "1,";
  text += "1]";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Room for a few small allocations, not for the document's tape.
    const rlim_t limit = MappedBytes() + (8 << 20);
    const rlimit bound{limit, limit};
    if (setrlimit(RLIMIT_AS, &bound) != 0) _exit(2);
    const absl::StatusOr<JsonDocument> document =
        JsonDocument::Parse(text, kDepth);
    _exit(absl::IsResourceExhausted(document.status()) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status))
      << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace cachewatch
