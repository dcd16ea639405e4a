// Durability end to end: an acknowledged record survives SIGKILL and a
// graceful shutdown under load, and lanes continue across the restart.
#include <google/protobuf/util/time_util.h>
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
#include "tests/support/daemon_process.h"

namespace cachewatch {
namespace {

using google::protobuf::util::TimeUtil;
using testing::DaemonProcess;
using testing::TempDir;

const int64_t kStartUs =
    TimeUtil::TimestampToMicroseconds(TimeUtil::GetCurrentTime()) -
    300LL * 1'000'000;

v1::Snapshot Snapshot(const std::string& session, int turn) {
  v1::Snapshot snapshot;
  snapshot.set_agent("load");
  snapshot.set_session_id(session);
  snapshot.set_request_id(session + "-" + std::to_string(turn));
  *snapshot.mutable_request_time() =
      TimeUtil::MicrosecondsToTimestamp(kStartUs + turn * 1'000'000LL);
  snapshot.set_provider(v1::PROVIDER_ANTHROPIC);
  snapshot.set_model("claude-sonnet-4-5");
  snapshot.set_system_hash(1);
  for (const char* name : {"Bash", "Read", "Write"}) {
    v1::ToolRef* tool = snapshot.add_tools();
    tool->set_name(name);
    tool->set_schema_hash(name[0]);
  }
  return snapshot;
}

v1::Usage Usage(const std::string& session, int turn) {
  v1::Usage usage;
  usage.set_agent("load");
  usage.set_session_id(session);
  usage.set_request_id(session + "-" + std::to_string(turn));
  *usage.mutable_response_time() =
      TimeUtil::MicrosecondsToTimestamp(kStartUs + turn * 1'000'000LL + 500);
  usage.set_provider(v1::PROVIDER_ANTHROPIC);
  usage.mutable_normalized()->set_cache_read_tokens(turn == 0 ? 0 : 20000);
  usage.mutable_normalized()->set_cache_write_tokens(turn == 0 ? 20000 : 100);
  return usage;
}

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
          *snapshot.mutable_snapshot() = Snapshot(session, turn);
          v1::RecordSnapshotResponse ignored;
          if (!stub->RecordSnapshot(&snapshot_context, snapshot, &ignored)
                   .ok()) {
            return;
          }
          grpc::ClientContext usage_context;
          v1::RecordUsageRequest usage;
          *usage.mutable_usage() = Usage(session, turn);
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
  sqlite3* db = nullptr;
  std::set<std::string> ids;
  EXPECT_EQ(
      sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
      SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT request_id FROM turns WHERE usage_received = 1",
                     -1, &statement, nullptr);
  while (sqlite3_step(statement) == SQLITE_ROW) {
    ids.insert(
        reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)));
  }
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return ids;
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
  for (const std::string& id : StoredUsages(db)) {
    if (id.rfind("session-0-", 0) == 0) {
      last_turn = std::max(last_turn, std::stoi(id.substr(10)));
    }
  }
  ASSERT_GE(last_turn, 0);
  v1::Snapshot next = Snapshot("session-0", last_turn + 100);
  next.set_system_hash(2);
  grpc::ClientContext snapshot_context;
  v1::RecordSnapshotRequest snapshot;
  *snapshot.mutable_snapshot() = next;
  v1::RecordSnapshotResponse ignored;
  ASSERT_TRUE(stub->RecordSnapshot(&snapshot_context, snapshot, &ignored).ok());
  grpc::ClientContext usage_context;
  v1::RecordUsageRequest usage;
  *usage.mutable_usage() = Usage("session-0", last_turn + 100);
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

}  // namespace
}  // namespace cachewatch
