#include "cachewatch/client/tool_order.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace cachewatch::client {
namespace {

using Names = std::vector<std::string>;

std::vector<Tool> Registered(const Names& names) {
  std::vector<Tool> tools;
  for (const std::string& name : names) tools.push_back({.name = name});
  return tools;
}

// The names of the tools `order` sends, in order.
Names Sent(const std::vector<Tool>& tools, const ToolOrder& order = {},
           DeferredTools deferred = DeferredTools::kHide) {
  const absl::StatusOr<std::vector<size_t>> indices =
      order.Apply(tools, deferred);
  EXPECT_TRUE(indices.ok()) << indices.status();
  Names names;
  for (size_t i : indices.value_or(std::vector<size_t>{})) {
    names.push_back(tools[i].name);
  }
  return names;
}

ToolOrder Explicit(const Names& entries) {
  absl::StatusOr<ToolOrder> order = ToolOrder::Explicit(entries);
  EXPECT_TRUE(order.ok()) << order.status();
  return order.value_or(ToolOrder());
}

void ExpectInvalid(const absl::Status& status,
                   std::vector<std::string_view> fragments) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  for (std::string_view fragment : fragments) {
    EXPECT_NE(std::string(status.message()).find(fragment),
              std::string_view::npos)
        << status << " lacks " << fragment;
  }
}

// The seed's test plan, case 1: every registration order gives one order.
TEST(ToolOrderTest, SortsByNameWhateverTheRegistrationOrder) {
  Names names = {"alpha", "middle", "zeta"};
  do {
    EXPECT_EQ(Sent(Registered(names)), (Names{"alpha", "middle", "zeta"}));
  } while (std::next_permutation(names.begin(), names.end()));
}

// Cases 2 and 3: deferred tools are filtered before sorting, unless included.
TEST(ToolOrderTest, FiltersDeferredToolsBeforeSorting) {
  const std::vector<Tool> tools = {
      {.name = "visible-z"},
      {.name = "hidden-a", .should_defer = true},
      {.name = "visible-a"},
  };
  EXPECT_EQ(Sent(tools), (Names{"visible-a", "visible-z"}));
  EXPECT_EQ(Sent(tools, ToolOrder(), DeferredTools::kInclude),
            (Names{"hidden-a", "visible-a", "visible-z"}));
}

// Case 4: a revealed deferred tool appears at its sorted position.
TEST(ToolOrderTest, RevealedDeferredToolAppearsInSortedPosition) {
  std::vector<Tool> tools = {
      {.name = "visible-m"},
      {.name = "hidden-a", .should_defer = true},
      {.name = "visible-z"},
  };
  EXPECT_EQ(Sent(tools), (Names{"visible-m", "visible-z"}));
  tools[1].revealed = true;
  EXPECT_EQ(Sent(tools), (Names{"hidden-a", "visible-m", "visible-z"}));
}

// Case 5: an always_load deferred tool stays visible and sorted.
TEST(ToolOrderTest, AlwaysLoadDeferredToolStaysVisible) {
  const std::vector<Tool> tools = {
      {.name = "z", .should_defer = true, .always_load = true},
      {.name = "a"},
  };
  EXPECT_EQ(Sent(tools), (Names{"a", "z"}));
}

// Case 6: MCP servers that settle in different orders give one order.
TEST(ToolOrderTest, McpRegistrationOrderDoesNotMatter) {
  const Names expected = {"mcp__filesystem__read_tree",
                          "mcp__github__search_issues", "read_file", "shell"};
  EXPECT_EQ(Sent(Registered({"read_file", "shell", "mcp__filesystem__read_tree",
                             "mcp__github__search_issues"})),
            expected);
  EXPECT_EQ(Sent(Registered({"read_file", "shell", "mcp__github__search_issues",
                             "mcp__filesystem__read_tree"})),
            expected);
}

TEST(ToolOrderTest, ComparesCodeUnitsNotLocale) {
  EXPECT_EQ(Sent(Registered({"b", "B", "\xC3\xA4", "a", "A", "_x", "Z", "e"})),
            (Names{"A", "B", "Z", "_x", "a", "b", "e", "\xC3\xA4"}));
  // U+1F600 before U+E000: UTF-16, not UTF-8 byte order.
  EXPECT_EQ(Sent(Registered({"\xEE\x80\x80", "\xF0\x9F\x98\x80"})),
            (Names{"\xF0\x9F\x98\x80", "\xEE\x80\x80"}));
}

