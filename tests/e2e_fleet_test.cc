// The fleet end to end: three real daemons on one real PostgreSQL 15 (both
// started by the test), lanes whose turns land on different daemons, the
// same turn sent to two daemons at once, a daemon SIGKILLed under load and
// PostgreSQL restarted mid-run. Every acknowledged record is stored exactly
// once, breaks are stored once per turn whichever daemon saw them, and no
// acknowledged record is lost across the PostgreSQL restart. Skips only
// where the PostgreSQL binaries are absent.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cachewatch/v1/service.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/postgres_process.h"
#include "tests/support/stream_load.h"
#include "tests/support/turn_records.h"

namespace cachewatch {
namespace {

using testing::DaemonProcess;
using testing::PostgresProcess;
using testing::StreamLoad;
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

grpc::Status SendRecords(v1::CacheWatch::Stub& stub,
                         const v1::Snapshot& snapshot, const v1::Usage& usage) {
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    v1::RecordSnapshotRequest request;
    *request.mutable_snapshot() = snapshot;
    v1::RecordSnapshotResponse response;
    grpc::Status status = stub.RecordSnapshot(&context, request, &response);
    if (!status.ok()) return status;
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  v1::RecordUsageRequest request;
  *request.mutable_usage() = usage;
  v1::RecordUsageResponse response;
  return stub.RecordUsage(&context, request, &response);
}

// Sends a turn again while the daemon answers UNAVAILABLE (as the client
// libraries do): a daemon whose cached lane another daemon wrote since
// answers so once, and reads the lane again.
grpc::Status SendTurn(v1::CacheWatch::Stub& stub, const std::string& session,
                      int turn) {
  grpc::Status status;
  for (int attempt = 0; attempt < 50; ++attempt) {
    status = SendRecords(stub, TurnSnapshot(kAgent, session, turn),
                         TurnUsage(kAgent, session, turn));
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
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

// Record streams (StreamLoad) on two daemons while PostgreSQL restarts and
// one daemon is SIGKILLed: every stream ends (the load's Stop returns), the
// killed daemon's streams with an error, and every record acknowledged OK is
// stored.
TEST_F(FleetTest, RecordStreamsEndAcrossPostgresRestartAndDaemonKill) {
  for (int i = 0; i < 2; ++i) StartDaemon(i);
  StreamLoad killed(daemons_[0]->grpc_address(), kAgent, "killed", 3);
  StreamLoad kept(daemons_[1]->grpc_address(), kAgent, "kept", 3);
  auto wait_for_acks = [](StreamLoad& load, size_t more) {
    const size_t target = load.acked_count() + more;
    for (int i = 0; i < 600 && load.acked_count() < target; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return load.acked_count() >= target;
  };
  ASSERT_TRUE(wait_for_acks(killed, 50));
  ASSERT_TRUE(wait_for_acks(kept, 50));
  ASSERT_TRUE(server_->Stop("immediate"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE(server_->Restart());
  EXPECT_TRUE(wait_for_acks(kept, 50)) << "ingestion did not resume";
  daemons_[0]->Kill();
  killed.Join();  // Its streams end by themselves.
  for (const grpc::Status& status : killed.statuses()) {
    EXPECT_FALSE(status.ok());
  }
  kept.Stop();
  EXPECT_EQ(daemons_[1]->Stop(), 0);

  std::set<std::string> stored;
  for (const char* kind : {"s", "u"}) {
    const std::string rows = Sql(absl::StrCat(
        "SELECT string_agg('", kind, "/' || request_id, ',') FROM turns WHERE ",
        kind[0] == 's' ? "snapshot" : "usage", "_received = 1"));
    for (absl::string_view key : absl::StrSplit(rows, ',', absl::SkipEmpty())) {
      EXPECT_TRUE(stored.insert(std::string(key)).second)
          << "stored twice: " << key;
    }
  }
  for (StreamLoad* load : {&killed, &kept}) {
    for (const std::string& key : load->acked()) {
      EXPECT_TRUE(stored.contains(key)) << "acknowledged but lost: " << key;
    }
  }
}

// Turn `turn` of a lane of the equivalence run: TurnSnapshot's, but from
// turn 5 on a tool is added every 5th turn and from turn 7 on the system
// prompt changes every 7th; such a turn's usage reads nothing and writes the
// prompt again (a break whose reason the change names).
struct SimulatedTurn {
  v1::Snapshot snapshot;
  v1::Usage usage;
};

SimulatedTurn Simulated(const std::string& session, int turn) {
  SimulatedTurn t{TurnSnapshot(kAgent, session, turn),
                  TurnUsage(kAgent, session, turn)};
  for (int i = 0; i < turn / 5; ++i) {
    v1::ToolRef* tool = t.snapshot.add_tools();
    tool->set_name("Extra" + std::to_string(i));
    tool->set_schema_hash(100 + i);
  }
  t.snapshot.set_system_hash(1 + turn / 7);
  if (turn > 0 && (turn % 5 == 0 || turn % 7 == 0)) {
    t.usage.mutable_normalized()->set_cache_read_tokens(0);
    t.usage.mutable_normalized()->set_cache_write_tokens(20000);
  }
  return t;
}

// What a daemon stored for a lane: every turn's verdict and reason, and
// every break's turn, previous turn, reason and evidence.
std::vector<std::string> StoredLane(v1::CacheWatch::Stub& stub,
                                    const std::string& session) {
  std::vector<std::string> rows;
  {
    grpc::ClientContext context;
    v1::GetLaneTimelineRequest request;
    request.set_agent(kAgent);
    request.set_session_id(session);
    v1::GetLaneTimelineResponse response;
    const grpc::Status status =
        stub.GetLaneTimeline(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    for (const v1::TurnSummary& turn : response.turns()) {
      rows.push_back("turn " + turn.request_id() + " " +
                     v1::Verdict_Name(turn.verdict()) + " " +
                     v1::Reason_Name(turn.primary_reason()));
    }
  }
  grpc::ClientContext context;
  v1::ListBreaksRequest request;
  request.set_agent(kAgent);
  request.set_session_id(session);
  request.set_page_size(1000);
  v1::ListBreaksResponse response;
  const grpc::Status status = stub.ListBreaks(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  std::vector<std::string> breaks;
  for (const v1::PromptCacheBreak& event : response.breaks()) {
    breaks.push_back("break " + event.request_id() + " after " +
                     event.previous_request_id() + " " +
                     v1::Reason_Name(event.primary_reason()) + " " +
                     v1::Evidence_Name(event.evidence()));
  }
  std::sort(breaks.begin(), breaks.end());
  rows.insert(rows.end(), breaks.begin(), breaks.end());
  return rows;
}

// The fleet against one daemon: lanes move between the three daemons every
// three turns (each daemon's cached lanes go stale while another serves
// them), daemon 0 is SIGKILLed under load (its lanes fail over) and
// PostgreSQL is restarted mid-run. The same records, fed lane by lane to a
// single daemon on SQLite, give every lane the same verdicts and the same
// breaks (turn, previous turn, reason, evidence).
TEST_F(FleetTest, EveryLanesVerdictsAndBreaksMatchASingleDaemon) {
  for (int i = 0; i < 3; ++i) StartDaemon(i);
  constexpr int kLanes = 8;
  constexpr int kTurns = 30;
  std::atomic<bool> alive[3] = {true, true, true};
  std::atomic<int> acked{0};
  std::atomic<int> moves{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int lane = 0; lane < kLanes; ++lane) {
    clients.emplace_back([&, lane] {
      const std::string session = "sim-" + std::to_string(lane);
      int last = -1;
      for (int turn = 0; turn < kTurns; ++turn) {
        const SimulatedTurn t = Simulated(session, turn);
        for (int attempt = 0;; ++attempt) {
          if (attempt == 1000) {
            ++failures;
            return;
          }
          int daemon = (lane + turn / 3) % 3;
          while (!alive[daemon].load()) daemon = (daemon + 1) % 3;
          if (daemon != last && last >= 0) ++moves;
          last = daemon;
          if (SendRecords(*stubs_[daemon], t.snapshot, t.usage).ok()) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        ++acked;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  auto wait_for = [&](int target) {
    for (int i = 0; i < 1200 && acked.load() < target; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  wait_for(kLanes * kTurns / 3);
  daemons_[0]->Kill();
  alive[0] = false;
  wait_for(2 * kLanes * kTurns / 3);
  ASSERT_TRUE(server_->Stop("immediate"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_TRUE(server_->Restart());
  for (std::thread& client : clients) client.join();
  ASSERT_EQ(failures.load(), 0);
  EXPECT_GT(moves.load(), kLanes * 3);

  DaemonProcess single;
  ASSERT_TRUE(single.Start(dir_.File("single.db"), {}));
  std::unique_ptr<v1::CacheWatch::Stub> single_stub = single.NewStub();
  std::vector<std::thread> feeders;
  for (int lane = 0; lane < kLanes; ++lane) {
    feeders.emplace_back([&, lane] {
      const std::string session = "sim-" + std::to_string(lane);
      for (int turn = 0; turn < kTurns; ++turn) {
        const SimulatedTurn t = Simulated(session, turn);
        if (!SendRecords(*single_stub, t.snapshot, t.usage).ok()) ++failures;
      }
    });
  }
  for (std::thread& feeder : feeders) feeder.join();
  ASSERT_EQ(failures.load(), 0);

  int breaks = 0;
  for (int lane = 0; lane < kLanes; ++lane) {
    const std::string session = "sim-" + std::to_string(lane);
    const std::vector<std::string> alone = StoredLane(*single_stub, session);
    EXPECT_EQ(StoredLane(*stubs_[1], session), alone) << session;
    // Turns 5, 7, 10, 14, 15, 20, 21, 25 and 28.
    EXPECT_EQ(alone.size() - kTurns, 9u) << session;
    breaks += static_cast<int>(alone.size()) - kTurns;
  }
  EXPECT_EQ(breaks, kLanes * 9);
  EXPECT_EQ(single.Stop(), 0);
  for (int i = 1; i < 3; ++i) EXPECT_EQ(daemons_[i]->Stop(), 0);
}

}  // namespace
}  // namespace cachewatch
