// Durability end to end: an acknowledged record survives SIGKILL and a
// graceful shutdown under load, and lanes continue across the restart.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cachewatch/v1/service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/stored_rows.h"
#include "tests/support/turn_records.h"

namespace cachewatch {
namespace {

using testing::DaemonProcess;
using testing::StoredRowSet;
using testing::TempDir;
using testing::TurnSnapshot;
using testing::TurnUsage;

// The agent every simulated client reports as.
constexpr char kAgent[] = "load";

// Several clients record turns as fast as they can; every acknowledged
// usage's request id is kept.
class Load {
 public:
  Load(const std::string& address, int clients) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, address, c] {
        auto stub = v1::CacheWatch::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
        const std::string session = "session-" + std::to_string(c);
        for (int turn = 0; !stop_; ++turn) {
          grpc::ClientContext snapshot_context;
          v1::RecordSnapshotRequest snapshot;
          *snapshot.mutable_snapshot() = TurnSnapshot(kAgent, session, turn);
          v1::RecordSnapshotResponse ignored;
          if (!stub->RecordSnapshot(&snapshot_context, snapshot, &ignored)
                   .ok()) {
            return;
          }
          grpc::ClientContext usage_context;
          v1::RecordUsageRequest usage;
          *usage.mutable_usage() = TurnUsage(kAgent, session, turn);
          v1::RecordUsageResponse response;
          if (!stub->RecordUsage(&usage_context, usage, &response).ok()) {
            return;
          }
          std::lock_guard<std::mutex> lock(mutex_);
          acked_.insert(usage.usage().request_id());
        }
      });
    }
  }
  ~Load() { Join(); }
  void Join() {
    stop_ = true;
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }
  std::set<std::string> acked() {
    std::lock_guard<std::mutex> lock(mutex_);
    return acked_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::set<std::string> acked_;  // Guarded by mutex_.
};

std::set<std::string> StoredUsages(const std::string& db_path) {
  return StoredRowSet(db_path,
                      "SELECT request_id FROM turns WHERE usage_received = 1");
}

void ExpectAllStored(const std::set<std::string>& acked,
                     const std::set<std::string>& stored) {
  int missing = 0;
  for (const std::string& id : acked) {
    if (!stored.contains(id)) ++missing;
  }
  EXPECT_EQ(missing, 0) << "of " << acked.size() << " acknowledged usages";
}

TEST(DurabilityTest, AcknowledgedRecordsSurviveSigkill) {
  TempDir dir;
  const std::string db = dir.File("cachewatch.db");
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(db));
  std::set<std::string> acked;
  {
    Load load(daemon.grpc_address(), 4);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    daemon.Kill();
    load.Join();
    acked = load.acked();
  }
  ASSERT_GT(acked.size(), 50u);
  ExpectAllStored(acked, StoredUsages(db));

  // The lane continues: its next turn is diffed against its pre-crash turn.
  DaemonProcess restarted;
  ASSERT_TRUE(restarted.Start(db));
  auto stub = restarted.NewStub();
  int last_turn = -1;
  for (const std::string& id : StoredRowSet(
           db, "SELECT request_id FROM turns WHERE snapshot_received = 1")) {
    if (id.rfind("session-0-", 0) == 0) {
      last_turn = std::max(last_turn, std::stoi(id.substr(10)));
    }
  }
  ASSERT_GE(last_turn, 0);
  // A snapshot acknowledged without its usage still waits for it after the
  // restart, as without one: the client resends the usage it had no ack for.
  if (!StoredUsages(db).contains("session-0-" + std::to_string(last_turn))) {
    grpc::ClientContext context;
    v1::RecordUsageRequest request;
    *request.mutable_usage() = TurnUsage(kAgent, "session-0", last_turn);
    v1::RecordUsageResponse response;
    ASSERT_TRUE(stub->RecordUsage(&context, request, &response).ok());
  }
  v1::Snapshot next = TurnSnapshot(kAgent, "session-0", last_turn + 100);
  next.set_system_hash(2);
  grpc::ClientContext snapshot_context;
  v1::RecordSnapshotRequest snapshot;
  *snapshot.mutable_snapshot() = next;
  v1::RecordSnapshotResponse ignored;
  ASSERT_TRUE(stub->RecordSnapshot(&snapshot_context, snapshot, &ignored).ok());
  grpc::ClientContext usage_context;
  v1::RecordUsageRequest usage;
  *usage.mutable_usage() = TurnUsage(kAgent, "session-0", last_turn + 100);
  usage.mutable_usage()->mutable_normalized()->set_cache_read_tokens(0);
  usage.mutable_usage()->mutable_normalized()->set_cache_write_tokens(20000);
  v1::RecordUsageResponse response;
  ASSERT_TRUE(stub->RecordUsage(&usage_context, usage, &response).ok());
  ASSERT_EQ(response.classification().verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(response.classification().cache_break().primary_reason(),
            v1::REASON_SYSTEM_CHANGED);
  EXPECT_EQ(response.classification().cache_break().previous_request_id(),
            "session-0-" + std::to_string(last_turn));
  EXPECT_EQ(restarted.Stop(), 0);
}

TEST(DurabilityTest, GracefulShutdownUnderLoadLosesNothingAndExitsZero) {
  TempDir dir;
  const std::string db = dir.File("cachewatch.db");
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(db));
  Load load(daemon.grpc_address(), 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_EQ(daemon.Stop(), 0);
  load.Join();
  const std::set<std::string> acked = load.acked();
  ASSERT_GT(acked.size(), 20u);
  ExpectAllStored(acked, StoredUsages(db));
}

