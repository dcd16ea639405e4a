#include "cachewatch/client/breakpoints.h"

#include "gtest/gtest.h"

namespace cachewatch::client {
namespace {

v1::Breakpoint* AddBreakpoint(v1::Snapshot& snapshot, v1::PromptSegment segment,
                              uint32_t index) {
  v1::Breakpoint* breakpoint =
      snapshot.mutable_cache_control()->add_breakpoints();
  breakpoint->set_segment(segment);
  breakpoint->set_index(index);
  return breakpoint;
}

// Three tools, two system sections; the message blocks are the argument's.
v1::Snapshot ThreeToolsTwoSections() {
  v1::Snapshot snapshot;
  for (const char* name : {"Read", "Write", "Bash"}) {
    snapshot.add_tools()->set_name(name);
  }
  snapshot.add_system_sections()->set_name("base");
  snapshot.add_system_sections()->set_name("date");
  return snapshot;
}

TEST(BreakpointsTest, CountsTheBlocksOfItsSegmentAfterEachBreakpoint) {
  v1::Snapshot snapshot = ThreeToolsTwoSections();
  AddBreakpoint(snapshot, v1::PROMPT_SEGMENT_TOOLS, 2);
  AddBreakpoint(snapshot, v1::PROMPT_SEGMENT_TOOLS, 0);
  AddBreakpoint(snapshot, v1::PROMPT_SEGMENT_SYSTEM, 0);
  AddBreakpoint(snapshot, v1::PROMPT_SEGMENT_MESSAGES, 6);
  SetBlocksAfter(snapshot, 10);
  const auto& breakpoints = snapshot.cache_control().breakpoints();
  EXPECT_EQ(breakpoints[0].blocks_after(), 0u);
  EXPECT_EQ(breakpoints[1].blocks_after(), 2u);
  EXPECT_EQ(breakpoints[2].blocks_after(), 1u);
  EXPECT_EQ(breakpoints[3].blocks_after(), 3u);
}

TEST(BreakpointsTest, LeavesPastTheEndUnspecifiedAndGivenBreakpointsAlone) {
  v1::Snapshot snapshot = ThreeToolsTwoSections();
  AddBreakpoint(snapshot, v1::PROMPT_SEGMENT_TOOLS, 3);
  AddBreakpoint(snapshot, v1::PROMPT_SEGMENT_MESSAGES, 4);
  AddBreakpoint(snapshot, v1::PROMPT_SEGMENT_UNSPECIFIED, 0);
  AddBreakpoint(snapshot, v1::PROMPT_SEGMENT_TOOLS, 0)->set_blocks_after(7);
  SetBlocksAfter(snapshot, 4);
  const auto& breakpoints = snapshot.cache_control().breakpoints();
  EXPECT_FALSE(breakpoints[0].has_blocks_after());
  EXPECT_FALSE(breakpoints[1].has_blocks_after());
  EXPECT_FALSE(breakpoints[2].has_blocks_after());
  EXPECT_EQ(breakpoints[3].blocks_after(), 7u);
}

TEST(BreakpointsTest, SystemBreakpointsNeedNamedSections) {
  v1::Snapshot snapshot;
  AddBreakpoint(snapshot, v1::PROMPT_SEGMENT_SYSTEM, 0);
  SetBlocksAfter(snapshot, 1);
  EXPECT_FALSE(snapshot.cache_control().breakpoints(0).has_blocks_after());
}

}  // namespace
}  // namespace cachewatch::client
