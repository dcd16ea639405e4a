#include "daemon/exporter/watch/break_hub.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace cachewatch {
namespace {

using std::chrono::milliseconds;

v1::PromptCacheBreak Break(const std::string& agent, v1::Reason reason) {
  v1::PromptCacheBreak event;
  event.set_agent(agent);
  event.set_primary_reason(reason);
  event.set_break_id(agent + std::to_string(reason));
  return event;
}

TEST(BreakHubTest, EverySubscriberGetsWhatMatchesItsFilter) {
  BreakHub hub(8);
  auto all = hub.Subscribe({});
  v1::WatchBreaksRequest only_order;
  only_order.set_reason(v1::REASON_TOOLS_ORDER_CHANGED);
  auto order = hub.Subscribe(only_order);
  hub.Publish(Break("a", v1::REASON_SYSTEM_CHANGED));
  hub.Publish(Break("b", v1::REASON_TOOLS_ORDER_CHANGED));

  v1::PromptCacheBreak next;
  ASSERT_EQ(all->Next(milliseconds(10), &next), BreakHub::NextResult::kBreak);
  EXPECT_EQ(next.agent(), "a");
  ASSERT_EQ(all->Next(milliseconds(10), &next), BreakHub::NextResult::kBreak);
  EXPECT_EQ(next.agent(), "b");
  ASSERT_EQ(order->Next(milliseconds(10), &next), BreakHub::NextResult::kBreak);
  EXPECT_EQ(next.agent(), "b");
  EXPECT_EQ(order->Next(milliseconds(10), &next),
            BreakHub::NextResult::kTimeout);
}

TEST(BreakHubTest, SlowSubscriberIsCutOffOthersAreNot) {
  BreakHub hub(4);
  auto slow = hub.Subscribe({});
  auto fast = hub.Subscribe({});
  v1::PromptCacheBreak next;
  for (int i = 0; i < 10; ++i) {
    hub.Publish(Break("a", v1::REASON_TTL_EXPIRED));
    ASSERT_EQ(fast->Next(milliseconds(10), &next),
              BreakHub::NextResult::kBreak);
  }
  EXPECT_EQ(slow->Next(milliseconds(10), &next),
            BreakHub::NextResult::kOverflowed);
}

TEST(BreakHubTest, NextWakesOnPublishFromAnotherThread) {
  BreakHub hub(4);
  auto subscription = hub.Subscribe({});
  std::thread publisher([&] {
    std::this_thread::sleep_for(milliseconds(20));
    hub.Publish(Break("late", v1::REASON_MODEL_CHANGED));
  });
  v1::PromptCacheBreak next;
  EXPECT_EQ(subscription->Next(milliseconds(5000), &next),
            BreakHub::NextResult::kBreak);
  EXPECT_EQ(next.agent(), "late");
  publisher.join();
}

TEST(BreakHubTest, CloseEndsSubscriptionsAndReleasedOnesAreDropped) {
  BreakHub hub(4);
  auto kept = hub.Subscribe({});
  hub.Subscribe({});  // Released at once.
  EXPECT_EQ(hub.subscriber_count(), 1u);
  hub.Close();
  v1::PromptCacheBreak next;
  EXPECT_EQ(kept->Next(milliseconds(10), &next), BreakHub::NextResult::kClosed);
  EXPECT_EQ(hub.Subscribe({})->Next(milliseconds(1), &next),
            BreakHub::NextResult::kClosed);
}

}  // namespace
}  // namespace cachewatch
