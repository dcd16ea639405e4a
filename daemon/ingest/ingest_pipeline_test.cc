// The ingest pipeline driven from many threads at once, over a real store on
// a temporary file: lanes on shared tracker shards, multi-record commits,
// maintenance and a live break subscriber all run concurrently (the
// ThreadSanitizer build runs this; scripts/run-sanitizers.sh).
#include "daemon/ingest/ingest_pipeline.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "daemon/core/test_turns.h"

namespace cachewatch {
namespace {

using testing::BaseSnapshot;
using testing::kSecond;
using testing::kT0;
using testing::Usage;
using testing::UsageRecord;

class FixedClock : public Clock {
 public:
  int64_t NowMicros() const override { return kT0 + 3600 * kSecond; }
};

constexpr int kThreads = 4;
constexpr int kLanesPerThread = 3;
constexpr int kTurns = 30;
// The system prompt changes at these turns, and the cache read drops to 0.
bool IsBreakTurn(int turn) { return turn % 10 == 5; }
constexpr int kBreaksPerLane = 3;

class IngestPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "pipeline-test-XXXXXX")
            .string();
    dir_ = mkdtemp(pattern.data());
    StoreOptions store_options;
    store_options.path = dir_ + "/cachewatch.db";
    auto store = Store::Open(store_options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    PipelineOptions options;
    options.shards = 2;  // Several lanes, and threads, per shard.
    options.tracker.max_lanes = max_lanes_;
    pipeline_ = std::make_unique<IngestPipeline>(options, store_.get(),
                                                 &metrics_, &hub_, &clock_);
  }
  void TearDown() override {
    pipeline_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Records every turn of lane `session` in order, one commit per turn.
  void RecordLane(const std::string& session) {
    for (int turn = 0; turn < kTurns; ++turn) {
      const std::string id = session + "-" + std::to_string(turn);
      v1::Snapshot snapshot = BaseSnapshot(id, turn * 10);
      snapshot.set_session_id(session);
      int system_version = 0;
      for (int t = 0; t <= turn; ++t) system_version += IsBreakTurn(t);
      snapshot.set_system_hash(42 + system_version);
      v1::Usage usage =
          UsageRecord(id, turn * 10 + 2,
                      turn == 0 || IsBreakTurn(turn) ? Usage(0, 20000, 50)
                                                     : Usage(20000, 100, 50));
      usage.set_session_id(session);
      ProcessedRecord processed_snapshot = pipeline_->ProcessSnapshot(snapshot);
      ProcessedRecord processed_usage = pipeline_->ProcessUsage(usage);
      pipeline_->Commit({&processed_snapshot, &processed_usage});
      if (!processed_snapshot.status.ok() || !processed_usage.status.ok()) {
        ++failures_;
      }
    }
  }

  // Stored breaks, each checked to be a system change.
  int StoredSystemChangeBreaks() {
    int stored_breaks = 0;
    v1::ListBreaksRequest request;
    request.set_page_size(100);
    while (true) {
      auto page = store_->ListBreaks(request);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) return -1;
      for (const v1::PromptCacheBreak& stored : page->breaks()) {
        EXPECT_EQ(stored.primary_reason(), v1::REASON_SYSTEM_CHANGED)
            << stored.ShortDebugString();
        ++stored_breaks;
      }
      if (page->next_page_token().empty()) return stored_breaks;
      request.set_page_token(page->next_page_token());
    }
  }

  size_t max_lanes_ = TrackerOptions{}.max_lanes;
  std::string dir_;
  FixedClock clock_;
  Metrics metrics_{MetricsOptions{}, "test"};
  BreakHub hub_{1000};
  std::unique_ptr<Store> store_;
  std::unique_ptr<IngestPipeline> pipeline_;
  std::atomic<int> failures_{0};
};

