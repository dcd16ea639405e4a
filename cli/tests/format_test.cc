// The pure helpers behind the commands.
#include "cli/format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/commands_query.h"

namespace cachewatch::cli {
namespace {

using ::testing::HasSubstr;

TEST(ParseSinceTest, DurationsAndTimes) {
  const struct {
    const char* text;
    int64_t seconds;
  } kCases[] = {
      {"90s", 910}, {"15m", 100}, {"0h", 1000}, {"1970-01-01T00:00:05Z", 5}};
  for (const auto& test : kCases) {
    auto since = ParseSince(test.text, 1000);
    ASSERT_TRUE(since.ok()) << test.text;
    EXPECT_EQ(since->seconds(), test.seconds) << test.text;
  }
  for (const char* bad : {"", "h", "1w", "-1h", "yesterday"}) {
    EXPECT_FALSE(ParseSince(bad, 1000).ok()) << bad;
  }
}

TEST(ParseReasonTest, DesignAndEnumNames) {
  EXPECT_EQ(*ParseReason("tools_order_changed"),
            v1::REASON_TOOLS_ORDER_CHANGED);
  EXPECT_EQ(*ParseReason("REASON_TTL_EXPIRED"), v1::REASON_TTL_EXPIRED);
  EXPECT_FALSE(ParseReason("unspecified").ok());
  EXPECT_FALSE(ParseReason("tools").ok());
}

TEST(ExplainTextTest, MarksEachKindOfToolChange) {
  v1::ExplainBreakResponse explanation;
  v1::PromptCacheBreak& b = *explanation.mutable_cache_break();
  b.set_primary_reason(v1::REASON_TOOLS_ORDER_CHANGED);
  b.add_reordered_tool_names("C");
  b.add_schema_changed_tool_names("A");
  b.add_added_tool_names("D");
  b.add_removed_tool_names("B");
  for (const char* name : {"A", "B", "C"}) {
    explanation.mutable_previous_snapshot()->add_tools()->set_name(name);
  }
  for (const char* name : {"C", "A", "D"}) {
    explanation.mutable_snapshot()->add_tools()->set_name(name);
  }
  const std::string text = ExplainText(explanation);
  EXPECT_THAT(text, HasSubstr("  0   A      |   C  <- moved\n"));
  EXPECT_THAT(text, HasSubstr("  1 - B      | ~ A\n"));
  EXPECT_THAT(text, HasSubstr("  2   C      | + D\n"));
}

// The provider's own word is shown verbatim beside ours, with whether the
// two agree; an unmapped word is shown as it is.
TEST(ExplainTextTest, ShowsTheProvidersWordBesideOurs) {
  v1::ExplainBreakResponse explanation;
  v1::PromptCacheBreak& b = *explanation.mutable_cache_break();
  b.set_primary_reason(v1::REASON_TOOLS_ADDED);
  b.add_reasons(v1::REASON_TOOLS_ADDED);
  EXPECT_THAT(ExplainText(explanation), HasSubstr("no diagnostics sent"));
  b.set_provider_miss_reason("tools_changed");
  b.set_provider_missed_tokens(18000);
  b.set_provider_agreement(v1::PROVIDER_AGREEMENT_AGREE);
  EXPECT_THAT(ExplainText(explanation),
              HasSubstr("says \"tools_changed\" (18000 tokens missed): "
                        "agrees with tools_added"));
  b.set_provider_miss_reason("cache_hit");
  b.set_provider_missed_tokens(0);
  b.set_provider_agreement(v1::PROVIDER_AGREEMENT_DISAGREE);
  EXPECT_THAT(ExplainText(explanation),
              HasSubstr("says \"cache_hit\": disagrees with tools_added"));
  b.set_provider_miss_reason("speed_changed");
  b.set_provider_agreement(v1::PROVIDER_AGREEMENT_UNSPECIFIED);
  EXPECT_THAT(ExplainText(explanation),
              HasSubstr("says \"speed_changed\": a word cachewatch does not "
                        "map"));
}

TEST(ToolChangesTest, NamesWhatHappenedAndHowManyMore) {
  v1::PromptCacheBreak b;
  for (const char* name : {"a", "b", "c", "d"}) {
    b.add_changed_tool_names(name);
    b.add_reordered_tool_names(name);
  }
  EXPECT_EQ(ToolChanges(b, 2), "a (moved), b (moved) +2 more");
  EXPECT_EQ(ToolChanges(v1::PromptCacheBreak(), 2), "");
}

}  // namespace
}  // namespace cachewatch::cli
