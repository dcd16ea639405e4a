// The fleet end to end: three real daemons on one real PostgreSQL 15 (both
// started by the test), lanes whose turns land on different daemons, the
// same turn sent to two daemons at once, a daemon SIGKILLed under load and
// PostgreSQL restarted mid-run. Every acknowledged record is stored exactly
// once, breaks are stored once per turn whichever daemon saw them, and no
// acknowledged record is lost across the PostgreSQL restart. Skips only
// where the PostgreSQL binaries are absent.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cachewatch/v1/service.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/postgres_process.h"
#include "tests/support/turn_records.h"

namespace cachewatch {
namespace {

using testing::DaemonProcess;
using testing::PostgresProcess;
using testing::TempDir;
using testing::TurnSnapshot;
using testing::TurnUsage;

constexpr char kAgent[] = "fleet";

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PostgresProcess::Available()) {
      GTEST_SKIP() << PostgresProcess::SkipReason();
    }
    server_ = PostgresProcess::Start();
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->CreateDatabase("fleet"));
  }

  // Starts daemon i on the shared store.
  void StartDaemon(int i) {
    if (daemons_.size() <= static_cast<size_t>(i)) daemons_.resize(i + 1);
    daemons_[i] = std::make_unique<DaemonProcess>();
    ASSERT_TRUE(
        daemons_[i]->Start(dir_.File("unused-" + std::to_string(i) + ".db"),
                           {"--store=" + server_->Url("fleet")}));
    stubs_.resize(daemons_.size());
    stubs_[i] = daemons_[i]->NewStub();
  }

  std::string Sql(const std::string& sql) {
    return server_->Psql("fleet", sql);
  }

  TempDir dir_;
  std::unique_ptr<PostgresProcess> server_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
  std::vector<std::unique_ptr<v1::CacheWatch::Stub>> stubs_;
};

grpc::Status SendTurn(v1::CacheWatch::Stub& stub, const std::string& session,
                      int turn) {
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    v1::RecordSnapshotRequest request;
    *request.mutable_snapshot() = TurnSnapshot(kAgent, session, turn);
    v1::RecordSnapshotResponse response;
    grpc::Status status = stub.RecordSnapshot(&context, request, &response);
    if (!status.ok()) return status;
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  v1::RecordUsageRequest request;
  *request.mutable_usage() = TurnUsage(kAgent, session, turn);
  v1::RecordUsageResponse response;
  return stub.RecordUsage(&context, request, &response);
}

// Each lane's turns go round-robin over three daemons (the lane moves on
// every turn), and every turn is also sent to a second daemon at the same
// moment: each turn is stored once, with one verdict, and no break is
// stored twice.
TEST_F(FleetTest, LanesMovingBetweenDaemonsAreStoredOnce) {
  for (int i = 0; i < 3; ++i) StartDaemon(i);
  constexpr int kLanes = 6;
  constexpr int kTurns = 20;
  std::vector<std::thread> clients;
  std::atomic<int> failures{0};
  for (int lane = 0; lane < kLanes; ++lane) {
    clients.emplace_back([&, lane] {
      const std::string session = "lane-" + std::to_string(lane);
      for (int turn = 0; turn < kTurns; ++turn) {
        const int first = (lane + turn) % 3;
        const int second = (first + 1) % 3;
        grpc::Status a, b;
        std::thread twin([&] { b = SendTurn(*stubs_[second], session, turn); });
        a = SendTurn(*stubs_[first], session, turn);
        twin.join();
        if (!a.ok() || !b.ok()) ++failures;
      }
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(failures.load(), 0);
  for (auto& daemon : daemons_) EXPECT_EQ(daemon->Stop(), 0);

  EXPECT_EQ(Sql("SELECT count(*) FROM turns"), std::to_string(kLanes * kTurns));
  EXPECT_EQ(Sql("SELECT count(*) FROM (SELECT agent, session_id, lane, "
                "request_id FROM turns GROUP BY 1, 2, 3, 4 HAVING count(*) > "
                "1) AS duplicates"),
            "0");
  EXPECT_EQ(Sql("SELECT count(*) FROM turns WHERE snapshot_received = 1 AND "
                "usage_received = 1 AND verdict IS NOT NULL"),
            std::to_string(kLanes * kTurns));
  EXPECT_EQ(Sql("SELECT count(*) FROM (SELECT break_id FROM "
                "prompt_cache_breaks GROUP BY 1 HAVING count(*) > 1) AS d"),
            "0");
}

// Under load, one daemon is SIGKILLed (its clients fail over to the next)
// and PostgreSQL is restarted (clients retry UNAVAILABLE): every turn a
// daemon acknowledged is stored, once.
TEST_F(FleetTest, DaemonKillAndPostgresRestartLoseNothingAcknowledged) {
  for (int i = 0; i < 3; ++i) StartDaemon(i);
  std::atomic<bool> stop{false};
  std::atomic<bool> killed{false};
  std::mutex mu;
  std::set<std::string> acked;
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&, c] {
      const std::string session = "load-" + std::to_string(c);
      int daemon = c % 3;
      for (int turn = 0; !stop.load();) {
        if (killed.load() && daemon == 0) daemon = 1;  // Failover.
        const grpc::Status status = SendTurn(*stubs_[daemon], session, turn);
        if (status.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          acked.insert(session + "-" + std::to_string(turn));
          ++turn;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    });
  }
  auto acked_count = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return acked.size();
  };
  auto wait_for_more = [&](size_t more) {
    const size_t target = acked_count() + more;
    for (int i = 0; i < 600 && acked_count() < target; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return acked_count() >= target;
  };
  ASSERT_TRUE(wait_for_more(60));
  daemons_[0]->Kill();
  killed = true;
  ASSERT_TRUE(wait_for_more(60));
  ASSERT_TRUE(server_->Stop("immediate"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE(server_->Restart());
  EXPECT_TRUE(wait_for_more(60)) << "ingestion did not resume";
  stop = true;
  for (std::thread& client : clients) client.join();
  for (size_t i = 1; i < daemons_.size(); ++i) {
    EXPECT_EQ(daemons_[i]->Stop(), 0);
  }

  const std::string stored =
      Sql("SELECT string_agg(request_id, ',' ORDER BY request_id) FROM turns "
          "WHERE usage_received = 1");
  std::set<std::string> stored_ids;
  size_t start = 0;
  while (start < stored.size()) {
    size_t comma = stored.find(',', start);
    if (comma == std::string::npos) comma = stored.size();
    EXPECT_TRUE(stored_ids.insert(stored.substr(start, comma - start)).second)
        << "stored twice: " << stored.substr(start, comma - start);
    start = comma + 1;
  }
  for (const std::string& id : acked) {
    EXPECT_TRUE(stored_ids.contains(id)) << "acknowledged but lost: " << id;
  }
}

}  // namespace
}  // namespace cachewatch