grpc::Status SendSnapshot(v1::CacheWatch::Stub& stub,
                          const v1::Snapshot& snapshot) {
  grpc::ClientContext context;
  v1::RecordSnapshotRequest request;
  *request.mutable_snapshot() = snapshot;
  v1::RecordSnapshotResponse ignored;
  return stub.RecordSnapshot(&context, request, &ignored);
}

grpc::health::v1::HealthCheckResponse::ServingStatus Health(
    const std::string& address, const std::string& service) {
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  health->Check(&context, request, &response);
  return response.status();
}

// The database reaches its size cap mid-run: records are refused with
// UNAVAILABLE (never acknowledged), the daemon stays up and says it is
// degraded, and once an operator deletes rows, ingest resumes with nothing
// acknowledged lost.
TEST(DurabilityTest, FullStoreRefusesDegradesAndRecovers) {
  TempDir dir;
  const std::string db = dir.File("cachewatch.db");
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(db, {"--max-db-mb=1"}));
  auto stub = daemon.NewStub();
  std::set<std::string> acked;
  for (int turn = 0; turn < 5; ++turn) {
    ASSERT_TRUE(
        SendSnapshot(*stub, TurnSnapshot(kAgent, "precious", turn)).ok());
    acked.insert("precious-" + std::to_string(turn));
  }
  grpc::Status refused;
  auto filler = [](int turn) {
    v1::Snapshot snapshot = TurnSnapshot(kAgent, "filler", turn);
    for (int block = 0; block < 4000; ++block) {
      snapshot.add_message_chain(turn * 100000 + block);
    }
    return snapshot;
  };
  int turn = 0;
  for (; turn < 400 && refused.ok(); ++turn) {
    refused = SendSnapshot(*stub, filler(turn));
  }
  ASSERT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused.error_message();
  EXPECT_EQ(SendSnapshot(*stub, filler(turn + 1)).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // Degraded, not down.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Health(daemon.grpc_address(), "cachewatch.v1.CacheWatch") !=
             grpc::health::v1::HealthCheckResponse::NOT_SERVING &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Health(daemon.grpc_address(), "cachewatch.v1.CacheWatch"),
            grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Health(daemon.grpc_address(), ""),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(testing::MetricValue(
                testing::HttpGet(daemon.metrics_address(), "/metrics"),
                {"cachewatch_store_healthy"}),
            0);

  // The operator makes room.
  sqlite3* admin = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &admin), SQLITE_OK);
  sqlite3_busy_timeout(admin, 5000);
  ASSERT_EQ(sqlite3_exec(admin, "DELETE FROM turns WHERE session_id = 'filler'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(admin);

  grpc::Status resumed =
      SendSnapshot(*stub, TurnSnapshot(kAgent, "precious", 100));
  EXPECT_TRUE(resumed.ok()) << resumed.error_message();
  acked.insert("precious-100");
  const std::set<std::string> stored = StoredRowSet(
      db, "SELECT request_id FROM turns WHERE session_id = 'precious'");
  EXPECT_EQ(stored, acked);
  EXPECT_EQ(daemon.Stop(), 0);
}

// A daemon started on a store with no room left says NOT_SERVING before any
// write fails (it probes at start), and SERVING again once an operator makes
// room, with no write needed; the recovery log line carries no stale error.
TEST(DurabilityTest, StartedOnAFullStoreSaysNotServingUntilThereIsRoom) {
  TempDir dir;
  const std::string db = dir.File("cachewatch.db");
  {
    DaemonProcess filling;
    ASSERT_TRUE(filling.Start(db, {"--max-db-mb=1"}));
    auto stub = filling.NewStub();
    grpc::Status refused;
    for (int turn = 0; turn < 400 && refused.ok(); ++turn) {
      v1::Snapshot snapshot = TurnSnapshot(kAgent, "filler", turn);
      for (int block = 0; block < 4000; ++block) {
        snapshot.add_message_chain(turn * 100000 + block);
      }
      refused = SendSnapshot(*stub, snapshot);
    }
    ASSERT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(filling.Stop(), 0);
  }

  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(db, {"--max-db-mb=1"}));
  EXPECT_EQ(Health(daemon.grpc_address(), "cachewatch.v1.CacheWatch"),
            grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Health(daemon.grpc_address(), ""),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(testing::MetricValue(
                testing::HttpGet(daemon.metrics_address(), "/metrics"),
                {"cachewatch_store_healthy"}),
            0);

  sqlite3* admin = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &admin), SQLITE_OK);
  sqlite3_busy_timeout(admin, 5000);
  ASSERT_EQ(sqlite3_exec(admin, "DELETE FROM turns WHERE session_id = 'filler'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(admin);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Health(daemon.grpc_address(), "cachewatch.v1.CacheWatch") !=
             grpc::health::v1::HealthCheckResponse::SERVING &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Health(daemon.grpc_address(), "cachewatch.v1.CacheWatch"),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_TRUE(
      SendSnapshot(*daemon.NewStub(), TurnSnapshot(kAgent, "after", 0)).ok());
  EXPECT_EQ(daemon.Stop(), 0);
  const std::string logs = daemon.Logs();
  const size_t cannot = logs.find("\"msg\":\"store cannot write\"");
  EXPECT_NE(cannot, std::string::npos) << logs;
  const size_t again = logs.find("\"msg\":\"store writable again\"");
  ASSERT_NE(again, std::string::npos) << logs;
  const size_t line_start = logs.rfind('\n', again) + 1;
  const std::string line =
      logs.substr(line_start, logs.find('\n', again) - line_start);
  EXPECT_EQ(line.find("error"), std::string::npos) << line;
}

}  // namespace
}  // namespace cachewatch
