// The ingest pipeline's seams, with a fake RecordStore and fake exporters
// (export only after a commit; a failed commit exports nothing; a slow or
// failing exporter does not stall ingest), and the pipeline driven from many
// threads at once over a real SqliteStore on a temporary file: lanes on
// shared tracker shards, multi-record commits, maintenance and a live break
// subscriber all run concurrently (the ThreadSanitizer build runs this;
// scripts/run-sanitizers.sh).
#include "daemon/pipeline/ingest_pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "daemon/core/test_turns.h"
#include "daemon/exporter/async_turn_exporter.h"
#include "daemon/exporter/prometheus/turn_metrics.h"
#include "daemon/exporter/turn_exporter.h"
#include "daemon/exporter/watch/break_hub.h"
#include "daemon/store/columns.h"
#include "daemon/store/sqlite/sqlite_store.h"
#include "daemon/telemetry/test_scrape.h"
#include "daemon/util/temp_dir.h"

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

// A RecordStore in memory that answers every Write() with `status` and
// calls `on_write` first (to look at the exporters while the commit is in
// progress). With `defer_async`, WriteAsync() takes the writes as Write()
// does but keeps its callback in `deferred` for the test to call.
class FakeStore final : public RecordStore {
 public:
  void WriteAsync(std::vector<StoreWrite> writes, WriteDone done) override {
    if (!defer_async) {
      RecordStore::WriteAsync(std::move(writes), std::move(done));
      return;
    }
    const absl::Status written = Write(std::move(writes));
    EXPECT_TRUE(written.ok()) << written;
    deferred.push_back(std::move(done));
  }
  absl::Status Write(std::vector<StoreWrite> writes) override {
    if (on_write) on_write();
    std::lock_guard<std::mutex> lock(mutex);
    ++write_calls;
    write_sizes.push_back(writes.size());
    if (status.ok()) {
      for (StoreWrite& write : writes) written.push_back(std::move(write));
    }
    return status;
  }
  absl::StatusOr<std::vector<RestoredLane>> LoadRecentLanes(int64_t) override {
    return std::vector<RestoredLane>();
  }
  absl::StatusOr<std::optional<RestoredLane>> LoadLane(
      const LaneKey&, const LaneLookup&) override {
    return std::nullopt;
  }
  absl::StatusOr<std::optional<v1::TurnClassification>> FindClassification(
      const LaneKey&, const std::string&) override {
    return std::nullopt;
  }
  absl::StatusOr<int64_t> DeleteOlderThan(int64_t) override { return 0; }
  absl::Status ProbeWritable() override { return absl::OkStatus(); }
  size_t queued_records() const override { return 0; }
  StoreStats stats() const override { return {}; }

  absl::Status status;
  std::function<void()> on_write;
  bool defer_async = false;
  std::vector<WriteDone> deferred;
  std::mutex mutex;
  int write_calls = 0;              // Guarded by mutex.
  std::vector<size_t> write_sizes;  // Records of each call; guarded by mutex.
  std::vector<StoreWrite> written;  // Guarded by mutex.
};

// Remembers every turn exported to it.
class RecordingExporter final : public TurnExporter {
 public:
  absl::Status Export(const std::vector<ClassifiedTurn>& turns) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const ClassifiedTurn& turn : turns) {
      request_ids_.push_back(turn.turn.request_id);
    }
    return absl::OkStatus();
  }
  std::vector<std::string> request_ids() {
    std::lock_guard<std::mutex> lock(mutex_);
    return request_ids_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> request_ids_;  // Guarded by mutex_.
};

class FailingExporter final : public TurnExporter {
 public:
  absl::Status Export(const std::vector<ClassifiedTurn>&) override {
    return absl::InternalError("exporter broke");
  }
};

// Blocks every Export() until Release().
class BlockingExporter final : public TurnExporter {
 public:
  absl::Status Export(const std::vector<ClassifiedTurn>&) override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++entered_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return released_; });
    return absl::OkStatus();
  }
  void WaitUntilEntered() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return entered_ > 0; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int entered_ = 0;        // Guarded by mutex_.
  bool released_ = false;  // Guarded by mutex_.
};

