#include "daemon/core/tool_diff.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace cachewatch {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// "name:hash" pairs.
ToolList List(std::vector<std::pair<std::string, uint64_t>> tools) {
  ToolList list;
  for (auto& [name, hash] : tools) {
    v1::ToolRef* tool = list.Add();
    tool->set_name(name);
    tool->set_schema_hash(hash);
  }
  return list;
}

TEST(ToolDiffTest, EqualListsHaveNoDiff) {
  const ToolDiff diff =
      DiffTools(List({{"a", 1}, {"b", 2}}), List({{"a", 1}, {"b", 2}}));
  EXPECT_TRUE(diff.empty());
  EXPECT_EQ(diff.first_changed_index, -1);
  EXPECT_THAT(diff.ChangedNames(), IsEmpty());
}

TEST(ToolDiffTest, EmptyListsHaveNoDiff) {
  EXPECT_TRUE(DiffTools(List({}), List({})).empty());
}

TEST(ToolDiffTest, SwapReportsTheFewestMovedTools) {
  // mcp__git__status moved from last to first; the rest kept their order.
  const ToolDiff diff =
      DiffTools(List({{"Bash", 1}, {"Read", 2}, {"Write", 3}, {"mcp", 4}}),
                List({{"mcp", 4}, {"Bash", 1}, {"Read", 2}, {"Write", 3}}));
  EXPECT_THAT(diff.reordered, ElementsAre("mcp"));
  EXPECT_THAT(diff.added, IsEmpty());
  EXPECT_THAT(diff.removed, IsEmpty());
  EXPECT_THAT(diff.schema_changed, IsEmpty());
  EXPECT_EQ(diff.first_changed_index, 0);
}

TEST(ToolDiffTest, SchemaChangeInPlaceIsNotAReorder) {
  const ToolDiff diff = DiffTools(List({{"a", 1}, {"b", 2}, {"c", 3}}),
                                  List({{"a", 1}, {"b", 9}, {"c", 3}}));
  EXPECT_THAT(diff.schema_changed, ElementsAre("b"));
  EXPECT_THAT(diff.reordered, IsEmpty());
  EXPECT_EQ(diff.first_changed_index, 1);
}

TEST(ToolDiffTest, AddedInTheMiddleIsNotAReorder) {
  const ToolDiff diff = DiffTools(List({{"a", 1}, {"c", 3}}),
                                  List({{"a", 1}, {"b", 2}, {"c", 3}}));
  EXPECT_THAT(diff.added, ElementsAre("b"));
  EXPECT_THAT(diff.reordered, IsEmpty());
  EXPECT_EQ(diff.first_changed_index, 1);
}

TEST(ToolDiffTest, RemovedAtTheEnd) {
  const ToolDiff diff =
      DiffTools(List({{"a", 1}, {"b", 2}, {"c", 3}}), List({{"a", 1}}));
  EXPECT_THAT(diff.removed, ElementsAre("b", "c"));
  EXPECT_THAT(diff.added, IsEmpty());
  EXPECT_EQ(diff.first_changed_index, 1);
}

TEST(ToolDiffTest, FromAndToEmpty) {
  EXPECT_THAT(DiffTools(List({}), List({{"a", 1}})).added, ElementsAre("a"));
  EXPECT_THAT(DiffTools(List({{"a", 1}}), List({})).removed, ElementsAre("a"));
  EXPECT_EQ(DiffTools(List({}), List({{"a", 1}})).first_changed_index, 0);
}

TEST(ToolDiffTest, DuplicateNamesAreMatchedByOccurrence) {
  // The second "a" gets a new schema; a third "a" is added.
  const ToolDiff diff = DiffTools(List({{"a", 1}, {"a", 2}}),
                                  List({{"a", 1}, {"a", 5}, {"a", 6}}));
  EXPECT_THAT(diff.schema_changed, ElementsAre("a"));
  EXPECT_THAT(diff.added, ElementsAre("a"));
  EXPECT_THAT(diff.reordered, IsEmpty());
  EXPECT_THAT(diff.ChangedNames(), ElementsAre("a"));
}

TEST(ToolDiffTest, ReverseOrderMovesAllButOne) {
  const ToolDiff diff = DiffTools(List({{"a", 1}, {"b", 2}, {"c", 3}}),
                                  List({{"c", 3}, {"b", 2}, {"a", 1}}));
  EXPECT_EQ(diff.reordered.size(), 2u);
}

TEST(ToolDiffTest, ChangedNamesCombinesAllKindsOnce) {
  const ToolDiff diff =
      DiffTools(List({{"a", 1}, {"b", 2}, {"c", 3}, {"gone", 3}}),
                List({{"b", 7}, {"c", 3}, {"a", 1}, {"new", 4}}));
  EXPECT_THAT(diff.reordered, ElementsAre("a"));
  EXPECT_THAT(diff.schema_changed, ElementsAre("b"));
  EXPECT_THAT(diff.ChangedNames(), ElementsAre("a", "b", "new", "gone"));
}

}  // namespace
}  // namespace cachewatch