TEST(ToolOrderTest, DisplayNameBreaksTiesAndNoToolIsDropped) {
  const std::vector<Tool> tools = {
      {.name = "search", .display_name = "Web Search", .definition = "1"},
      {.name = "alpha"},
      {.name = "search", .display_name = "Code Search", .definition = "2"},
      {.name = "search", .display_name = "Code Search", .definition = "3"},
  };
  const absl::StatusOr<std::vector<size_t>> order = ToolOrder().Apply(tools);
  ASSERT_TRUE(order.ok());
  // Equal in name and display name: the input order is kept.
  EXPECT_EQ(*order, (std::vector<size_t>{1, 2, 3, 0}));
}

TEST(ToolOrderTest, ExplicitListPlacesListedToolsAndTheRest) {
  const std::vector<Tool> tools = Registered({"c", "a", "e", "b", "d"});
  EXPECT_EQ(Sent(tools, Explicit({"e", std::string(kToolOrderRest), "b"})),
            (Names{"e", "a", "c", "d", "b"}));
  EXPECT_EQ(Sent(tools, Explicit({std::string(kToolOrderRest), "a"})),
            (Names{"b", "c", "d", "e", "a"}));
  EXPECT_EQ(Sent(tools, Explicit({std::string(kToolOrderRest)})),
            (Names{"a", "b", "c", "d", "e"}));
  EXPECT_TRUE(Explicit({std::string(kToolOrderRest)}).is_explicit());
  EXPECT_FALSE(ToolOrder().is_explicit());
}

TEST(ToolOrderTest, ExplicitListMayNameAHiddenDeferredTool) {
  std::vector<Tool> tools = {
      {.name = "zed"},
      {.name = "hidden", .should_defer = true},
      {.name = "alpha"},
  };
  const ToolOrder order = Explicit({"hidden", std::string(kToolOrderRest)});
  EXPECT_EQ(Sent(tools, order), (Names{"alpha", "zed"}));
  tools[1].revealed = true;
  EXPECT_EQ(Sent(tools, order), (Names{"hidden", "alpha", "zed"}));
}

TEST(ToolOrderTest, MalformedListsFailAtConstruction) {
  const std::string rest(kToolOrderRest);
  ExpectInvalid(ToolOrder::Explicit({}).status(),
                {"no \"<unlisted-tools>\" rest entry"});
  ExpectInvalid(ToolOrder::Explicit({"a", "b"}).status(),
                {"no \"<unlisted-tools>\" rest entry"});
  ExpectInvalid(ToolOrder::Explicit({rest, "a", rest}).status(),
                {"more than one \"<unlisted-tools>\"", "#0", "#2"});
  ExpectInvalid(ToolOrder::Explicit({"a", rest, "a"}).status(),
                {"\"a\" twice", "#0", "#2"});
  // Read in order: the repeat is found before the missing rest entry.
  ExpectInvalid(ToolOrder::Explicit({"b", "b"}).status(), {"\"b\" twice"});
  ExpectInvalid(ToolOrder::Explicit({rest, "\xC3"}).status(),
                {"entry #1 is not valid UTF-8"});
}

TEST(ToolOrderTest, UnknownListedNameFailsEveryApply) {
  const ToolOrder order =
      Explicit({"read_file", "raed_file", std::string(kToolOrderRest)});
  ExpectInvalid(order.Apply(Registered({"read_file", "shell"})).status(),
                {"\"raed_file\" names no registered tool"});
  ExpectInvalid(order.Apply(Registered({"READ_FILE", "raed_file"})).status(),
                {"\"read_file\" names no registered tool"});
  EXPECT_TRUE(order.Apply(Registered({"raed_file", "read_file"})).ok());
}

TEST(ToolOrderTest, ReservedNameIsRejectedInEveryPolicy) {
  const std::string rest(kToolOrderRest);
  ExpectInvalid(ToolOrder().Apply(Registered({"a", rest})).status(),
                {"tool #1", "\"<unlisted-tools>\"", "reserved"});
  const std::vector<Tool> hidden = {{.name = rest, .should_defer = true}};
  ExpectInvalid(ToolOrder().Apply(hidden).status(), {"reserved"});
  // Checked before the listed names.
  ExpectInvalid(Explicit({"nope", rest}).Apply(Registered({rest})).status(),
                {"reserved"});
}

TEST(ToolOrderTest, RejectsUnnamedAndNonUtf8Tools) {
  ExpectInvalid(ToolOrder().Apply(Registered({"a", ""})).status(),
                {"tool #1 has no name"});
  ExpectInvalid(ToolOrder().Apply(Registered({"\xFF"})).status(),
                {"tool #0", "not valid UTF-8"});
}

}  // namespace
}  // namespace cachewatch::client