// A pipeline over a FakeStore exporting to `exporter`.
class PipelineSeamsTest : public ::testing::Test {
 protected:
  void Start(TurnExporter* exporter) {
    pipeline_ = std::make_unique<IngestPipeline>(
        PipelineOptions{}, &store_, exporter, &telemetry_, &clock_);
  }

  // A snapshot and its usage for request `id` of the base lane, committed
  // together: the usage releases the turn's classification. Returns the
  // two records as answered.
  std::pair<ProcessedRecord, ProcessedRecord> RecordTurn(const std::string& id,
                                                         double seconds) {
    ProcessedRecord snapshot =
        pipeline_->ProcessSnapshot(BaseSnapshot(id, seconds));
    ProcessedRecord usage = pipeline_->ProcessUsage(
        UsageRecord(id, seconds + 1, Usage(0, 20000, 50)));
    pipeline_->Commit({&snapshot, &usage});
    return {std::move(snapshot), std::move(usage)};
  }

  std::optional<double> Metric(const std::string& name,
                               const testing::LabelMap& labels = {}) {
    return testing::Find(testing::Scrape(*telemetry_.registry()), name, labels);
  }

  FixedClock clock_;
  FakeStore store_;
  Telemetry telemetry_{std::make_shared<prometheus::Registry>(), "test"};
  std::unique_ptr<IngestPipeline> pipeline_;
};

TEST_F(PipelineSeamsTest, ExportsOnlyAfterTheCommit) {
  RecordingExporter exporter;
  Start(&exporter);
  std::vector<std::string> seen_during_commit = {"not called"};
  store_.on_write = [&] { seen_during_commit = exporter.request_ids(); };

  const auto [snapshot, usage] = RecordTurn("r1", 10);

  EXPECT_TRUE(snapshot.status.ok()) << snapshot.status;
  EXPECT_TRUE(usage.status.ok()) << usage.status;
  EXPECT_THAT(seen_during_commit, ::testing::IsEmpty());
  EXPECT_THAT(exporter.request_ids(), ::testing::ElementsAre("r1"));
  EXPECT_EQ(store_.write_calls, 1);
  // The snapshot, the usage and the classification, in one write.
  EXPECT_EQ(store_.written.size(), 3u);
}

TEST_F(PipelineSeamsTest, ASnapshotWriteCarriesItsToolListsStoreHash) {
  Start(nullptr);
  const v1::Snapshot snapshot = BaseSnapshot("r1", 10);
  ASSERT_GT(snapshot.tools_size(), 0);
  ProcessedRecord record = pipeline_->ProcessSnapshot(snapshot);
  ASSERT_TRUE(record.status.ok()) << record.status;
  ASSERT_FALSE(record.writes.empty());
  const auto* write = std::get_if<SnapshotWrite>(&record.writes[0]);
  ASSERT_NE(write, nullptr);
  // The stores store the carried hash as it is (record.h).
  EXPECT_EQ(write->tool_list_hash, ToolListHash(snapshot.tools()));
}

TEST_F(PipelineSeamsTest, AFailedCommitAnswersItsStatusAndExportsNothing) {
  RecordingExporter exporter;
  Start(&exporter);
  store_.status = absl::UnavailableError("disk full");

  const auto [snapshot, usage] = RecordTurn("r1", 10);

  EXPECT_EQ(snapshot.status, store_.status);
  EXPECT_EQ(usage.status, store_.status);
  EXPECT_THAT(exporter.request_ids(), ::testing::IsEmpty());
  EXPECT_EQ(Metric("cachewatch_ingest_records_total",
                   {{"kind", "usage"}, {"outcome", "unavailable"}}),
            1);
  EXPECT_EQ(Metric("cachewatch_store_commit_failures_total"), 1);
  EXPECT_EQ(Metric("cachewatch_store_healthy"), 0);
}

TEST_F(PipelineSeamsTest, ARejectedRecordIsNeitherWrittenNorExported) {
  RecordingExporter exporter;
  Start(&exporter);
  v1::Snapshot invalid = BaseSnapshot("", 10);  // No request id.
  ProcessedRecord record = pipeline_->ProcessSnapshot(std::move(invalid));
  pipeline_->Commit({&record});

  EXPECT_EQ(record.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.write_calls, 0);
  EXPECT_THAT(exporter.request_ids(), ::testing::IsEmpty());
  EXPECT_EQ(Metric("cachewatch_ingest_records_total",
                   {{"kind", "snapshot"}, {"outcome", "invalid"}}),
            1);
}

