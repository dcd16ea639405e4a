#include "daemon/core/classifier.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/test_turns.h"

namespace cachewatch {
namespace {

using ::cachewatch::testing::BaseSnapshot;
using ::cachewatch::testing::MakeTurn;
using ::cachewatch::testing::Tool;
using ::cachewatch::testing::Usage;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

const LaneKey kLane{"agent", "s1", "main"};

// The previous turn wrote 20,000 tokens; the current one reads nothing of
// them and writes them again: 20,000 missed.
v1::TurnClassification ClassifyPair(const v1::Snapshot& before,
                                    const v1::Snapshot& after,
                                    const ClassifierOptions& options = {},
                                    const LaneContext& context = {}) {
  const Turn previous = MakeTurn(before, Usage(0, 20000, 100));
  const Turn current = MakeTurn(after, Usage(0, 20500, 100));
  return Classify(kLane, &previous, current, context, options);
}

void SetChain(v1::Snapshot& snapshot, std::vector<uint64_t> chain) {
  snapshot.clear_message_chain();
  for (uint64_t hash : chain) snapshot.add_message_chain(hash);
}

std::vector<uint64_t> Chain(int blocks, uint64_t salt = 0) {
  std::vector<uint64_t> chain;
  for (int i = 0; i < blocks; ++i) chain.push_back(1000 + i + salt);
  return chain;
}

// Puts a breakpoint on tool `index`; `blocks_after` as a client library
// reports it, or -1 to leave it for the daemon to derive.
v1::Breakpoint* OnTool(v1::Snapshot& snapshot, uint32_t index,
                       int blocks_after = -1) {
  v1::Breakpoint* breakpoint =
      snapshot.mutable_cache_control()->add_breakpoints();
  breakpoint->set_segment(v1::PROMPT_SEGMENT_TOOLS);
  breakpoint->set_index(index);
  if (blocks_after >= 0) breakpoint->set_blocks_after(blocks_after);
  return breakpoint;
}

struct ReasonCase {
  const char* name;
  std::function<void(v1::Snapshot& before, v1::Snapshot& after)> change;
  double gap_seconds;
  std::vector<v1::Reason> reasons;
  v1::Evidence evidence;
};

const ReasonCase kReasonCases[] = {
    {"model_changed",
     [](v1::Snapshot&, v1::Snapshot& after) {
       after.set_model("claude-opus-4-1");
     },
     30,
     {v1::REASON_MODEL_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"cache_control_ttl_changed",
     [](v1::Snapshot&, v1::Snapshot& after) {
       after.mutable_cache_control()->set_ttl_seconds(3600);
     },
     30,
     {v1::REASON_CACHE_CONTROL_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"cache_control_system_breakpoint_moved",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       auto* a = before.mutable_cache_control()->add_breakpoints();
       a->set_segment(v1::PROMPT_SEGMENT_SYSTEM);
       a->set_index(0);
       auto* b = after.mutable_cache_control()->add_breakpoints();
       b->set_segment(v1::PROMPT_SEGMENT_SYSTEM);
       b->set_index(1);
     },
     30,
     {v1::REASON_CACHE_CONTROL_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"request_options_changed",
     [](v1::Snapshot&, v1::Snapshot& after) { after.set_options_hash(7); },
     30,
     {v1::REASON_REQUEST_OPTIONS_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"tools_order_changed",
     [](v1::Snapshot&, v1::Snapshot& after) {
       after.mutable_tools()->SwapElements(0, 1);
     },
     30,
     {v1::REASON_TOOLS_ORDER_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"tools_schema_changed",
     [](v1::Snapshot&, v1::Snapshot& after) {
       after.mutable_tools(2)->set_schema_hash(99);
     },
     30,
     {v1::REASON_TOOLS_SCHEMA_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"tools_added",
     [](v1::Snapshot&, v1::Snapshot& after) {
       *after.add_tools() = Tool("Grep", 4);
     },
     30,
     {v1::REASON_TOOLS_ADDED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"tools_removed",
     [](v1::Snapshot&, v1::Snapshot& after) {
       after.mutable_tools()->RemoveLast();
     },
     30,
     {v1::REASON_TOOLS_REMOVED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"system_changed",
     [](v1::Snapshot&, v1::Snapshot& after) { after.set_system_hash(43); },
     30,
     {v1::REASON_SYSTEM_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"messages_changed",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       SetChain(before, Chain(6));
       std::vector<uint64_t> rewritten = Chain(8);
       rewritten[3] = 77;  // History edited at block 3.
       SetChain(after, rewritten);
     },
     30,
     {v1::REASON_MESSAGES_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"messages_truncated",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       SetChain(before, Chain(10));
       SetChain(after, Chain(4));
     },
     30,
     {v1::REASON_MESSAGES_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"breakpoint_lookback_exceeded",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       SetChain(before, Chain(5));  // Breakpoint on block 4.
       SetChain(after, Chain(25));  // Breakpoint on block 24: 20 later.
     },
     30,
     {v1::REASON_BREAKPOINT_LOOKBACK_EXCEEDED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"ttl_expired",
     [](v1::Snapshot&, v1::Snapshot&) {},
     301,
     {v1::REASON_TTL_EXPIRED},
     v1::EVIDENCE_PROVIDER_SUSPECTED},
    {"likely_provider_eviction",
     [](v1::Snapshot&, v1::Snapshot&) {},
     299,
     {v1::REASON_LIKELY_PROVIDER_EVICTION},
     v1::EVIDENCE_PROVIDER_SUSPECTED},
    // Breakpoints are placed relative to their segment: on the last tool
    // stays "at the end of tools" whatever the number of tools.
    {"tool_added_with_breakpoint_on_last_tool_is_tools_added",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       OnTool(before, 2);  // Bash, the last of three.
       *after.add_tools() = Tool("Grep", 4);
       OnTool(after, 3);  // Grep, the last of four.
     },
     30,
     {v1::REASON_TOOLS_ADDED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"tool_removed_with_breakpoint_on_last_tool_is_tools_removed",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       OnTool(before, 2);
       after.mutable_tools()->RemoveLast();
       OnTool(after, 1);
     },
     30,
     {v1::REASON_TOOLS_REMOVED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"client_reported_end_of_segment_is_at_the_end",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       OnTool(before, 2, 0);
       *after.add_tools() = Tool("Grep", 4);
       OnTool(after, 3, 0);
     },
     30,
     {v1::REASON_TOOLS_ADDED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"system_block_added_with_breakpoint_at_its_end_is_system_changed",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       auto* a = before.mutable_cache_control()->add_breakpoints();
       a->set_segment(v1::PROMPT_SEGMENT_SYSTEM);
       a->set_index(1);
       a->set_blocks_after(0);
       auto* b = after.mutable_cache_control()->add_breakpoints();
       b->set_segment(v1::PROMPT_SEGMENT_SYSTEM);
       b->set_index(2);
       b->set_blocks_after(0);
       after.set_system_hash(43);
     },
     30,
     {v1::REASON_SYSTEM_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"breakpoint_moved_off_the_last_tool_is_cache_control_changed",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       OnTool(before, 2);
       OnTool(after, 1);
     },
     30,
     {v1::REASON_CACHE_CONTROL_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"breakpoint_moved_from_tools_to_system_is_cache_control_changed",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       OnTool(before, 2);
       auto* b = after.mutable_cache_control()->add_breakpoints();
       b->set_segment(v1::PROMPT_SEGMENT_SYSTEM);
       b->set_index(0);
       b->set_blocks_after(0);
     },
     30,
     {v1::REASON_CACHE_CONTROL_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"breakpoint_ttl_changed_at_the_end_is_cache_control_changed",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       OnTool(before, 2);
       OnTool(after, 2)->set_ttl_seconds(3600);
     },
     30,
     {v1::REASON_CACHE_CONTROL_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"caching_disabled_is_cache_control_changed",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       OnTool(before, 2);
       after.mutable_cache_control()->set_enabled(false);
       OnTool(after, 2);
     },
     30,
     {v1::REASON_CACHE_CONTROL_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"automatic_instead_of_explicit_is_cache_control_changed",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       OnTool(before, 2);
       after.mutable_cache_control()->set_automatic(true);
     },
     30,
     {v1::REASON_CACHE_CONTROL_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    // Near misses: changes that must not produce their neighbour's reason.
    {"message_breakpoint_advancing_is_not_cache_control",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       SetChain(before, Chain(4));
       SetChain(after, Chain(6));
       auto* a = before.mutable_cache_control()->add_breakpoints();
       a->set_segment(v1::PROMPT_SEGMENT_MESSAGES);
       a->set_index(3);
       auto* b = after.mutable_cache_control()->add_breakpoints();
       b->set_segment(v1::PROMPT_SEGMENT_MESSAGES);
       b->set_index(5);
     },
     30,
     {v1::REASON_LIKELY_PROVIDER_EVICTION},
     v1::EVIDENCE_PROVIDER_SUSPECTED},
    {"lookback_of_19_blocks_is_within_reach",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       SetChain(before, Chain(5));
       SetChain(after, Chain(24));
     },
     30,
     {v1::REASON_LIKELY_PROVIDER_EVICTION},
     v1::EVIDENCE_PROVIDER_SUSPECTED},
    {"appended_messages_are_not_messages_changed",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       SetChain(before, Chain(5));
       SetChain(after, Chain(8));
     },
     400,
     {v1::REASON_TTL_EXPIRED},
     v1::EVIDENCE_PROVIDER_SUSPECTED},
    {"schema_change_with_same_order_is_not_order_changed",
     [](v1::Snapshot&, v1::Snapshot& after) {
       after.mutable_tools(0)->set_schema_hash(50);
       after.mutable_tools(1)->set_schema_hash(51);
     },
     30,
     {v1::REASON_TOOLS_SCHEMA_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    // Precedence: the earliest change in the prefix is primary.
    {"model_tools_and_system_changed",
     [](v1::Snapshot&, v1::Snapshot& after) {
       after.set_system_hash(43);
       after.mutable_tools()->SwapElements(1, 2);
       after.set_model("claude-opus-4-1");
     },
     30,
     {v1::REASON_MODEL_CHANGED, v1::REASON_TOOLS_ORDER_CHANGED,
      v1::REASON_SYSTEM_CHANGED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
    {"tools_change_hides_lookback",
     [](v1::Snapshot& before, v1::Snapshot& after) {
       SetChain(before, Chain(5));
       SetChain(after, Chain(40));
       *after.add_tools() = Tool("Grep", 4);
     },
     30,
     {v1::REASON_TOOLS_ADDED},
     v1::EVIDENCE_CLIENT_EXPLAINED},
};

class ReasonTest : public ::testing::TestWithParam<ReasonCase> {};

TEST_P(ReasonTest, ProducesExactlyItsReasons) {
  const ReasonCase& c = GetParam();
  v1::Snapshot before = BaseSnapshot("r1", 0);
  v1::Snapshot after = BaseSnapshot("r2", c.gap_seconds);
  c.change(before, after);
  const v1::TurnClassification result = ClassifyPair(before, after);
  ASSERT_EQ(result.verdict(), v1::VERDICT_BREAK);
  const v1::PromptCacheBreak& event = result.cache_break();
  EXPECT_THAT(event.reasons(), ElementsAreArray(c.reasons));
  EXPECT_EQ(event.primary_reason(), c.reasons.front());
  EXPECT_EQ(event.evidence(), c.evidence);
  EXPECT_EQ(event.missed_tokens(), 20000);
  EXPECT_EQ(event.expected_reuse_tokens(), 20000);
  EXPECT_DOUBLE_EQ(event.gap_seconds(), c.gap_seconds);
  EXPECT_EQ(event.previous_request_id(), "r1");
  EXPECT_EQ(event.request_id(), "r2");
}

INSTANTIATE_TEST_SUITE_P(AllReasons, ReasonTest,
                         ::testing::ValuesIn(kReasonCases),
                         [](const ::testing::TestParamInfo<ReasonCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(ClassifierTest, OrderChangeNamesTheMovedToolsAndFirstIndex) {
  v1::Snapshot before = BaseSnapshot("r1", 0);
  v1::Snapshot after = BaseSnapshot("r2", 10);
  after.mutable_tools()->SwapElements(1, 2);  // Read, Bash, Write
  const v1::PromptCacheBreak event = ClassifyPair(before, after).cache_break();
  EXPECT_EQ(event.reordered_tool_names_size(), 1);
  EXPECT_EQ(event.first_changed_tool_index(), 1);
  EXPECT_THAT(event.added_tool_names(), IsEmpty());
  EXPECT_THAT(event.schema_changed_tool_names(), IsEmpty());
  EXPECT_EQ(event.changed_tool_names_size(), 1);
}

TEST(ClassifierTest, SystemSectionsThatChangedAreNamed) {
  v1::Snapshot before = BaseSnapshot("r1", 0);
  v1::Snapshot after = BaseSnapshot("r2", 10);
  for (v1::Snapshot* s : {&before, &after}) {
    auto* base = s->add_system_sections();
    base->set_name("instructions");
    base->set_hash(1);
    auto* date = s->add_system_sections();
    date->set_name("date");
    date->set_hash(s == &before ? 20261129 : 20261130);
  }
  after.set_system_hash(43);
  const v1::PromptCacheBreak event = ClassifyPair(before, after).cache_break();
  EXPECT_EQ(event.primary_reason(), v1::REASON_SYSTEM_CHANGED);
  EXPECT_THAT(event.changed_system_sections(), ElementsAre("date"));
}

TEST(ClassifierTest, MessagesChangedNamesTheFirstChangedBlock) {
  v1::Snapshot before = BaseSnapshot("r1", 0);
  v1::Snapshot after = BaseSnapshot("r2", 10);
  SetChain(before, Chain(6));
  std::vector<uint64_t> chain = Chain(9);
  chain[2] = 5;
  SetChain(after, chain);
  EXPECT_EQ(
      ClassifyPair(before, after).cache_break().first_changed_message_block(),
      2);
}

// Thresholds: a break needs missed >= 2,000 and missed >= 5% of expected.
struct ThresholdCase {
  int64_t previous_write;
  int64_t current_read;
  v1::Verdict verdict;
};

TEST(ClassifierTest, ThresholdEdges) {
  const ThresholdCase cases[] = {
      {20000, 18000, v1::VERDICT_BREAK},   // missed 2,000 = 10%
      {20000, 18001, v1::VERDICT_OK},      // missed 1,999
      {100000, 95000, v1::VERDICT_BREAK},  // missed 5,000 = 5%
      {100000, 95001, v1::VERDICT_OK},     // missed 4,999 < 5%
      {20000, 20000, v1::VERDICT_OK},      // everything read
  };
  for (const ThresholdCase& c : cases) {
    const Turn previous =
        MakeTurn(BaseSnapshot("r1", 0), Usage(0, c.previous_write, 100));
    const Turn current =
        MakeTurn(BaseSnapshot("r2", 10),
                 Usage(c.current_read, c.previous_write - c.current_read, 100));
    const v1::TurnClassification result =
        Classify(kLane, &previous, current, {}, {});
    EXPECT_EQ(result.verdict(), c.verdict)
        << c.previous_write << " then read " << c.current_read;
    EXPECT_EQ(result.missed_tokens(), c.previous_write - c.current_read);
  }
}

TEST(ClassifierTest, ThresholdsAreConfigurable) {
  ClassifierOptions options;
  options.min_missed_tokens = 500;
  options.min_missed_ratio = 0.01;
  const Turn previous = MakeTurn(BaseSnapshot("r1", 0), Usage(0, 20000, 0));
  const Turn current = MakeTurn(BaseSnapshot("r2", 5), Usage(19000, 1000, 0));
  EXPECT_EQ(Classify(kLane, &previous, current, {}, options).verdict(),
            v1::VERDICT_BREAK);
  EXPECT_EQ(Classify(kLane, &previous, current, {}, {}).verdict(),
            v1::VERDICT_OK);
}

// A lane whose cache never works (a timestamp in the system prompt) reads
// nothing every turn; every turn that re-writes the prefix is a break.
TEST(ClassifierTest, NeverHittingLaneBreaksEveryTurn) {
  Turn previous = MakeTurn(BaseSnapshot("r0", 0), Usage(0, 15000, 50));
  for (int i = 1; i <= 3; ++i) {
    v1::Snapshot snapshot = BaseSnapshot(absl::StrCat("r", i), 10.0 * i);
    snapshot.set_system_hash(100 + i);
    const Turn current = MakeTurn(snapshot, Usage(0, 15000 + i * 200, 50));
    const v1::TurnClassification result =
        Classify(kLane, &previous, current, {}, {});
    ASSERT_EQ(result.verdict(), v1::VERDICT_BREAK) << "turn " << i;
    EXPECT_EQ(result.cache_break().primary_reason(), v1::REASON_SYSTEM_CHANGED);
    EXPECT_EQ(result.cache_break().previous_cache_read_tokens(), 0);
    EXPECT_EQ(result.cache_break().current_cache_read_tokens(), 0);
    previous = current;
  }
}

// Breakpoint on the system prompt only: the messages after it were never
// cached, so reading just the system prompt again is not a break.
TEST(ClassifierTest, UncachedTailAfterExplicitBreakpointIsNotMissed) {
  const Turn previous = MakeTurn(BaseSnapshot("r1", 0), Usage(5000, 0, 15000));
  const Turn current = MakeTurn(BaseSnapshot("r2", 10), Usage(5000, 0, 18000));
  const v1::TurnClassification result =
      Classify(kLane, &previous, current, {}, {});
  EXPECT_EQ(result.verdict(), v1::VERDICT_OK);
  EXPECT_EQ(result.expected_reuse_tokens(), 5000);
}

// Automatic prefix caching (OpenAI): the whole previous prompt is expected.
TEST(ClassifierTest, AutomaticCachingExpectsTheWholePreviousPrompt) {
  v1::Snapshot before = BaseSnapshot("r1", 0);
  v1::Snapshot after = BaseSnapshot("r2", 10);
  for (v1::Snapshot* s : {&before, &after}) {
    s->set_provider(v1::PROVIDER_OPENAI);
    s->set_model("gpt-5.1");
  }
  const Turn previous = MakeTurn(before, Usage(0, 0, 12000));
  const Turn current = MakeTurn(after, Usage(1024, 0, 11500));
  const v1::TurnClassification result =
      Classify(kLane, &previous, current, {}, {});
  ASSERT_EQ(result.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(result.expected_reuse_tokens(), 12000);
  EXPECT_EQ(result.missed_tokens(), 12000 - 1024);
}

TEST(ClassifierTest, ExpectedReuseIsCappedByThePromptSize) {
  const Turn previous = MakeTurn(BaseSnapshot("r1", 0), Usage(0, 50000, 0));
  // Compacted to 10,000 tokens, all read: nothing missed.
  const Turn current = MakeTurn(BaseSnapshot("r2", 10), Usage(10000, 0, 0));
  const v1::TurnClassification result =
      Classify(kLane, &previous, current, {}, {});
  EXPECT_EQ(result.expected_reuse_tokens(), 10000);
  EXPECT_EQ(result.verdict(), v1::VERDICT_OK);
}

TEST(ClassifierTest, FirstTurnIsAColdStart) {
  const Turn current = MakeTurn(BaseSnapshot("r1", 0), Usage(0, 20000, 0));
  EXPECT_EQ(Classify(kLane, nullptr, current, {}, {}).verdict(),
            v1::VERDICT_COLD_START);
}

TEST(ClassifierTest, HintMakesAnExpectedDrop) {
  for (v1::ExpectedDrop hint :
       {v1::EXPECTED_DROP_COMPACTION, v1::EXPECTED_DROP_CACHE_EDIT,
        v1::EXPECTED_DROP_RESUMED, v1::EXPECTED_DROP_ABORTED_PREVIOUS}) {
    v1::Snapshot after = BaseSnapshot("r2", 10);
    after.set_system_hash(1);
    after.set_expected_drop(hint);
    const Turn previous = MakeTurn(BaseSnapshot("r1", 0), Usage(0, 20000, 0));
    const v1::TurnClassification result =
        Classify(kLane, &previous, MakeTurn(after, Usage(0, 20000, 0)), {}, {});
    EXPECT_EQ(result.verdict(), v1::VERDICT_EXPECTED_DROP);
    EXPECT_EQ(result.expected_drop(), hint);
    EXPECT_FALSE(result.has_cache_break());
  }
}

TEST(ClassifierTest, BelowMinimumCacheableIsNotABreak) {
  // claude-sonnet-4-5 caches from 1,024 tokens.
  const Turn previous = MakeTurn(BaseSnapshot("r1", 0), Usage(0, 1000, 0));
  v1::Snapshot after = BaseSnapshot("r2", 10);
  after.set_system_hash(1);
  EXPECT_EQ(
      Classify(kLane, &previous, MakeTurn(after, Usage(0, 0, 1000)), {}, {})
          .verdict(),
      v1::VERDICT_BELOW_MIN_CACHEABLE);
  // Haiku 4.5 needs 4,096: 3,000 tokens are below it.
  after.set_model("claude-haiku-4-5");
  EXPECT_EQ(
      Classify(kLane, &previous, MakeTurn(after, Usage(0, 0, 3000)), {}, {})
          .verdict(),
      v1::VERDICT_BELOW_MIN_CACHEABLE);
}

TEST(ClassifierTest, MissingSnapshotGivesUnknownEvidence) {
  Turn previous = MakeTurn(BaseSnapshot("r1", 0), Usage(0, 20000, 0));
  Turn current = MakeTurn(BaseSnapshot("r2", 10), Usage(0, 20000, 0));
  current.snapshot = nullptr;
  const v1::PromptCacheBreak event =
      Classify(kLane, &previous, current, {}, {}).cache_break();
  EXPECT_EQ(event.evidence(), v1::EVIDENCE_UNKNOWN);
  EXPECT_THAT(event.reasons(), ElementsAre(v1::REASON_UNKNOWN));
}

TEST(ClassifierTest, TtlComesFromCacheControlThenWriteSplitThenDefault) {
  v1::Snapshot before = BaseSnapshot("r1", 0);
  v1::Snapshot after = BaseSnapshot("r2", 600);
  // Provider default: 5 minutes, so a 10-minute gap expired it.
  v1::PromptCacheBreak event = ClassifyPair(before, after).cache_break();
  EXPECT_EQ(event.ttl_seconds(), 300u);
  EXPECT_EQ(event.ttl_source(), v1::TTL_SOURCE_PROVIDER_DEFAULT);
  EXPECT_EQ(event.primary_reason(), v1::REASON_TTL_EXPIRED);
  // A 1 h write seen in a response: within the TTL, so eviction.
  event = ClassifyPair(before, after, {}, LaneContext{3600}).cache_break();
  EXPECT_EQ(event.ttl_source(), v1::TTL_SOURCE_RESPONSE_WRITE_SPLIT);
  EXPECT_EQ(event.primary_reason(), v1::REASON_LIKELY_PROVIDER_EVICTION);
  // The request asked for 1 h.
  before.mutable_cache_control()->set_ttl_seconds(3600);
  after.mutable_cache_control()->set_ttl_seconds(3600);
  event = ClassifyPair(before, after).cache_break();
  EXPECT_EQ(event.ttl_seconds(), 3600u);
  EXPECT_EQ(event.ttl_source(), v1::TTL_SOURCE_CACHE_CONTROL);
  // A configured default.
  ClassifierOptions options;
  options.default_ttl_seconds[v1::PROVIDER_ANTHROPIC] = 900;
  event = ClassifyPair(BaseSnapshot("r1", 0), BaseSnapshot("r2", 600), options)
              .cache_break();
  EXPECT_EQ(event.ttl_seconds(), 900u);
  EXPECT_EQ(event.primary_reason(), v1::REASON_LIKELY_PROVIDER_EVICTION);
}

TEST(ClassifierTest, TtlFromWriteSplit) {
  v1::NormalizedUsage usage = Usage(0, 100, 0);
  EXPECT_EQ(TtlFromWriteSplit(usage), 0u);
  usage.set_cache_write_5m_tokens(100);
  EXPECT_EQ(TtlFromWriteSplit(usage), 300u);
  usage.set_cache_write_1h_tokens(1);
  EXPECT_EQ(TtlFromWriteSplit(usage), 3600u);
}

TEST(ClassifierTest, CostOfMissedTokensWithAPriceTable) {
  ClassifierOptions options;
  options.prices["claude-sonnet-4-5"] = {3.0, 3.75, 6.0, 0.30};
  v1::Snapshot after = BaseSnapshot("r2", 10);
  after.set_system_hash(1);
  const v1::PromptCacheBreak event =
      ClassifyPair(BaseSnapshot("r1", 0), after, options).cache_break();
  ASSERT_TRUE(event.has_estimated_cost());
  // 20,000 tokens written at 3.75 instead of read at 0.30 per million.
  EXPECT_NEAR(event.estimated_extra_cost_usd(), 20000 * 3.45 / 1e6, 1e-9);
  EXPECT_FALSE(ClassifyPair(BaseSnapshot("r1", 0), after)
                   .cache_break()
                   .has_estimated_cost());
}

TEST(ClassifierTest, ProviderDiagnosticsAgreementIsRecorded) {
  v1::Snapshot after = BaseSnapshot("r2", 10);
  after.mutable_tools()->SwapElements(0, 2);
  const Turn previous = MakeTurn(BaseSnapshot("r1", 0), Usage(0, 20000, 0));
  Turn current = MakeTurn(after, Usage(0, 20000, 0));
  v1::ProviderCacheDiagnostics diagnostics;
  diagnostics.set_cache_miss_reason("tools_changed");
  diagnostics.set_cache_missed_input_tokens(19500);
  current.provider_diagnostics = diagnostics;
  v1::PromptCacheBreak event =
      Classify(kLane, &previous, current, {}, {}).cache_break();
  EXPECT_EQ(event.provider_agreement(), v1::PROVIDER_AGREEMENT_AGREE);
  EXPECT_EQ(event.provider_miss_reason(), "tools_changed");
  EXPECT_EQ(event.provider_missed_tokens(), 19500);
  diagnostics.set_cache_miss_reason("previous_message_not_found");
  current.provider_diagnostics = diagnostics;
  event = Classify(kLane, &previous, current, {}, {}).cache_break();
  EXPECT_EQ(event.provider_agreement(), v1::PROVIDER_AGREEMENT_DISAGREE);
  EXPECT_EQ(AgreementWith("something_new", v1::REASON_TTL_EXPIRED),
            v1::PROVIDER_AGREEMENT_UNSPECIFIED);
}

// OpenAI Responses' prompt_cache_diagnostics vocabulary maps onto ours too.
TEST(ClassifierTest, OpenAiDiagnosticsVocabularyMapsOntoOurReasons) {
  EXPECT_EQ(AgreementWith("tools_changed", v1::REASON_TOOLS_ADDED),
            v1::PROVIDER_AGREEMENT_AGREE);
  EXPECT_EQ(AgreementWith("input_changed", v1::REASON_MESSAGES_CHANGED),
            v1::PROVIDER_AGREEMENT_AGREE);
  EXPECT_EQ(AgreementWith("input_changed", v1::REASON_TOOLS_ADDED),
            v1::PROVIDER_AGREEMENT_DISAGREE);
  EXPECT_EQ(AgreementWith("reasoning_effort_changed",
                          v1::REASON_REQUEST_OPTIONS_CHANGED),
            v1::PROVIDER_AGREEMENT_AGREE);
  EXPECT_EQ(AgreementWith("service_tier_changed", v1::REASON_MODEL_CHANGED),
            v1::PROVIDER_AGREEMENT_DISAGREE);
  EXPECT_EQ(
      AgreementWith("comparison_response_not_found", v1::REASON_TTL_EXPIRED),
      v1::PROVIDER_AGREEMENT_AGREE);
  EXPECT_EQ(AgreementWith("context_compacted", v1::REASON_MESSAGES_CHANGED),
            v1::PROVIDER_AGREEMENT_AGREE);
  // The provider saw a hit where we report a break.
  EXPECT_EQ(AgreementWith("cache_hit", v1::REASON_LIKELY_PROVIDER_EVICTION),
            v1::PROVIDER_AGREEMENT_DISAGREE);
  EXPECT_EQ(AgreementWith("Tools_Changed", v1::REASON_TOOLS_REMOVED),
            v1::PROVIDER_AGREEMENT_AGREE);
}

// The seed documents' scenario: two MCP servers connect in racy order, so
// the same tool set arrives in a different order.
TEST(ClassifierTest, McpServersSettlingInDifferentOrderIsAnOrderChange) {
  v1::Snapshot before = BaseSnapshot("r1", 0);
  v1::Snapshot after = BaseSnapshot("r2", 20);
  for (const char* name : {"mcp__github__create_issue", "mcp__github__search",
                           "mcp__linear__list_issues"}) {
    *before.add_tools() = Tool(name, name[5]);
  }
  for (const char* name :
       {"mcp__linear__list_issues", "mcp__github__create_issue",
        "mcp__github__search"}) {
    *after.add_tools() = Tool(name, name[5]);
  }
  const v1::PromptCacheBreak event = ClassifyPair(before, after).cache_break();
  EXPECT_THAT(event.reasons(), ElementsAre(v1::REASON_TOOLS_ORDER_CHANGED));
  EXPECT_THAT(event.reordered_tool_names(),
              ElementsAre("mcp__linear__list_issues"));
  EXPECT_EQ(event.first_changed_tool_index(), 3);
}

// The seeds' deferred tool: not in the request until revealed, then added.
TEST(ClassifierTest, RevealedDeferredToolIsAnAddition) {
  v1::Snapshot before = BaseSnapshot("r1", 0);
  v1::Snapshot after = BaseSnapshot("r2", 20);
  // Sorted policy: the revealed tool lands in its sorted place.
  after.mutable_tools()->Clear();
  for (auto [name, hash] :
       {std::pair{"Read", 1}, {"WebFetch", 8}, {"Write", 2}, {"Bash", 3}}) {
    *after.add_tools() = Tool(name, hash);
  }
  const v1::PromptCacheBreak event = ClassifyPair(before, after).cache_break();
  EXPECT_THAT(event.reasons(), ElementsAre(v1::REASON_TOOLS_ADDED));
  EXPECT_THAT(event.added_tool_names(), ElementsAre("WebFetch"));
  EXPECT_EQ(event.first_changed_tool_index(), 1);
}

TEST(ClassifierTest, ReasonNamesMatchTheDesign) {
  EXPECT_EQ(ReasonName(v1::REASON_TOOLS_ORDER_CHANGED), "tools_order_changed");
  EXPECT_EQ(ReasonName(v1::REASON_BREAKPOINT_LOOKBACK_EXCEEDED),
            "breakpoint_lookback_exceeded");
}

}  // namespace
}  // namespace cachewatch
