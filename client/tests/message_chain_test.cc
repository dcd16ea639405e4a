#include "cachewatch/client/message_chain.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cachewatch/client/hash.h"
#include "gtest/gtest.h"

namespace cachewatch::client {
namespace {

std::vector<std::string> Blocks(int count, int first = 0) {
  std::vector<std::string> blocks;
  for (int i = first; i < first + count; ++i) {
    blocks.push_back(absl::StrCat(R"({"role":")", i % 2 ? "assistant" : "user",
                                  R"(","type":"text","text":"turn )", i,
                                  R"("})"));
  }
  return blocks;
}

std::vector<uint64_t> FromScratch(const std::vector<std::string>& blocks) {
  MessageChain chain;
  EXPECT_TRUE(chain.Update(blocks).ok());
  return chain.hashes();
}

TEST(MessageChainTest, ChainHashIsXxh3OfLittleEndianPreviousThenBlock) {
  EXPECT_EQ(ChainHash(0x0102030405060708, "{}"),
            HashBytes(std::string("\x08\x07\x06\x05\x04\x03\x02\x01{}", 10)));
  EXPECT_EQ(ChainHash(0, "[]"),
            HashBytes(std::string("\0\0\0\0\0\0\0\0[]", 10)));
}

TEST(MessageChainTest, HashesCanonicalBlocksFromZero) {
  MessageChain chain;
  ASSERT_TRUE(chain.Update({"{ \"b\": 1, \"a\": 2.0 }", "\"x\""}).ok());
  ASSERT_EQ(chain.hashes().size(), 2u);
  EXPECT_EQ(chain.hashes()[0], ChainHash(0, R"({"a":2,"b":1})"));
  EXPECT_EQ(chain.hashes()[1], ChainHash(chain.hashes()[0], "\"x\""));
}

TEST(MessageChainTest, AppendingHashesOnlyTheNewBlocks) {
  const std::vector<std::string> all = Blocks(12);
  MessageChain chain;
  size_t seen = 0;
  for (size_t size : {1, 2, 5, 5, 9, 12}) {
    const std::vector<std::string> history(all.begin(), all.begin() + size);
    const absl::StatusOr<size_t> reused = chain.Update(history);
    ASSERT_TRUE(reused.ok()) << reused.status();
    EXPECT_EQ(*reused, seen);
    EXPECT_EQ(chain.hashes(), FromScratch(history));
    seen = size;
  }
}

TEST(MessageChainTest, RewrittenHistoryIsRecomputedFromFirstDifference) {
  std::vector<std::string> history = Blocks(10);
  MessageChain chain;
  ASSERT_TRUE(chain.Update(history).ok());
  const std::vector<uint64_t> before = chain.hashes();

  history[4] = R"({"role":"user","type":"text","text":"edited"})";
  const absl::StatusOr<size_t> reused = chain.Update(history);
  ASSERT_TRUE(reused.ok());
  EXPECT_EQ(*reused, 4u);
  EXPECT_EQ(chain.hashes(), FromScratch(history));
  for (size_t i = 0; i < history.size(); ++i) {
    if (i < 4) {
      EXPECT_EQ(chain.hashes()[i], before[i]) << i;
    } else {
      EXPECT_NE(chain.hashes()[i], before[i]) << i;
    }
  }
}

TEST(MessageChainTest, CompactedHistoryStartsOver) {
  MessageChain chain;
  ASSERT_TRUE(chain.Update(Blocks(10)).ok());

  const std::vector<std::string> truncated = Blocks(3);
  EXPECT_EQ(*chain.Update(truncated), 3u);
  EXPECT_EQ(chain.hashes(), FromScratch(truncated));

  std::vector<std::string> compacted = {
      R"({"role":"user","type":"text","text":"summary of turns 0-9"})"};
  const std::vector<std::string> more = Blocks(2, 10);
  compacted.insert(compacted.end(), more.begin(), more.end());
  EXPECT_EQ(*chain.Update(compacted), 0u);
  EXPECT_EQ(chain.hashes(), FromScratch(compacted));

  EXPECT_EQ(*chain.Update({}), 0u);
  EXPECT_TRUE(chain.hashes().empty());
}

TEST(MessageChainTest, ReformattedBlockKeepsItsHash) {
  MessageChain chain;
  ASSERT_TRUE(chain.Update({R"({"a":1,"b":2})", R"({"c":3})"}).ok());
  const std::vector<uint64_t> before = chain.hashes();
  const absl::StatusOr<size_t> reused =
      chain.Update({"{\n  \"b\": 2,\n  \"a\": 1\n}", R"({"c":3})"});
  ASSERT_TRUE(reused.ok());
  EXPECT_EQ(*reused, 0u);  // The text changed, so it was hashed again...
  EXPECT_EQ(chain.hashes(), before);  // ...to the same chain.
}

TEST(MessageChainTest, InvalidBlockLeavesChainUnchanged) {
  std::vector<std::string> history = Blocks(3);
  MessageChain chain;
  ASSERT_TRUE(chain.Update(history).ok());
  const std::vector<uint64_t> before = chain.hashes();

  history.push_back(R"({"role":"user",)");
  const absl::StatusOr<size_t> result = chain.Update(history);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(result.status().message()).find("message block 3"),
            std::string::npos)
      << result.status();
  EXPECT_EQ(chain.hashes(), before);

  history.back() = R"({"role":"user","type":"text","text":"fixed"})";
  EXPECT_EQ(*chain.Update(history), 3u);
  EXPECT_EQ(chain.hashes(), FromScratch(history));
}

}  // namespace
}  // namespace cachewatch::client