TEST_F(PipelineSeamsTest, CommitAsyncAnswersAndExportsFromTheStoresCallback) {
  RecordingExporter exporter;
  Start(&exporter);
  store_.defer_async = true;
  ProcessedRecord snapshot = pipeline_->ProcessSnapshot(BaseSnapshot("r1", 10));
  ProcessedRecord usage =
      pipeline_->ProcessUsage(UsageRecord("r1", 11, Usage(0, 20000, 50)));
  int done = 0;
  pipeline_->CommitAsync({&snapshot, &usage}, [&] { ++done; });

  // Handed to the store in one write, but neither answered nor exported
  // before the store calls back.
  EXPECT_EQ(done, 0);
  EXPECT_EQ(store_.write_calls, 1);
  EXPECT_EQ(store_.written.size(), 3u);
  EXPECT_THAT(exporter.request_ids(), ::testing::IsEmpty());
  EXPECT_EQ(Metric("cachewatch_ingest_records_total",
                   {{"kind", "usage"}, {"outcome", "accepted"}})
                .value_or(0),
            0);
  ASSERT_EQ(store_.deferred.size(), 1u);

  store_.deferred[0](absl::OkStatus());
  EXPECT_EQ(done, 1);
  EXPECT_TRUE(snapshot.status.ok()) << snapshot.status;
  EXPECT_TRUE(usage.status.ok()) << usage.status;
  EXPECT_THAT(exporter.request_ids(), ::testing::ElementsAre("r1"));
  EXPECT_EQ(Metric("cachewatch_ingest_records_total",
                   {{"kind", "usage"}, {"outcome", "accepted"}}),
            1);
}

TEST_F(PipelineSeamsTest, CommitAsyncRefusedByAFullQueueAnswersItsStatus) {
  RecordingExporter exporter;
  Start(&exporter);
  store_.defer_async = true;
  ProcessedRecord snapshot = pipeline_->ProcessSnapshot(BaseSnapshot("r1", 10));
  ProcessedRecord usage =
      pipeline_->ProcessUsage(UsageRecord("r1", 11, Usage(0, 20000, 50)));
  int done = 0;
  pipeline_->CommitAsync({&snapshot, &usage}, [&] { ++done; });
  ASSERT_EQ(store_.deferred.size(), 1u);
  const absl::Status full = absl::ResourceExhaustedError(
      "store queue full: ... (--max-queued-records)");
  store_.deferred[0](full);

  EXPECT_EQ(done, 1);
  EXPECT_EQ(snapshot.status, full);
  EXPECT_EQ(usage.status, full);
  EXPECT_THAT(exporter.request_ids(), ::testing::IsEmpty());
  EXPECT_EQ(Metric("cachewatch_ingest_records_total",
                   {{"kind", "snapshot"}, {"outcome", "resource_exhausted"}}),
            1);
  // Back-pressure, not an unhealthy store.
  EXPECT_NE(Metric("cachewatch_store_healthy"), 0);
}

TEST_F(PipelineSeamsTest, CommitAsyncAnswersARejectedRecordAtOnce) {
  RecordingExporter exporter;
  Start(&exporter);
  store_.defer_async = true;
  ProcessedRecord record = pipeline_->ProcessSnapshot(BaseSnapshot("", 10));
  int done = 0;
  pipeline_->CommitAsync({&record}, [&] { ++done; });

  EXPECT_EQ(done, 1);
  EXPECT_EQ(record.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.write_calls, 0);
  EXPECT_TRUE(store_.deferred.empty());
}

TEST_F(PipelineSeamsTest, AFailingExporterIsCountedAndOthersStillExport) {
  FailingExporter failing;
  RecordingExporter recording;
  ExportFanOut fan_out({&failing, &recording});
  Start(&fan_out);

  const auto [snapshot, usage] = RecordTurn("r1", 10);

  EXPECT_TRUE(usage.status.ok()) << usage.status;
  EXPECT_THAT(recording.request_ids(), ::testing::ElementsAre("r1"));
  EXPECT_EQ(Metric("cachewatch_export_failures_total"), 1);
  EXPECT_EQ(Metric("cachewatch_ingest_records_total",
                   {{"kind", "usage"}, {"outcome", "accepted"}}),
            1);
}

