#include "daemon/exporter/turn_exporter.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <vector>

#include "daemon/exporter/async_turn_exporter.h"

namespace cachewatch {
namespace {

std::vector<ClassifiedTurn> Turns(int count) {
  std::vector<ClassifiedTurn> turns(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    turns[static_cast<size_t>(i)].turn.request_id = "r" + std::to_string(i);
  }
  return turns;
}

// Counts turns; answers `status`; blocks while `blocked`.
class CountingExporter final : public TurnExporter {
 public:
  explicit CountingExporter(absl::Status status = absl::OkStatus())
      : status_(std::move(status)) {}
  absl::Status Export(const std::vector<ClassifiedTurn>& turns) override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++calls_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return !blocked_; });
    turns_ += static_cast<int>(turns.size());
    return status_;
  }
  void Block() {
    std::lock_guard<std::mutex> lock(mutex_);
    blocked_ = true;
  }
  void Unblock() {
    std::lock_guard<std::mutex> lock(mutex_);
    blocked_ = false;
    changed_.notify_all();
  }
  void WaitForCalls(int calls) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return calls_ >= calls; });
  }
  int turns() {
    std::lock_guard<std::mutex> lock(mutex_);
    return turns_;
  }

 private:
  const absl::Status status_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int calls_ = 0;         // Guarded by mutex_.
  int turns_ = 0;         // Guarded by mutex_.
  bool blocked_ = false;  // Guarded by mutex_.
};

TEST(ExportFanOutTest, ExportsToEveryExporterWhateverTheOthersAnswer) {
  CountingExporter failing(absl::InternalError("broken"));
  CountingExporter working;
  ExportFanOut fan_out({&failing, &working});
  const absl::Status status = fan_out.Export(Turns(3));
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(failing.turns(), 3);
  EXPECT_EQ(working.turns(), 3);
}

TEST(ExportFanOutTest, NamesHowManyFailed) {
  CountingExporter first(absl::InternalError("first"));
  CountingExporter second(absl::UnavailableError("second"));
  ExportFanOut fan_out({&first, &second});
  const absl::Status status = fan_out.Export(Turns(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(), "2 exporters failed: first");
}

TEST(ExportFanOutTest, NoExportersIsOk) {
  ExportFanOut fan_out({});
  EXPECT_TRUE(fan_out.Export(Turns(2)).ok());
}

TEST(AsyncTurnExporterTest, HandsBatchesToItsThread) {
  CountingExporter exporter;
  AsyncTurnExporter async(&exporter, 4);
  EXPECT_TRUE(async.Export(Turns(2)).ok());
  EXPECT_TRUE(async.Export(Turns(3)).ok());
  async.Flush();
  EXPECT_EQ(exporter.turns(), 5);
  EXPECT_EQ(async.failed_batches(), 0);
}

TEST(AsyncTurnExporterTest, DropsBatchesBeyondItsQueueInsteadOfBlocking) {
  CountingExporter exporter;
  exporter.Block();
  AsyncTurnExporter async(&exporter, 1);
  ASSERT_TRUE(async.Export(Turns(1)).ok());
  exporter.WaitForCalls(1);                  // Taken off the queue, blocked.
  EXPECT_TRUE(async.Export(Turns(1)).ok());  // Queued.
  const absl::Status dropped = async.Export(Turns(7));
  EXPECT_EQ(dropped.code(), absl::StatusCode::kResourceExhausted);
  exporter.Unblock();
  async.Flush();
  EXPECT_EQ(exporter.turns(), 2);
}

TEST(AsyncTurnExporterTest, CountsTheWrappedExportersFailures) {
  CountingExporter failing(absl::InternalError("broken"));
  AsyncTurnExporter async(&failing, 4);
  EXPECT_TRUE(async.Export(Turns(1)).ok());
  async.Flush();
  EXPECT_EQ(async.failed_batches(), 1);
}

TEST(AsyncTurnExporterTest, DestructionExportsWhatIsQueued) {
  CountingExporter exporter;
  {
    AsyncTurnExporter async(&exporter, 8);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(async.Export(Turns(1)).ok());
  }
  EXPECT_EQ(exporter.turns(), 5);
}

}  // namespace
}  // namespace cachewatch
