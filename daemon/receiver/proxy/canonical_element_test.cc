#include "daemon/receiver/proxy/canonical_element.h"

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cachewatch/client/canonical_json.h"
#include "daemon/receiver/proxy/json_document.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace cachewatch {
namespace {

using Json = nlohmann::json;

constexpr int kBodyDepth = 256;

JsonDocument MustParse(const std::string& text) {
  absl::StatusOr<JsonDocument> document = JsonDocument::Parse(text, kBodyDepth);
  EXPECT_TRUE(document.ok()) << text << ": " << document.status();
  return *std::move(document);
}

// What the client library writes for nlohmann's reading of `text`.
absl::StatusOr<std::string> ClientCanonical(const std::string& text) {
  return client::CanonicalizeJsonValue(Json::parse(text));
}

// `canonical`'s text, or its error's.
std::string TextOf(const absl::StatusOr<std::string>& canonical) {
  return canonical.ok() ? *canonical
                        : "error: " + canonical.status().ToString();
}

void ExpectWrittenAsTheClientWrites(const std::string& text) {
  const JsonDocument document = MustParse(text);
  EXPECT_EQ(TextOf(CanonicalElement(document.root())),
            TextOf(ClientCanonical(text)))
      << text;
}

TEST(CanonicalElementTest, SharedVectorsAreWrittenAsTheClientWrites) {
  std::ifstream in(std::string(CACHEWATCH_VECTORS_DIR) + "/canonical_json.json",
                   std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const Json vectors = Json::parse(text.str());
  ASSERT_GT(vectors.size(), 50u);
  for (const Json& vector : vectors) {
    SCOPED_TRACE(vector.at("name").get<std::string>());
    const std::string input = vector.at("input");
    const JsonDocument document = MustParse(input);
    EXPECT_EQ(TextOf(CanonicalElement(document.root())),
              vector.at("canonical").get<std::string>());
    ExpectWrittenAsTheClientWrites(input);
  }
}

TEST(CanonicalElementTest, ARepeatedNameKeepsItsLastValue) {
  const JsonDocument document =
      MustParse(R"({"b":1,"a":[1],"b":{"c":2,"c":3},"a":"last"})");
  EXPECT_EQ(*CanonicalElement(document.root()), R"({"a":"last","b":{"c":3}})");
  ExpectWrittenAsTheClientWrites(
      R"({"b":1,"a":[1],"b":{"c":2,"c":3},"a":"last"})");
}

std::string Nested(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(CanonicalElementTest, TheDepthLimitIsTheClients) {
  const int limit = client::kMaxCanonicalJsonDepth;
  EXPECT_TRUE(CanonicalElement(MustParse(Nested(limit)).root()).ok());
  const absl::StatusOr<std::string> too_deep =
      CanonicalElement(MustParse(Nested(limit + 1)).root());
  EXPECT_EQ(too_deep.status(), ClientCanonical(Nested(limit + 1)).status());
  EXPECT_EQ(too_deep.status().code(), absl::StatusCode::kInvalidArgument);

  // Inside a put-together object, a member's value starts one deeper.
  const JsonDocument fits = MustParse(Nested(limit - 1));
  CanonicalObject object;
  object.Set("a", fits.root());
  EXPECT_TRUE(object.ToCanonical().ok());
  const JsonDocument deeper = MustParse(Nested(limit));
  object.Set("a", deeper.root());
  EXPECT_EQ(object.ToCanonical().status(), too_deep.status());
}

TEST(CanonicalElementTest,
     ExceptLeavesAMemberOutOfAnObjectOrTheObjectsInAnArray) {
  const JsonDocument object = MustParse(
      R"({"cache_control":1,"a":{"cache_control":2},"cache_control":3})");
  EXPECT_EQ(*CanonicalElement(object.root(), "cache_control"),
            R"({"a":{"cache_control":2}})");
  const JsonDocument array = MustParse(
      R"([{"x":1,"cache_control":2},[{"cache_control":3}],"cache_control"])");
  EXPECT_EQ(*CanonicalElement(array.root(), "cache_control"),
            R"([{"x":1},[{"cache_control":3}],"cache_control"])");
  EXPECT_EQ(
      *CanonicalElement(array.root()),
      R"([{"cache_control":2,"x":1},[{"cache_control":3}],"cache_control"])");
}

TEST(CanonicalElementTest, AnObjectPutTogetherIsWrittenAsNlohmannBuildsIt) {
  const std::string part_text =
      R"({"type":"text","role":"user","text":"hi","cache_control":{},"😀":1,"":2})";
  const JsonDocument part = MustParse(part_text);
  CanonicalObject block;
  block.SetMembersOf(part.root(), "cache_control");
  block.SetString("role", "assistant");
  block.SetCanonical("n", std::string("[1,2]"));

  Json expected = Json::parse(part_text);
  expected.erase("cache_control");
  expected["role"] = "assistant";
  expected["n"] = Json::array({1, 2});
  EXPECT_EQ(TextOf(block.ToCanonical()),
            TextOf(client::CanonicalizeJsonValue(expected)));

  EXPECT_EQ(block.Get("text")->get_string().value_unsafe(), "hi");
  EXPECT_FALSE(block.Get("role").has_value());  // A string of its own.
  EXPECT_FALSE(block.Get("cache_control").has_value());
  block.Remove("text");
  expected.erase("text");
  EXPECT_FALSE(block.Get("text").has_value());
  EXPECT_EQ(TextOf(block.ToCanonical()),
            TextOf(client::CanonicalizeJsonValue(expected)));

  // A member set without `except` in the objects of its array.
  const JsonDocument content =
      MustParse(R"([{"cache_control":1,"t":2},{"t":3}])");
  block.SetWithout("content", content.root(), "cache_control");
  expected["content"] = Json::parse(R"([{"t":2},{"t":3}])");
  EXPECT_EQ(TextOf(block.ToCanonical()),
            TextOf(client::CanonicalizeJsonValue(expected)));
}

TEST(CanonicalElementTest, AnErrorSetAsAMemberIsReturnedInMemberOrder) {
  const JsonDocument deep = MustParse(Nested(client::kMaxCanonicalJsonDepth));
  CanonicalObject object;
  object.SetCanonical("b", absl::InvalidArgumentError("b is bad"));
  EXPECT_EQ(object.ToCanonical().status(),
            absl::InvalidArgumentError("b is bad"));
  object.Set("a", deep.root());  // Written first: its error comes first.
  EXPECT_EQ(object.ToCanonical().status(),
            client::CheckCanonicalDepth(client::kMaxCanonicalJsonDepth));
}

// Random texts with repeated names, names that sort differently in UTF-16
// and UTF-8, every kind of number and escapes: both writers agree.
class RandomText {
 public:
  explicit RandomText(uint32_t seed) : random_(seed) {}

  std::string Value(int depth) {
    switch (Pick(depth < 6 ? 7 : 5)) {
      case 0:
        return Pick(2) ? "true" : "false";
      case 1:
        return "null";
      case 2:
        return Number();
      case 3:
      case 4:
        return String();
      case 5: {
        std::string text = "[";
        for (int n = Pick(4), i = 0; i < n; ++i) {
          text += (i ? "," : "") + Value(depth + 1);
        }
        return text + "]";
      }
      default: {
        std::string text = "{";
        for (int n = Pick(6), i = 0; i < n; ++i) {
          text += (i ? "," : "") + Name() + ":" + Value(depth + 1);
        }
        return text + "}";
      }
    }
  }

 private:
  int Pick(int n) {
    return std::uniform_int_distribution<int>(0, n - 1)(random_);
  }

  std::string Number() {
    static const std::vector<std::string> kNumbers = {"0",
                                                      "-0",
                                                      "-0.0",
                                                      "1",
                                                      "-1",
                                                      "1.5",
                                                      "1e21",
                                                      "1E-7",
                                                      "123456789.125",
                                                      "9007199254740993",
                                                      "9223372036854775807",
                                                      "-9223372036854775808",
                                                      "18446744073709551615",
                                                      "18446744073709551616",
                                                      "0.1",
                                                      "5e-324",
                                                      "1.7976931348623157e308",
                                                      "-3.25e-5",
                                                      "100000000000000000000"};
    return kNumbers[Pick(static_cast<int>(kNumbers.size()))];
  }

  std::string String() {
    static const std::vector<std::string> kStrings = {
        R"("")",
        R"("plain")",
        R"("q\"b\\s\/\n\t\b\f\r\u0001\u001f")",
        "\"h\xc3\xa9\xee\x80\x80\xf0\x9f\x98\x80\"",
        R"("\ud83d\ude00\u2028")",
        R"("\u007f\u0000x")",
        "\"a long enough string to take the 8-byte path\""};
    return kStrings[Pick(static_cast<int>(kStrings.size()))];
  }

  std::string Name() {
    static const std::vector<std::string> kNames = {R"("a")",
                                                    R"("b")",
                                                    R"("")",
                                                    R"("A")",
                                                    R"("aa")",
                                                    R"("\ue000")",
                                                    R"("\ud83d\ude00")",
                                                    "\"\xee\x80\x80\"",
                                                    R"("cache_control")",
                                                    R"("a\u0000")",
                                                    R"("\u00e9")"};
    return kNames[Pick(static_cast<int>(kNames.size()))];
  }

  std::mt19937 random_;
};

TEST(CanonicalElementTest, RandomTextsAreWrittenAsTheClientWrites) {
  RandomText random(20261207);
  for (int i = 0; i < 3000; ++i) {
    const std::string text = random.Value(0);
    ExpectWrittenAsTheClientWrites(text);
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace cachewatch
