#include "daemon/core/snapshot_interner.h"

#include <gtest/gtest.h>

#include <memory>

namespace cachewatch {
namespace {

v1::Snapshot Full(const std::string& request_id) {
  v1::Snapshot snapshot;
  snapshot.set_agent("agent");
  snapshot.set_session_id("session");
  snapshot.set_request_id(request_id);
  snapshot.mutable_request_time()->set_seconds(100);
  snapshot.set_provider(v1::PROVIDER_ANTHROPIC);
  snapshot.set_model("claude-sonnet-4-5");
  snapshot.set_system_hash(7);
  v1::SystemSection* section = snapshot.add_system_sections();
  section->set_name("date");
  section->set_hash(8);
  snapshot.add_tools()->set_name("Read");
  v1::CacheControl* control = snapshot.mutable_cache_control();
  control->set_enabled(true);
  control->set_ttl_seconds(300);
  v1::Breakpoint* breakpoint = control->add_breakpoints();
  breakpoint->set_segment(v1::PROMPT_SEGMENT_MESSAGES);
  breakpoint->set_index(3);
  snapshot.set_options_hash(9);
  snapshot.add_message_chain(10);
  snapshot.set_expected_drop(v1::EXPECTED_DROP_ABORTED_PREVIOUS);
  snapshot.set_tool_order_policy(v1::TOOL_ORDER_POLICY_LEXICOGRAPHIC);
  return snapshot;
}

TEST(SnapshotInternerTest, KeepsTheSharedPartOnly) {
  SnapshotInterner interner;
  const std::shared_ptr<const v1::Snapshot> part =
      interner.Intern(Full("req-1"));
  EXPECT_EQ(part->provider(), v1::PROVIDER_ANTHROPIC);
  EXPECT_EQ(part->model(), "claude-sonnet-4-5");
  EXPECT_EQ(part->system_hash(), 7u);
  ASSERT_EQ(part->system_sections_size(), 1);
  EXPECT_EQ(part->system_sections(0).name(), "date");
  EXPECT_EQ(part->system_sections(0).hash(), 8u);
  EXPECT_TRUE(part->cache_control().enabled());
  EXPECT_EQ(part->cache_control().ttl_seconds(), 300u);
  ASSERT_EQ(part->cache_control().breakpoints_size(), 1);
  EXPECT_EQ(part->cache_control().breakpoints(0).index(), 3u);
  EXPECT_EQ(part->options_hash(), 9u);
  EXPECT_EQ(part->expected_drop(), v1::EXPECTED_DROP_ABORTED_PREVIOUS);
  EXPECT_EQ(part->tool_order_policy(), v1::TOOL_ORDER_POLICY_LEXICOGRAPHIC);
  // The lane's own fields, the tools and the message chain are not in it.
  EXPECT_TRUE(part->agent().empty());
  EXPECT_TRUE(part->session_id().empty());
  EXPECT_TRUE(part->request_id().empty());
  EXPECT_FALSE(part->has_request_time());
  EXPECT_EQ(part->tools_size(), 0);
  EXPECT_EQ(part->message_chain_size(), 0);
}

TEST(SnapshotInternerTest, EqualPartsShareOneCopy) {
  SnapshotInterner interner;
  v1::Snapshot other_lane = Full("req-2");
  other_lane.set_session_id("another session");
  other_lane.add_message_chain(11);
  other_lane.mutable_tools(0)->set_name("Bash");
  const auto a = interner.Intern(Full("req-1"));
  EXPECT_EQ(interner.Intern(other_lane).get(), a.get());
  EXPECT_EQ(interner.size(), 1u);
}

TEST(SnapshotInternerTest, EachSharedFieldMakesPartsDistinct) {
  SnapshotInterner interner;
  const auto base = interner.Intern(Full("req"));
  v1::Snapshot changed = Full("req");
  changed.set_model("claude-opus-4-1");
  EXPECT_NE(interner.Intern(changed), base);
  changed = Full("req");
  changed.set_provider(v1::PROVIDER_OPENAI);
  EXPECT_NE(interner.Intern(changed), base);
  changed = Full("req");
  changed.set_system_hash(70);
  EXPECT_NE(interner.Intern(changed), base);
  changed = Full("req");
  changed.mutable_system_sections(0)->set_hash(80);
  EXPECT_NE(interner.Intern(changed), base);
  changed = Full("req");
  changed.mutable_cache_control()->mutable_breakpoints(0)->set_index(4);
  EXPECT_NE(interner.Intern(changed), base);
  changed = Full("req");
  changed.clear_cache_control();
  EXPECT_NE(interner.Intern(changed), base);
  changed = Full("req");
  changed.set_options_hash(90);
  EXPECT_NE(interner.Intern(changed), base);
  changed = Full("req");
  changed.set_expected_drop(v1::EXPECTED_DROP_UNSPECIFIED);
  EXPECT_NE(interner.Intern(changed), base);
  changed = Full("req");
  changed.set_tool_order_policy(v1::TOOL_ORDER_POLICY_UNSPECIFIED);
  EXPECT_NE(interner.Intern(changed), base);
}

TEST(SnapshotInternerTest, PartsNoOneHoldsAreForgotten) {
  SnapshotInterner interner;
  const auto kept = interner.Intern(Full("req"));
  v1::Snapshot other = Full("req");
  other.set_model("other-model");
  interner.Intern(other);  // Dropped at once.
  interner.Sweep();
  EXPECT_EQ(interner.size(), 1u);
  EXPECT_EQ(interner.Intern(Full("req")), kept);
}

}  // namespace
}  // namespace cachewatch