TEST_F(IngestPipelineTest, ConcurrentLanesAreEachClassifiedInOrder) {
  auto subscription = hub_.Subscribe(v1::WatchBreaksRequest());
  std::atomic<bool> done{false};
  std::atomic<int> watched{0};
  std::thread watcher([&] {
    v1::PromptCacheBreak event;
    while (true) {
      const auto result =
          subscription->Next(std::chrono::milliseconds(10), &event);
      if (result == BreakHub::NextResult::kBreak) {
        ++watched;
      } else if (done) {
        return;
      }
    }
  });
  std::thread maintainer([&] {
    while (!done) {
      pipeline_->Maintain();
      EXPECT_LE(pipeline_->lane_count(),
                static_cast<size_t>(kThreads * kLanesPerThread));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([this, t] {
      // Interleave this thread's lanes so each commit races the others.
      std::vector<std::thread> lanes;
      for (int l = 0; l < kLanesPerThread; ++l) {
        lanes.emplace_back([this, t, l] {
          RecordLane("s" + std::to_string(t) + "-" + std::to_string(l));
        });
      }
      for (std::thread& lane : lanes) lane.join();
    });
  }
  for (std::thread& writer : writers) writer.join();
  // Let the watcher drain what was published before it stops.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (watched < kThreads * kLanesPerThread * kBreaksPerLane &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  done = true;
  watcher.join();
  maintainer.join();

  EXPECT_EQ(failures_, 0);
  EXPECT_EQ(pipeline_->lane_count(),
            static_cast<size_t>(kThreads * kLanesPerThread));
  EXPECT_EQ(watched, kThreads * kLanesPerThread * kBreaksPerLane);
  int stored_breaks = 0;
  v1::ListBreaksRequest request;
  request.set_page_size(100);
  while (true) {
    auto page = store_->ListBreaks(request);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const v1::PromptCacheBreak& stored : page->breaks()) {
      EXPECT_EQ(stored.primary_reason(), v1::REASON_SYSTEM_CHANGED)
          << stored.ShortDebugString();
      ++stored_breaks;
    }
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  EXPECT_EQ(stored_breaks, kThreads * kLanesPerThread * kBreaksPerLane);
}

// Two lanes held in memory (one per shard) for twelve lanes written at
// once: lanes are evicted and read back from the store all the time, by
// concurrent misses, and every verdict is the one they get in memory.
class EvictingPipelineTest : public IngestPipelineTest {
 protected:
  EvictingPipelineTest() { max_lanes_ = 2; }
};

TEST_F(EvictingPipelineTest, EvictedLanesAreReadBackWithEveryVerdictIntact) {
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads * kLanesPerThread; ++t) {
    writers.emplace_back([this, t] { RecordLane("s" + std::to_string(t)); });
  }
  for (std::thread& writer : writers) writer.join();
  EXPECT_EQ(failures_, 0);
  EXPECT_LE(pipeline_->lane_count(), 2u);
  EXPECT_EQ(StoredSystemChangeBreaks(),
            kThreads * kLanesPerThread * kBreaksPerLane);
}

// A usage retried long after, when its lane remembers only its 16 newest
// answers: only the store can tell, and it does.
TEST_F(IngestPipelineTest, ARetryOfATurnTheLaneForgotIsAnsweredFromTheStore) {
  RecordLane("s1");
  ASSERT_EQ(failures_, 0);
  v1::Usage retry = UsageRecord("s1-5", 5 * 10 + 2, Usage(0, 20000, 50));
  retry.set_session_id("s1");
  ProcessedRecord processed = pipeline_->ProcessUsage(retry);
  pipeline_->Commit({&processed});
  ASSERT_TRUE(processed.status.ok()) << processed.status;
  EXPECT_TRUE(processed.duplicate);
  ASSERT_EQ(processed.classification.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(processed.classification.cache_break().previous_request_id(),
            "s1-4");
  EXPECT_EQ(StoredSystemChangeBreaks(), kBreaksPerLane);
}

}  // namespace
}  // namespace cachewatch
