#include "cachewatch/client/hash.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace cachewatch::client {
namespace {

TEST(HashTest, HashBytesIsXxh3WithSeedZero) {
  // Published XXH3-64 values.
  EXPECT_EQ(HashBytes(""), 0x2d06800538d394c2u);
  EXPECT_EQ(HashBytes("abc"), 0x78af5f94892f3950u);
}

TEST(HashTest, HashJsonIgnoresFormattingAndKeyOrder) {
  const absl::StatusOr<uint64_t> compact = HashJson(R"({"a":1,"b":[true]})");
  const absl::StatusOr<uint64_t> spaced =
      HashJson("{ \"b\" : [ true ],\n  \"a\" : 1.0 }");
  ASSERT_TRUE(compact.ok());
  ASSERT_TRUE(spaced.ok());
  EXPECT_EQ(*compact, *spaced);
  EXPECT_EQ(*compact, HashBytes(R"({"a":1,"b":[true]})"));
}

TEST(HashTest, HashJsonChangesWithContent) {
  const absl::StatusOr<uint64_t> one = HashJson(R"({"enum":["a","b"]})");
  const absl::StatusOr<uint64_t> two = HashJson(R"({"enum":["a","b","c"]})");
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(two.ok());
  EXPECT_NE(*one, *two);
}

TEST(HashTest, HashJsonRejectsWhatCanonicalizationRejects) {
  EXPECT_EQ(HashJson("{").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cachewatch::client