TEST_F(PipelineSeamsTest, ABlockedExporterDoesNotStallIngest) {
  BlockingExporter blocking;
  RecordingExporter recording;
  std::optional<AsyncTurnExporter> slow;
  slow.emplace(&blocking, /*max_queued_batches=*/1);
  ExportFanOut fan_out({&*slow, &recording});
  Start(&fan_out);

  // The first batch occupies the blocked exporter, the second fills its
  // queue; the later ones are dropped for it, not waited for.
  RecordTurn("r1", 10);
  blocking.WaitUntilEntered();
  constexpr int kTurns = 5;
  for (int i = 2; i <= kTurns; ++i) {
    const auto [snapshot, usage] = RecordTurn("r" + std::to_string(i), i * 10);
    EXPECT_TRUE(usage.status.ok()) << usage.status;
  }

  EXPECT_EQ(recording.request_ids().size(), static_cast<size_t>(kTurns));
  EXPECT_EQ(Metric("cachewatch_ingest_records_total",
                   {{"kind", "usage"}, {"outcome", "accepted"}}),
            kTurns);
  EXPECT_EQ(Metric("cachewatch_export_failures_total"), kTurns - 2);
  blocking.Release();
  slow->Flush();
  EXPECT_EQ(slow->failed_batches(), 0);
  slow.reset();
}

// A clock the test moves.
class SettableClock : public Clock {
 public:
  int64_t NowMicros() const override { return now.load(); }
  std::atomic<int64_t> now{kT0 + 3600 * kSecond};
};

// The turns Maintain() classifies itself (usages whose snapshot never came)
// are written in parts of at most max_records_per_write records (a commit's
// work stays bounded), each committed, then exported.
TEST(PipelineMaintenanceTest, ExpiredTurnsAreWrittenInBoundedParts) {
  FakeStore store;
  RecordingExporter exporter;
  Telemetry telemetry{std::make_shared<prometheus::Registry>(), "test"};
  SettableClock clock;
  PipelineOptions options;
  options.shards = 1;
  options.max_records_per_write = 2;
  IngestPipeline pipeline(options, &store, &exporter, &telemetry, &clock);
  for (int i = 0; i < 5; ++i) {
    v1::Usage usage =
        UsageRecord("r" + std::to_string(i), 10 + i, Usage(0, 20000, 50));
    usage.set_session_id("s" + std::to_string(i));
    ProcessedRecord record = pipeline.ProcessUsage(usage);
    pipeline.Commit({&record});
    ASSERT_TRUE(record.status.ok()) << record.status;
  }
  ASSERT_TRUE(exporter.request_ids().empty());  // Waiting for snapshots.
  store.write_sizes.clear();
  clock.now += options.tracker.usage_grace_us + kSecond;
  pipeline.Maintain();
  EXPECT_THAT(store.write_sizes, ::testing::ElementsAre(2u, 2u, 1u));
  EXPECT_EQ(exporter.request_ids().size(), 5u);
}

constexpr int kThreads = 4;
constexpr int kLanesPerThread = 3;
constexpr int kTurns = 30;
// The system prompt changes at these turns, and the cache read drops to 0.
bool IsBreakTurn(int turn) { return turn % 10 == 5; }
constexpr int kBreaksPerLane = 3;

class IngestPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions store_options;
    store_options.path = dir_.File("cachewatch.db");
    auto store = SqliteStore::Open(store_options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    PipelineOptions options;
    options.shards = 2;  // Several lanes, and threads, per shard.
    options.tracker.max_lanes = max_lanes_;
    pipeline_ = std::make_unique<IngestPipeline>(
        options, store_.get(), &exporters_, &telemetry_, &clock_);
  }
  void TearDown() override {
    pipeline_.reset();
    store_.reset();
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
  TempDir dir_{"pipeline-test"};
  FixedClock clock_;
  std::shared_ptr<prometheus::Registry> registry_ =
      std::make_shared<prometheus::Registry>();
  Telemetry telemetry_{registry_, "test"};
  TurnMetrics metrics_{MetricsOptions{}, registry_};
  BreakHub hub_{1000};
  ExportFanOut exporters_{{&metrics_, &hub_}};
  std::unique_ptr<SqliteStore> store_;
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
