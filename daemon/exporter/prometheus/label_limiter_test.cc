#include "daemon/exporter/prometheus/label_limiter.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace cachewatch {
namespace {

TEST(LabelLimiterTest, AdmitsTheFirstValuesAndReportsTheRestAsOther) {
  // Values in arrival order against a cap of 3.
  static const struct {
    std::string value;
    std::string reported;
    bool overflowed;
  } kCases[] = {
      {"claude-sonnet-4-5", "claude-sonnet-4-5", false},
      {"gpt-5", "gpt-5", false},
      {"claude-sonnet-4-5", "claude-sonnet-4-5", false},  // Already admitted.
      {"", "unknown", false},  // Empty: "unknown" takes the third slot.
      {"gemini-2.5-pro", "other", true},
      {"", "unknown", false},
      {"gpt-5", "gpt-5", false},  // Admission is permanent.
      {"deepseek-chat", "other", true},
      {"gemini-2.5-pro", "other", true},  // Every occurrence overflows.
  };
  LabelLimiter limiter(3);
  for (const auto& c : kCases) {
    bool overflowed = !c.overflowed;
    EXPECT_EQ(limiter.Limit(c.value, &overflowed), c.reported) << c.value;
    EXPECT_EQ(overflowed, c.overflowed) << c.value;
  }
}

TEST(LabelLimiterTest, ZeroCapReportsEverythingAsOther) {
  LabelLimiter limiter(0);
  bool overflowed = false;
  EXPECT_EQ(limiter.Limit("agent", &overflowed), "other");
  EXPECT_TRUE(overflowed);
}

TEST(LabelLimiterTest, ConcurrentCallersNeverAdmitMoreThanTheCap) {
  constexpr int kThreads = 4;
  constexpr int kValuesPerThread = 500;
  constexpr size_t kCap = 50;
  LabelLimiter limiter(kCap);
  std::vector<std::vector<std::string>> reported(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&limiter, &reported, t] {
      for (int i = 0; i < kValuesPerThread; ++i) {
        bool overflowed = false;
        reported[t].push_back(limiter.Limit(
            "model-" + std::to_string(t * kValuesPerThread + i), &overflowed));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  size_t admitted = 0;
  for (const auto& values : reported) {
    for (const std::string& value : values) admitted += value != "other";
  }
  EXPECT_EQ(admitted, kCap);
}

}  // namespace
}  // namespace cachewatch
