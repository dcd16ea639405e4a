// Reproduces the shared client test vectors in tests/vectors/ byte for byte
// and hash for hash. The vectors are generated independently of this library
// (tests/vectors/generate.mjs); every client language must pass them.

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cachewatch/client/canonical_json.h"
#include "cachewatch/client/hash.h"
#include "cachewatch/client/message_chain.h"
#include "cachewatch/client/tool_order.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace cachewatch::client {
namespace {

using Json = nlohmann::json;

Json ReadVectors(const std::string& file) {
  std::ifstream in(std::string(CACHEWATCH_VECTORS_DIR) + "/" + file,
                   std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  Json vectors = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(vectors.is_discarded()) << file << " is missing or not JSON";
  return vectors;
}

std::string Hex(uint64_t hash) {
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016" PRIx64, hash);
  return buffer;
}

TEST(VectorsTest, CanonicalJson) {
  const Json vectors = ReadVectors("canonical_json.json");
  ASSERT_TRUE(vectors.is_array());
  EXPECT_GE(vectors.size(), 25u);
  for (const Json& vector : vectors) {
    SCOPED_TRACE(vector.at("name").get<std::string>());
    const std::string input = vector.at("input");
    const std::string expected = vector.at("canonical");
    const absl::StatusOr<std::string> canonical = CanonicalizeJson(input);
    ASSERT_TRUE(canonical.ok()) << canonical.status();
    EXPECT_EQ(*canonical, expected);
    EXPECT_EQ(Hex(HashBytes(*canonical)), vector.at("xxh3_64"));
    const absl::StatusOr<uint64_t> hash = HashJson(input);
    ASSERT_TRUE(hash.ok());
    EXPECT_EQ(Hex(*hash), vector.at("xxh3_64"));
    // The canonical form is its own canonical form.
    EXPECT_EQ(CanonicalizeJson(expected).value_or(""), expected);
  }
}

TEST(VectorsTest, CanonicalJsonErrors) {
  const Json vectors = ReadVectors("canonical_json_errors.json");
  ASSERT_TRUE(vectors.is_array());
  EXPECT_FALSE(vectors.empty());
  for (const Json& vector : vectors) {
    SCOPED_TRACE(vector.at("name").get<std::string>());
    const absl::StatusOr<std::string> canonical =
        CanonicalizeJson(vector.at("input").get<std::string>());
    ASSERT_FALSE(canonical.ok()) << "accepted as " << *canonical;
    EXPECT_EQ(canonical.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(VectorsTest, MessageChain) {
  const Json vectors = ReadVectors("message_chain.json");
  const std::vector<std::string> blocks = vectors.at("blocks");
  const std::vector<std::string> canonical = vectors.at("canonical");
  const std::vector<std::string> expected = vectors.at("chain");
  ASSERT_EQ(blocks.size(), expected.size());
  ASSERT_EQ(blocks.size(), canonical.size());

  uint64_t previous = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(CanonicalizeJson(blocks[i]).value_or(""), canonical[i]) << i;
    previous = ChainHash(previous, canonical[i]);
    EXPECT_EQ(Hex(previous), expected[i]) << i;
  }

  // Grown one block at a time, and all at once.
  MessageChain incremental;
  for (size_t size = 1; size <= blocks.size(); ++size) {
    const std::vector<std::string> history(blocks.begin(),
                                           blocks.begin() + size);
    ASSERT_EQ(incremental.Update(history).value_or(0), size - 1);
  }
  MessageChain at_once;
  ASSERT_TRUE(at_once.Update(blocks).ok());
  for (const MessageChain* chain : {&incremental, &at_once}) {
    std::vector<std::string> hashes;
    for (uint64_t hash : chain->hashes()) hashes.push_back(Hex(hash));
    EXPECT_EQ(hashes, expected);
  }
}

TEST(VectorsTest, ToolOrder) {
  // A phrase of the error message for each error kind of the vectors.
  const std::map<std::string, std::string> kPhrases = {
      {"missing_rest_entry", "rest entry to place the unlisted tools"},
      {"multiple_rest_entries", "more than one"},
      {"duplicate_entry", "twice"},
      {"unknown_entry", "names no registered tool"},
      {"reserved_tool_name", "reserved for the toolOrder rest entry"},
  };
  const Json vectors = ReadVectors("tool_order.json");
  ASSERT_TRUE(vectors.is_array());
  for (const Json& vector : vectors) {
    SCOPED_TRACE(vector.at("name").get<std::string>());
    std::vector<Tool> tools;
    for (const Json& tool : vector.at("tools")) {
      tools.push_back({.name = tool.at("name"),
                       .display_name = tool.value("display_name", ""),
                       .should_defer = tool.value("should_defer", false),
                       .always_load = tool.value("always_load", false),
                       .revealed = tool.value("revealed", false)});
    }
    const DeferredTools deferred = vector.value("include_deferred", false)
                                       ? DeferredTools::kInclude
                                       : DeferredTools::kHide;
    absl::StatusOr<ToolOrder> policy = ToolOrder();
    if (vector.contains("tool_order")) {
      policy = ToolOrder::Explicit(vector.at("tool_order"));
    }
    absl::StatusOr<std::vector<size_t>> result =
        policy.ok() ? policy->Apply(tools, deferred)
                    : absl::StatusOr<std::vector<size_t>>(policy.status());

    if (vector.contains("error")) {
      ASSERT_FALSE(result.ok());
      EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
      const std::string message(result.status().message());
      EXPECT_NE(message.find(kPhrases.at(vector.at("error"))),
                std::string::npos)
          << message;
      EXPECT_NE(message.find(vector.at("offending").get<std::string>()),
                std::string::npos)
          << message;
      continue;
    }
    ASSERT_TRUE(result.ok()) << result.status();
    std::vector<std::string> names;
    std::vector<std::string> display_names;
    for (size_t index : *result) {
      names.push_back(tools[index].name);
      display_names.push_back(tools[index].display_name);
    }
    EXPECT_EQ(names, vector.at("expected").get<std::vector<std::string>>());
    if (vector.contains("expected_display_names")) {
      EXPECT_EQ(
          display_names,
          vector.at("expected_display_names").get<std::vector<std::string>>());
    }
  }
}

}  // namespace
}  // namespace cachewatch::client
