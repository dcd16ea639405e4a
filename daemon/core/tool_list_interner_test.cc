#include "daemon/core/tool_list_interner.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace cachewatch {
namespace {

ToolList List(std::initializer_list<std::pair<std::string, uint64_t>> tools) {
  ToolList list;
  for (const auto& [name, hash] : tools) {
    v1::ToolRef* tool = list.Add();
    tool->set_name(name);
    tool->set_schema_hash(hash);
  }
  return list;
}

TEST(ToolListInternerTest, EqualListsShareOneCopy) {
  ToolListInterner interner;
  const std::shared_ptr<const ToolList> a =
      interner.Intern(List({{"Read", 1}, {"Bash", 2}}));
  const std::shared_ptr<const ToolList> b =
      interner.Intern(List({{"Read", 1}, {"Bash", 2}}));
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(interner.size(), 1u);
  ASSERT_EQ(a->size(), 2);
  EXPECT_EQ(a->Get(1).name(), "Bash");
}

TEST(ToolListInternerTest, OrderNamesAndSchemasMakeListsDistinct) {
  ToolListInterner interner;
  const auto base = interner.Intern(List({{"Read", 1}, {"Bash", 2}}));
  EXPECT_NE(interner.Intern(List({{"Bash", 2}, {"Read", 1}})), base);
  EXPECT_NE(interner.Intern(List({{"Read", 1}, {"Bash", 3}})), base);
  EXPECT_NE(interner.Intern(List({{"Read", 1}, {"Bashx", 2}})), base);
  EXPECT_NE(interner.Intern(List({{"Read", 1}})), base);
  EXPECT_NE(interner.Intern(List({})), base);
}

TEST(ToolListInternerTest, ListsNoOneHoldsAreForgotten) {
  ToolListInterner interner;
  const auto kept = interner.Intern(List({{"Read", 1}}));
  interner.Intern(List({{"Bash", 2}}));  // Dropped at once.
  interner.Sweep();
  EXPECT_EQ(interner.size(), 1u);
  EXPECT_EQ(interner.Intern(List({{"Read", 1}})), kept);
}

TEST(ToolListInternerTest, AKnownListIsWhatInterningWouldReturn) {
  ToolListInterner interner;
  const auto known = interner.Intern(List({{"Read", 1}, {"Bash", 2}}));
  EXPECT_EQ(interner.Intern(List({{"Read", 1}, {"Bash", 2}}), known), known);
  // Another list: interned as without the hint, and shared from then on.
  const auto other = interner.Intern(List({{"Read", 1}, {"Bash", 3}}), known);
  EXPECT_NE(other, known);
  ASSERT_EQ(other->size(), 2);
  EXPECT_EQ(other->Get(1).schema_hash(), 3u);
  EXPECT_EQ(interner.Intern(List({{"Read", 1}, {"Bash", 3}})), other);
  EXPECT_EQ(interner.Intern(List({{"Read", 1}}), nullptr),
            interner.Intern(List({{"Read", 1}})));
}

}  // namespace
}  // namespace cachewatch
