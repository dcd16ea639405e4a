// Overload end to end: a full write queue pushes back with
// RESOURCE_EXHAUSTED instead of growing, and a million distinct lanes keep
// the daemon's memory bounded by the lane cap (peak RSS is measured).
//
// CACHEWATCH_TEST_LANES overrides the number of lanes (default 1,000,000).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <semaphore>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cachewatch/v1/service.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/stored_rows.h"
#include "tests/support/turn_records.h"

namespace cachewatch {
namespace {

using testing::DaemonProcess;
using testing::StoredRowSet;
using testing::TempDir;
using testing::TurnSnapshot;

// Every lane has one turn, turn 0, sent by this agent.
constexpr char kAgent[] = "overload";

// The store's writer is held up by another process's write transaction, so
// records pile up: beyond --max-queued-records the daemon refuses at once
// with RESOURCE_EXHAUSTED; the records it queued are acknowledged once the
// lock is gone, and exactly those are stored.
TEST(OverloadTest, FullWriteQueuePushesBackThenDrains) {
  TempDir dir;
  const std::string db = dir.File("cachewatch.db");
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(db, {"--max-queued-records=4"}));

  sqlite3* blocker = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &blocker), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(blocker, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr),
            SQLITE_OK);

  constexpr int kClients = 24;
  std::mutex mutex;
  std::set<std::string> acked;
  std::set<std::string> refused;
  std::vector<std::string> unexpected;
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto stub = daemon.NewStub();
      const std::string session = "client-" + std::to_string(c);
      grpc::ClientContext context;
      v1::RecordSnapshotRequest request;
      *request.mutable_snapshot() = TurnSnapshot(kAgent, session, 0);
      v1::RecordSnapshotResponse response;
      const grpc::Status status =
          stub->RecordSnapshot(&context, request, &response);
      std::lock_guard<std::mutex> lock(mutex);
      if (status.ok()) {
        acked.insert(session);
      } else if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        refused.insert(session);
        ++answered;
      } else {
        unexpected.push_back(status.error_message());
      }
    });
  }
  // At most 4 records wait in the queue and at most 4 more in the batch the
  // blocked writer holds; every other client is refused while it is blocked.
  constexpr int kMostAccepted = 8;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (answered < kClients - kMostAccepted &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_TRUE(acked.empty()) << "acknowledged while the store was locked";
    EXPECT_GE(refused.size(), static_cast<size_t>(kClients - kMostAccepted));
  }
  const std::string metrics =
      testing::HttpGet(daemon.metrics_address(), "/metrics");
  EXPECT_LE(testing::MetricValue(metrics, {"cachewatch_store_queue_records"}),
            4);
  ASSERT_EQ(sqlite3_exec(blocker, "ROLLBACK", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(blocker);
  for (std::thread& client : clients) client.join();

  EXPECT_TRUE(unexpected.empty()) << unexpected.front();
  EXPECT_EQ(acked.size() + refused.size(), static_cast<size_t>(kClients));
  EXPECT_GE(acked.size(), 1u);
  EXPECT_EQ(StoredRowSet(db, "SELECT session_id FROM turns"), acked);
  EXPECT_EQ(daemon.Stop(), 0);
}

// The daemon's thread count, from /proc/<pid>/status.
int64_t DaemonThreads(pid_t pid) {
  return testing::ProcessStatusKiB(pid, "Threads");  // A count, not KiB.
}

// Unary calls waiting for a commit wait in the store's queue, not on a
// thread each (the group commit answers them through a callback): with the
// store's writer held up by another process's transaction, many concurrent
// calls add hardly a thread to the daemon, and once the lock is gone every
// one is acknowledged and stored.
TEST(OverloadTest, UnaryCallsWaitingForACommitHoldNoThread) {
  TempDir dir;
  const std::string db = dir.File("cachewatch.db");
  DaemonProcess daemon;
  // The blocked commit waits for the lock for as long as the test needs.
  ASSERT_TRUE(daemon.Start(db, {"--store-timeout-ms=120000"}));
  // Calls before, so that the threads the daemon starts on its first calls
  // are counted in the baseline.
  std::set<std::string> sessions;
  {
    std::vector<std::thread> warmup;
    for (int c = 0; c < 4; ++c) {
      warmup.emplace_back([&daemon, c] {
        auto stub = daemon.NewStub();
        for (int i = 0; i < 4; ++i) {
          grpc::ClientContext context;
          v1::RecordSnapshotRequest request;
          *request.mutable_snapshot() =
              TurnSnapshot(kAgent, "warmup-" + std::to_string(c * 4 + i), 0);
          v1::RecordSnapshotResponse response;
          EXPECT_TRUE(stub->RecordSnapshot(&context, request, &response).ok());
        }
      });
    }
    for (std::thread& thread : warmup) thread.join();
    for (int s = 0; s < 16; ++s) sessions.insert("warmup-" + std::to_string(s));
  }
  const int64_t threads_before = DaemonThreads(daemon.pid());
  ASSERT_GT(threads_before, 0);

  sqlite3* blocker = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &blocker), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(blocker, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr),
            SQLITE_OK);
  constexpr int kCalls = 48;
  std::mutex mutex;
  std::vector<std::string> failed;
  std::vector<std::thread> clients;
  for (int c = 0; c < kCalls; ++c) {
    const std::string session = "client-" + std::to_string(c);
    sessions.insert(session);
    clients.emplace_back([&, session] {
      auto stub = daemon.NewStub();
      grpc::ClientContext context;
      v1::RecordSnapshotRequest request;
      *request.mutable_snapshot() = TurnSnapshot(kAgent, session, 0);
      v1::RecordSnapshotResponse response;
      const grpc::Status status =
          stub->RecordSnapshot(&context, request, &response);
      if (!status.ok()) {
        std::lock_guard<std::mutex> lock(mutex);
        failed.push_back(session + ": " + status.error_message());
      }
    });
  }
  // Every call but the one whose commit is blocked waits in the store's
  // queue (the gauge is refreshed every second).
  int64_t queued = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (queued < kCalls - 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    queued = static_cast<int64_t>(testing::MetricValue(
        testing::HttpGet(daemon.metrics_address(), "/metrics"),
        {"cachewatch_store_queue_records"}));
  }
  EXPECT_EQ(queued, kCalls - 1);
  const int64_t threads_waiting = DaemonThreads(daemon.pid());
  // A thread per waiting call would be kCalls more.
  EXPECT_LT(threads_waiting - threads_before, kCalls / 4)
      << threads_before << " threads before, " << threads_waiting << " with "
      << kCalls << " calls waiting";

  ASSERT_EQ(sqlite3_exec(blocker, "ROLLBACK", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(blocker);
  for (std::thread& client : clients) client.join();
  EXPECT_TRUE(failed.empty()) << failed.front();
  EXPECT_EQ(StoredRowSet(db, "SELECT session_id FROM turns"), sessions);
  EXPECT_EQ(daemon.Stop(), 0);
}

// Sends one snapshot on each of `lanes` distinct lanes over `streams` Record
// streams, at most `window` records unacknowledged per stream; returns the
// number of records not acknowledged OK. (Each lane then holds an unpaired
// snapshot, its largest state, until the cap evicts it.)
int64_t SendDistinctLanes(DaemonProcess& daemon, int64_t first_lane,
                          int64_t lanes, int streams, int window) {
  std::atomic<int64_t> failures{0};
  std::vector<std::thread> threads;
  for (int s = 0; s < streams; ++s) {
    threads.emplace_back([&, s] {
      auto stub = daemon.NewStub();
      grpc::ClientContext context;
      auto stream = stub->Record(&context);
      std::counting_semaphore<> credits(window);
      std::thread reader([&] {
        v1::RecordAck ack;
        while (stream->Read(&ack)) {
          if (ack.code() != 0) ++failures;
          credits.release();
        }
      });
      v1::RecordRequest snapshot;
      for (int64_t lane = first_lane + s; lane < first_lane + lanes;
           lane += streams) {
        const std::string session = "lane-" + std::to_string(lane);
        *snapshot.mutable_snapshot() = TurnSnapshot(kAgent, session, 0);
        credits.acquire();
        if (!stream->Write(snapshot)) break;
      }
      stream->WritesDone();
      reader.join();
      if (!stream->Finish().ok()) ++failures;
    });
  }
  for (std::thread& thread : threads) thread.join();
  return failures;
}

TEST(OverloadTest, MillionDistinctLanesKeepMemoryBounded) {
  const char* lanes_env = std::getenv("CACHEWATCH_TEST_LANES");
  const int64_t lanes =
      lanes_env != nullptr ? std::atoll(lanes_env) : 1'000'000;
  constexpr int64_t kLaneCap = 10'000;
  const int64_t warmup = std::min<int64_t>(lanes / 10, 100'000);
  TempDir dir;
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(dir.File("cachewatch.db"),
                           {"--max-lanes=" + std::to_string(kLaneCap)}));

  ASSERT_EQ(SendDistinctLanes(daemon, 0, warmup, 4, 500), 0);
  const int64_t warm_peak_kib =
      testing::ProcessStatusKiB(daemon.pid(), "VmHWM");
  ASSERT_EQ(SendDistinctLanes(daemon, warmup, lanes - warmup, 4, 500), 0);
  const int64_t final_peak_kib =
      testing::ProcessStatusKiB(daemon.pid(), "VmHWM");

  const std::string metrics =
      testing::HttpGet(daemon.metrics_address(), "/metrics");
  EXPECT_LE(testing::MetricValue(metrics, {"cachewatch_active_lanes"}),
            kLaneCap);
  EXPECT_EQ(testing::MetricValue(metrics,
                                 {"cachewatch_ingest_records_total{",
                                  "kind=\"snapshot\"", "outcome=\"accepted\""}),
            lanes);
  // Growing the lane count 10x (or more) past the cap leaves the peak
  // resident set where the cap put it: allow 64 MiB for the allocator and
  // SQLite's page cache, far below what 900,000 more lanes would take.
  EXPECT_LT(final_peak_kib - warm_peak_kib, 64 * 1024);
  std::printf(
      "lanes=%lld cap=%lld peak RSS after %lld lanes: %lld KiB, "
      "after %lld lanes: %lld KiB\n",
      static_cast<long long>(lanes), static_cast<long long>(kLaneCap),
      static_cast<long long>(warmup), static_cast<long long>(warm_peak_kib),
      static_cast<long long>(lanes), static_cast<long long>(final_peak_kib));
  EXPECT_EQ(daemon.Stop(), 0);
}

}  // namespace
}  // namespace cachewatch
