// End-to-end tests of cachewatchd: the real binary on loopback, real gRPC,
// a real SQLite file and a real /metrics scrape.
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cachewatch/v1/service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "reflection.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/stored_rows.h"

namespace cachewatch {
namespace {

using google::protobuf::util::TimeUtil;
using testing::DaemonProcess;
using testing::HttpGet;
using testing::MetricValue;
using testing::TempDir;

// Client timestamps start ten minutes ago: recent enough for a restart to
// reload their lanes (one hour), late enough for a 400 s gap to stay in the
// past.
const int64_t kStartUs =
    std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::system_clock::now().time_since_epoch())
        .count() -
    600LL * 1'000'000;

v1::Snapshot Snapshot(const std::string& session, const std::string& id,
                      double seconds) {
  v1::Snapshot snapshot;
  snapshot.set_agent("e2e-agent");
  snapshot.set_session_id(session);
  snapshot.set_request_id(id);
  *snapshot.mutable_request_time() = TimeUtil::MicrosecondsToTimestamp(
      kStartUs + static_cast<int64_t>(seconds * 1e6));
  snapshot.set_provider(v1::PROVIDER_ANTHROPIC);
  snapshot.set_model("claude-sonnet-4-5");
  snapshot.set_system_hash(0xabc);
  const char* names[] = {"Bash", "Read", "Write", "mcp__github__search"};
  for (int i = 0; i < 4; ++i) {
    v1::ToolRef* tool = snapshot.add_tools();
    tool->set_name(names[i]);
    tool->set_schema_hash(100 + i);
  }
  snapshot.mutable_cache_control()->set_enabled(true);
  return snapshot;
}

v1::Usage Usage(const std::string& session, const std::string& id,
                double seconds, int64_t read, int64_t write) {
  v1::Usage usage;
  usage.set_agent("e2e-agent");
  usage.set_session_id(session);
  usage.set_request_id(id);
  *usage.mutable_response_time() = TimeUtil::MicrosecondsToTimestamp(
      kStartUs + static_cast<int64_t>((seconds + 3) * 1e6));
  usage.set_provider(v1::PROVIDER_ANTHROPIC);
  usage.set_raw_usage_json("{\"input_tokens\":40,\"cache_read_input_tokens\":" +
                           std::to_string(read) +
                           ",\"cache_creation_input_tokens\":" +
                           std::to_string(write) + ",\"output_tokens\":200}");
  return usage;
}

class DaemonTest : public ::testing::Test {
 protected:
  // A usage without its snapshot waits 2 s for it (default 30).
  void SetUp() override {
    ASSERT_TRUE(
        daemon_.Start(dir_.File("cachewatch.db"), {"--usage-grace-seconds=2"}));
    stub_ = daemon_.NewStub();
  }

  // Polls (10 s at most) until `sql` returns `expected`; returns what it
  // returned last.
  std::vector<std::string> QueryUntil(
      const std::string& sql, const std::vector<std::string>& expected) {
    std::vector<std::string> rows;
    for (int attempt = 0; attempt < 100; ++attempt) {
      rows = Query(sql);
      if (rows == expected) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return rows;
  }

  grpc::Status SendSnapshot(const v1::Snapshot& snapshot,
                            v1::RecordSnapshotResponse* response = nullptr) {
    grpc::ClientContext context;
    v1::RecordSnapshotRequest request;
    *request.mutable_snapshot() = snapshot;
    v1::RecordSnapshotResponse ignored;
    return stub_->RecordSnapshot(&context, request,
                                 response ? response : &ignored);
  }

  v1::RecordUsageResponse SendUsage(const v1::Usage& usage,
                                    grpc::Status* status_out = nullptr) {
    grpc::ClientContext context;
    v1::RecordUsageRequest request;
    *request.mutable_usage() = usage;
    v1::RecordUsageResponse response;
    grpc::Status status = stub_->RecordUsage(&context, request, &response);
    if (status_out != nullptr) {
      *status_out = status;
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
    return response;
  }

  // Turn 1 writes 20,000 tokens; turn 2 (after `gap` seconds, with `change`
  // applied) reads none of them. Returns turn 2's classification.
  v1::TurnClassification TwoTurns(
      const std::string& session,
      const std::function<void(v1::Snapshot&, v1::Snapshot&)>& change,
      double gap = 20) {
    v1::Snapshot first = Snapshot(session, session + "-1", 0);
    v1::Snapshot second = Snapshot(session, session + "-2", gap);
    change(first, second);
    EXPECT_TRUE(SendSnapshot(first).ok());
    EXPECT_EQ(SendUsage(Usage(session, session + "-1", 0, 0, 20000))
                  .classification()
                  .verdict(),
              v1::VERDICT_COLD_START);
    EXPECT_TRUE(SendSnapshot(second).ok());
    return SendUsage(Usage(session, session + "-2", gap, 0, 20000))
        .classification();
  }

  // Runs `sql` on the daemon's database and returns the first column of
  // every row as text.
  std::vector<std::string> Query(const std::string& sql) {
    return testing::StoredRows(dir_.File("cachewatch.db"), sql);
  }

  std::string Metrics() {
    return HttpGet(daemon_.metrics_address(), "/metrics");
  }

  TempDir dir_;
  DaemonProcess daemon_;
  std::unique_ptr<v1::CacheWatch::Stub> stub_;
};

void SetChain(v1::Snapshot& snapshot, int blocks, int changed_at = -1) {
  snapshot.clear_message_chain();
  for (int i = 0; i < blocks; ++i) {
    snapshot.add_message_chain(i == changed_at ? 7777 : 1000 + i);
  }
}

struct ReasonScenario {
  const char* reason;
  std::function<void(v1::Snapshot&, v1::Snapshot&)> change;
  double gap;
};

const ReasonScenario kScenarios[] = {
    {"model_changed",
     [](v1::Snapshot&, v1::Snapshot& b) { b.set_model("claude-opus-4-1"); },
     20},
    {"cache_control_changed",
     [](v1::Snapshot&, v1::Snapshot& b) {
       b.mutable_cache_control()->set_ttl_seconds(3600);
     },
     20},
    {"request_options_changed",
     [](v1::Snapshot&, v1::Snapshot& b) { b.set_options_hash(99); }, 20},
    {"tools_order_changed",
     [](v1::Snapshot&, v1::Snapshot& b) {
       b.mutable_tools()->SwapElements(0, 3);
     },
     20},
    {"tools_schema_changed",
     [](v1::Snapshot&, v1::Snapshot& b) {
       b.mutable_tools(1)->set_schema_hash(555);
     },
     20},
    {"tools_added",
     [](v1::Snapshot&, v1::Snapshot& b) {
       v1::ToolRef* tool = b.add_tools();
       tool->set_name("WebFetch");
       tool->set_schema_hash(9);
     },
     20},
    {"tools_removed",
     [](v1::Snapshot&, v1::Snapshot& b) { b.mutable_tools()->RemoveLast(); },
     20},
    {"system_changed",
     [](v1::Snapshot&, v1::Snapshot& b) { b.set_system_hash(0xdef); }, 20},
    {"messages_changed",
     [](v1::Snapshot& a, v1::Snapshot& b) {
       SetChain(a, 6);
       SetChain(b, 9, 2);
     },
     20},
    {"breakpoint_lookback_exceeded",
     [](v1::Snapshot& a, v1::Snapshot& b) {
       SetChain(a, 5);
       SetChain(b, 30);
     },
     20},
    {"ttl_expired", [](v1::Snapshot&, v1::Snapshot&) {}, 400},
    {"likely_provider_eviction", [](v1::Snapshot&, v1::Snapshot&) {}, 60},
};

// The test helper's Suspend() says how a daemon that ended instead of
// stopping ended (errno says nothing then).
TEST_F(DaemonTest, SuspendingADaemonThatEndedSaysHow) {
  ASSERT_EQ(kill(daemon_.pid(), SIGKILL), 0);
  bool suspended = true;
  EXPECT_NONFATAL_FAILURE(suspended = daemon_.Suspend(),
                          "was killed by signal 9 instead of stopping");
  EXPECT_FALSE(suspended);
}

TEST_F(DaemonTest, EveryReasonReachesTheDatabaseAndTheMetrics) {
  for (const ReasonScenario& scenario : kScenarios) {
    SCOPED_TRACE(scenario.reason);
    const std::string session = std::string("s-") + scenario.reason;
    const v1::TurnClassification result =
        TwoTurns(session, scenario.change, scenario.gap);
    ASSERT_EQ(result.verdict(), v1::VERDICT_BREAK);
    EXPECT_EQ(Query("SELECT primary_reason FROM prompt_cache_breaks WHERE "
                    "session_id = '" +
                    session + "'"),
              std::vector<std::string>{scenario.reason});
    EXPECT_EQ(Query("SELECT missed_tokens FROM prompt_cache_breaks WHERE "
                    "session_id = '" +
                    session + "'"),
              std::vector<std::string>{"20000"});
    EXPECT_EQ(Query("SELECT verdict FROM turns WHERE session_id = '" + session +
                    "' ORDER BY request_time_us"),
              (std::vector<std::string>{"cold_start", "break"}));
  }
  const std::string metrics = Metrics();
  for (const ReasonScenario& scenario : kScenarios) {
    EXPECT_EQ(MetricValue(metrics,
                          {"cachewatch_breaks_total{",
                           std::string("reason=\"") + scenario.reason + "\""}),
              1)
        << scenario.reason;
  }
  EXPECT_EQ(MetricValue(metrics, {"cachewatch_cache_lost_tokens_total{",
                                  "reason=\"tools_order_changed\""}),
            20000);
}

// A usage whose snapshot never comes waits the grace window, then its turn
// is stored as a break with unknown evidence.
TEST_F(DaemonTest, UsageWithoutSnapshotIsStoredAsUnknownAfterTheGrace) {
  ASSERT_TRUE(SendSnapshot(Snapshot("orphan", "o-1", 0)).ok());
  SendUsage(Usage("orphan", "o-1", 0, 0, 20000));
  const v1::TurnClassification result =
      SendUsage(Usage("orphan", "o-2", 30, 0, 20000)).classification();
  EXPECT_EQ(result.verdict(), v1::VERDICT_PENDING);
  EXPECT_EQ(QueryUntil("SELECT evidence FROM prompt_cache_breaks WHERE "
                       "session_id = 'orphan'",
                       {"unknown"}),
            std::vector<std::string>{"unknown"});
}

// Reporter queues and networks reorder records: o-2's usage overtakes its
// snapshot. It waits, pairs when the snapshot comes and gets its real
// reason; the next turn is diffed against it (ok, not a second bad verdict).
TEST_F(DaemonTest, AUsageThatOvertakesItsSnapshotPairsWithIt) {
  ASSERT_TRUE(SendSnapshot(Snapshot("reorder", "x-1", 0)).ok());
  SendUsage(Usage("reorder", "x-1", 0, 0, 20000));
  EXPECT_EQ(SendUsage(Usage("reorder", "x-2", 20, 0, 20000))
                .classification()
                .verdict(),
            v1::VERDICT_PENDING);
  v1::Snapshot second = Snapshot("reorder", "x-2", 20);
  second.mutable_tools()->SwapElements(1, 2);
  ASSERT_TRUE(SendSnapshot(second).ok());
  v1::Snapshot third = Snapshot("reorder", "x-3", 40);
  third.mutable_tools()->SwapElements(1, 2);
  ASSERT_TRUE(SendSnapshot(third).ok());
  EXPECT_EQ(SendUsage(Usage("reorder", "x-3", 40, 20000, 0))
                .classification()
                .verdict(),
            v1::VERDICT_OK);
  EXPECT_EQ(
      Query("SELECT request_id || ' ' || primary_reason || ' ' || "
            "evidence FROM prompt_cache_breaks WHERE session_id = "
            "'reorder'"),
      std::vector<std::string>{"x-2 tools_order_changed client_explained"});
  EXPECT_EQ(
      Query("SELECT request_id || ' ' || verdict FROM turns WHERE "
            "session_id = 'reorder' ORDER BY request_id"),
      (std::vector<std::string>{"x-1 cold_start", "x-2 break", "x-3 ok"}));
}

TEST_F(DaemonTest, RetriesAreIdempotent) {
  v1::Snapshot first = Snapshot("retry", "r-1", 0);
  v1::Snapshot second = Snapshot("retry", "r-2", 10);
  second.set_system_hash(1);
  for (int attempt = 0; attempt < 3; ++attempt) {
    v1::RecordSnapshotResponse response;
    ASSERT_TRUE(SendSnapshot(first, &response).ok());
    EXPECT_EQ(response.duplicate(), attempt > 0);
    SendUsage(Usage("retry", "r-1", 0, 0, 20000));
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    ASSERT_TRUE(SendSnapshot(second).ok());
    const v1::RecordUsageResponse response =
        SendUsage(Usage("retry", "r-2", 10, 0, 20000));
    EXPECT_EQ(response.duplicate(), attempt > 0);
    EXPECT_EQ(response.classification().verdict(), v1::VERDICT_BREAK);
  }
  EXPECT_EQ(Query("SELECT COUNT(*) FROM turns WHERE session_id = 'retry'"),
            std::vector<std::string>{"2"});
  EXPECT_EQ(Query("SELECT COUNT(*) FROM prompt_cache_breaks WHERE "
                  "session_id = 'retry'"),
            std::vector<std::string>{"1"});
  const std::string metrics = Metrics();
  EXPECT_EQ(MetricValue(metrics, {"cachewatch_breaks_total{",
                                  "reason=\"system_changed\""}),
            1);
  EXPECT_EQ(MetricValue(metrics, {"cachewatch_ingest_records_total{",
                                  "kind=\"usage\"", "outcome=\"duplicate\""}),
            4);
}

TEST_F(DaemonTest, RestartDiffsTheFirstTurnAgainstTheLastOneBefore) {
  ASSERT_TRUE(SendSnapshot(Snapshot("restart", "before", 0)).ok());
  SendUsage(Usage("restart", "before", 0, 0, 20000));
  ASSERT_EQ(daemon_.Stop(), 0);

  DaemonProcess restarted;
  ASSERT_TRUE(restarted.Start(dir_.File("cachewatch.db")));
  stub_ = restarted.NewStub();
  v1::Snapshot after = Snapshot("restart", "after", 30);
  after.mutable_tools()->SwapElements(1, 2);
  ASSERT_TRUE(SendSnapshot(after).ok());
  const v1::TurnClassification result =
      SendUsage(Usage("restart", "after", 30, 0, 20000)).classification();
  ASSERT_EQ(result.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(result.cache_break().previous_request_id(), "before");
  EXPECT_EQ(result.cache_break().primary_reason(),
            v1::REASON_TOOLS_ORDER_CHANGED)
      << result.DebugString();
  EXPECT_EQ(restarted.Stop(), 0);
}

// A SQLite database is one daemon's: a second exits at start, naming the
// first, and the first goes on; once the first is gone, even killed, a
// daemon starts on it again.
TEST_F(DaemonTest, ASecondDaemonOnTheSameDatabaseExitsNamingTheFirst) {
  ASSERT_TRUE(SendSnapshot(Snapshot("shared", "one", 0)).ok());
  DaemonProcess second;
  EXPECT_EQ(second.StartExpectingExit(dir_.File("cachewatch.db")), 1);
  const std::string logs = second.Logs();
  EXPECT_NE(logs.find("\"msg\":\"the database is in use by another "
                      "cachewatchd\""),
            std::string::npos)
      << logs;
  EXPECT_NE(logs.find(absl::StrCat("cachewatch.db.lock is locked by process ",
                                   daemon_.pid())),
            std::string::npos)
      << logs;
  ASSERT_TRUE(SendSnapshot(Snapshot("shared", "two", 10)).ok());

  daemon_.Kill();
  DaemonProcess third;
  ASSERT_TRUE(third.Start(dir_.File("cachewatch.db")));
  EXPECT_EQ(third.Stop(), 0);
}

TEST_F(DaemonTest, BadInputGetsTheRightStatusAndChangesNothing) {
  struct Case {
    std::function<void(v1::Snapshot&)> corrupt;
    grpc::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {[](v1::Snapshot& s) { s.clear_session_id(); },
       grpc::StatusCode::INVALID_ARGUMENT, "snapshot.session_id"},
      {[](v1::Snapshot& s) { s.clear_request_id(); },
       grpc::StatusCode::INVALID_ARGUMENT, "snapshot.request_id"},
      {[](v1::Snapshot& s) {
         *s.mutable_request_time() = TimeUtil::SecondsToTimestamp(1000);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "snapshot.request_time"},
      {[](v1::Snapshot& s) { s.set_provider(v1::PROVIDER_UNSPECIFIED); },
       grpc::StatusCode::INVALID_ARGUMENT, "snapshot.provider"},
      {[](v1::Snapshot& s) {
         for (int i = 0; i < 2500; ++i) {
           s.add_tools()->set_name("t" + std::to_string(i));
         }
       },
       grpc::StatusCode::INVALID_ARGUMENT, "snapshot.tools"},
      {[](v1::Snapshot& s) {
         for (int i = 0; i < 600000; ++i) s.add_message_chain(i);
       },
       grpc::StatusCode::RESOURCE_EXHAUSTED, ""},
  };
  for (const Case& c : cases) {
    v1::Snapshot snapshot = Snapshot("bad", "bad-1", 0);
    c.corrupt(snapshot);
    const grpc::Status status = SendSnapshot(snapshot);
    EXPECT_EQ(status.error_code(), c.code) << c.message;
    EXPECT_NE(status.error_message().find(c.message), std::string::npos)
        << status.error_message();
  }
  struct UsageCase {
    std::function<void(v1::Usage&)> corrupt;
    const char* message;
  };
  const UsageCase usage_cases[] = {
      {[](v1::Usage& u) { u.set_raw_usage_json("{not json"); },
       "raw_usage_json"},
      {[](v1::Usage& u) { u.set_raw_usage_json("{\"input_tokens\":-1}"); },
       "input_tokens"},
      {[](v1::Usage& u) {
         u.clear_raw_usage_json();
         u.mutable_normalized()->set_cache_read_tokens(-10);
       },
       "cache_read_tokens"},
      {[](v1::Usage& u) { u.clear_agent(); }, "usage.agent"},
  };
  for (const UsageCase& c : usage_cases) {
    v1::Usage usage = Usage("bad", "bad-1", 0, 0, 100);
    c.corrupt(usage);
    grpc::Status status;
    SendUsage(usage, &status);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << c.message;
    EXPECT_NE(status.error_message().find(c.message), std::string::npos)
        << status.error_message();
  }
  {
    grpc::ClientContext context;
    v1::RecordSnapshotResponse response;
    EXPECT_EQ(stub_->RecordSnapshot(&context, {}, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  EXPECT_EQ(Query("SELECT COUNT(*) FROM turns"), std::vector<std::string>{"0"});
  // Still serving, and a good record is accepted.
  ASSERT_TRUE(SendSnapshot(Snapshot("good", "g-1", 0)).ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM turns"), std::vector<std::string>{"1"});
  EXPECT_EQ(
      MetricValue(Metrics(), {"cachewatch_ingest_records_total{",
                              "kind=\"snapshot\"", "outcome=\"invalid\""}),
      6);  // The oversized message never reaches the daemon's code.
}

TEST_F(DaemonTest, ConcurrentLanesFromSeveralClients) {
  constexpr int kClients = 6;
  constexpr int kTurns = 30;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([this, c] {
      auto stub = daemon_.NewStub();  // One channel per simulated agent.
      const std::string session = "concurrent-" + std::to_string(c);
      for (int t = 0; t < kTurns; ++t) {
        const std::string id = session + "-" + std::to_string(t);
        v1::Snapshot snapshot = Snapshot(session, id, t * 10);
        if (t % 2 == 1) snapshot.mutable_tools()->SwapElements(0, 1);
        grpc::ClientContext snapshot_context;
        v1::RecordSnapshotRequest snapshot_request;
        *snapshot_request.mutable_snapshot() = snapshot;
        v1::RecordSnapshotResponse snapshot_response;
        ASSERT_TRUE(stub->RecordSnapshot(&snapshot_context, snapshot_request,
                                         &snapshot_response)
                        .ok());
        grpc::ClientContext usage_context;
        v1::RecordUsageRequest usage_request;
        *usage_request.mutable_usage() = Usage(session, id, t * 10, 0, 20000);
        v1::RecordUsageResponse usage_response;
        ASSERT_TRUE(
            stub->RecordUsage(&usage_context, usage_request, &usage_response)
                .ok());
        EXPECT_EQ(usage_response.classification().verdict(),
                  t == 0 ? v1::VERDICT_COLD_START : v1::VERDICT_BREAK);
      }
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(Query("SELECT COUNT(*) FROM turns"),
            std::vector<std::string>{std::to_string(kClients * kTurns)});
  EXPECT_EQ(Query("SELECT COUNT(*) FROM prompt_cache_breaks WHERE "
                  "primary_reason = 'tools_order_changed'"),
            std::vector<std::string>{std::to_string(kClients * (kTurns - 1))});
  EXPECT_EQ(Query("SELECT COUNT(DISTINCT tool_list_hash) FROM turns"),
            std::vector<std::string>{"2"});
}

TEST_F(DaemonTest, StreamAcknowledgesEveryRecordOnceDurable) {
  grpc::ClientContext context;
  auto stream = stub_->Record(&context);
  constexpr int kTurns = 100;
  for (int t = 0; t < kTurns; ++t) {
    const std::string id = "stream-" + std::to_string(t);
    v1::RecordRequest snapshot;
    *snapshot.mutable_snapshot() = Snapshot("stream", id, t * 5);
    if (t % 10 == 9) snapshot.mutable_snapshot()->set_system_hash(t);
    ASSERT_TRUE(stream->Write(snapshot));
    v1::RecordRequest usage;
    *usage.mutable_usage() = Usage("stream", id, t * 5, 0, 20000);
    ASSERT_TRUE(stream->Write(usage));
  }
  v1::RecordRequest empty;
  ASSERT_TRUE(stream->Write(empty));
  stream->WritesDone();
  int acks = 0;
  int rejected = 0;
  int breaks = 0;
  v1::RecordAck ack;
  while (stream->Read(&ack)) {
    ++acks;
    if (ack.code() != 0) {
      ++rejected;
      continue;
    }
    if (ack.classification().verdict() == v1::VERDICT_BREAK) ++breaks;
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(acks, 2 * kTurns + 1);
  EXPECT_EQ(rejected, 1);
  EXPECT_GE(breaks, 10);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM turns WHERE usage_received = 1 AND "
                  "session_id = 'stream'"),
            std::vector<std::string>{std::to_string(kTurns)});
}

// The daemon writes a batch's acks with gRPC's buffer hint (record_stream.h):
// every ack of a burst must still reach a client that keeps the stream open,
// i.e. the last ack queued is never left in the buffer.
TEST_F(DaemonTest, StreamAcknowledgesABurstWhileTheStreamStaysOpen) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(20));
  auto stream = stub_->Record(&context);
  constexpr int kTurns = 300;
  for (int t = 0; t < kTurns; ++t) {
    const std::string id = "burst-" + std::to_string(t);
    v1::RecordRequest snapshot;
    *snapshot.mutable_snapshot() = Snapshot("burst", id, t * 5);
    ASSERT_TRUE(stream->Write(snapshot));
    v1::RecordRequest usage;
    *usage.mutable_usage() = Usage("burst", id, t * 5, 0, 20000);
    ASSERT_TRUE(stream->Write(usage));
  }
  int acks = 0;
  v1::RecordAck ack;
  while (acks < 2 * kTurns && stream->Read(&ack)) {
    EXPECT_EQ(ack.code(), 0) << ack.request_id();
    ++acks;
  }
  EXPECT_EQ(acks, 2 * kTurns);
  stream->WritesDone();
  EXPECT_FALSE(stream->Read(&ack));
  EXPECT_TRUE(stream->Finish().ok());
}

// A stream's first ack carries the response headers, and a first message
// written with the buffer hint is held with them (grpc/grpc#12975): the
// daemon never hints it, even when a batch of several is ready at once. Each
// stream here sends its records in one socket write (the client's own buffer
// hint), so that the daemon's first commit often takes more than one.
TEST_F(DaemonTest, EveryStreamsFirstAcksArriveWhenItsRecordsCameAtOnce) {
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::seconds(20);
  constexpr int kStreams = 40;
  constexpr int kTurns = 4;
  for (int s = 0; s < kStreams; ++s) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    auto stream = stub_->Record(&context);
    const std::string session = "first-ack-" + std::to_string(s);
    for (int t = 0; t < kTurns; ++t) {
      const std::string id = "turn-" + std::to_string(t);
      v1::RecordRequest snapshot;
      *snapshot.mutable_snapshot() = Snapshot(session, id, t * 5);
      ASSERT_TRUE(
          stream->Write(snapshot, grpc::WriteOptions().set_buffer_hint()));
      v1::RecordRequest usage;
      *usage.mutable_usage() = Usage(session, id, t * 5, 0, 20000);
      grpc::WriteOptions options;
      if (t + 1 < kTurns) options.set_buffer_hint();
      ASSERT_TRUE(stream->Write(usage, options));
    }
    int acks = 0;
    v1::RecordAck ack;
    while (acks < 2 * kTurns && stream->Read(&ack)) {
      EXPECT_EQ(ack.code(), 0) << ack.request_id();
      ++acks;
    }
    ASSERT_EQ(acks, 2 * kTurns) << "stream " << s;
    stream->WritesDone();
    EXPECT_FALSE(stream->Read(&ack));
    EXPECT_TRUE(stream->Finish().ok());
  }
}

TEST_F(DaemonTest, WatchStreamsBreaksAndQueriesExplainThem) {
  grpc::ClientContext watch_context;
  v1::WatchBreaksRequest filter;
  filter.set_reason(v1::REASON_TOOLS_ORDER_CHANGED);
  auto watch = stub_->WatchBreaks(&watch_context, filter);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  TwoTurns("watched-system",
           [](v1::Snapshot&, v1::Snapshot& b) { b.set_system_hash(5); });
  TwoTurns("watched", [](v1::Snapshot&, v1::Snapshot& b) {
    b.mutable_tools()->SwapElements(0, 3);
  });
  v1::PromptCacheBreak event;
  ASSERT_TRUE(watch->Read(&event));
  EXPECT_EQ(event.session_id(), "watched");
  EXPECT_EQ(event.primary_reason(), v1::REASON_TOOLS_ORDER_CHANGED);
  watch_context.TryCancel();

  grpc::ClientContext list_context;
  v1::ListBreaksRequest list;
  list.set_session_id("watched");
  v1::ListBreaksResponse listed;
  ASSERT_TRUE(stub_->ListBreaks(&list_context, list, &listed).ok());
  ASSERT_EQ(listed.breaks_size(), 1);
  EXPECT_EQ(listed.breaks(0).break_id(), event.break_id());

  grpc::ClientContext explain_context;
  v1::ExplainBreakRequest explain;
  explain.set_break_id(event.break_id());
  v1::ExplainBreakResponse explained;
  ASSERT_TRUE(stub_->ExplainBreak(&explain_context, explain, &explained).ok());
  EXPECT_EQ(explained.previous_snapshot().tools(0).name(), "Bash");
  EXPECT_EQ(explained.snapshot().tools(0).name(), "mcp__github__search");

  grpc::ClientContext timeline_context;
  v1::GetLaneTimelineRequest timeline;
  timeline.set_agent("e2e-agent");
  timeline.set_session_id("watched");
  v1::GetLaneTimelineResponse turns;
  ASSERT_TRUE(stub_->GetLaneTimeline(&timeline_context, timeline, &turns).ok());
  ASSERT_EQ(turns.turns_size(), 2);
  EXPECT_EQ(turns.turns(1).verdict(), v1::VERDICT_BREAK);

  grpc::ClientContext unknown_context;
  explain.set_break_id("0000000000000000");
  EXPECT_EQ(
      stub_->ExplainBreak(&unknown_context, explain, &explained).error_code(),
      grpc::StatusCode::NOT_FOUND);
}

TEST_F(DaemonTest, HealthServesAndShutdownExitsZero) {
  auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      daemon_.grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(&context, request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  const std::string metrics = Metrics();
  EXPECT_EQ(MetricValue(metrics, {"cachewatch_build_info{"}), 1);
  EXPECT_EQ(daemon_.Stop(), 0);
  EXPECT_NE(daemon_.Logs().find("\"msg\":\"stopped\""), std::string::npos);
}

// The daemon serves no call on gRPC's callback API: its health service is
// its own (daemon/server/health_service.h), so gRPC starts neither the
// callback completion queue nor its "nexting_thread" pollers, which every
// unary call went through (docs/PERFORMANCE.md, round 9a).
TEST_F(DaemonTest, NoCallbackApiThreads) {
  const std::filesystem::path tasks =
      "/proc/" + std::to_string(daemon_.pid()) + "/task";
  std::vector<std::string> names;
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    names.push_back(name);
  }
  EXPECT_GT(names.size(), 1u);
  for (const std::string& name : names) EXPECT_NE(name, "nexting_thread");
}

// What grpcurl and grpc_health_probe ask by reflection: the services
// listed, the health service among them, and the file that describes it.
TEST_F(DaemonTest, ReflectionListsAndDescribesTheHealthService) {
  namespace reflection = grpc::reflection::v1alpha;
  auto stub = reflection::ServerReflection::NewStub(grpc::CreateChannel(
      daemon_.grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->ServerReflectionInfo(&context);
  reflection::ServerReflectionRequest list;
  list.set_list_services("");
  ASSERT_TRUE(stream->Write(list));
  reflection::ServerReflectionResponse listed;
  ASSERT_TRUE(stream->Read(&listed));
  std::vector<std::string> services;
  for (const auto& service : listed.list_services_response().service()) {
    services.push_back(service.name());
  }
  for (const char* name : {"grpc.health.v1.Health", "cachewatch.v1.CacheWatch",
                           "grpc.reflection.v1alpha.ServerReflection"}) {
    EXPECT_NE(std::find(services.begin(), services.end(), name), services.end())
        << name;
  }

  reflection::ServerReflectionRequest describe;
  describe.set_file_containing_symbol("grpc.health.v1.Health");
  ASSERT_TRUE(stream->Write(describe));
  reflection::ServerReflectionResponse described;
  ASSERT_TRUE(stream->Read(&described));
  ASSERT_TRUE(described.has_file_descriptor_response())
      << described.error_response().error_message();
  ASSERT_GE(described.file_descriptor_response().file_descriptor_proto_size(),
            1);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(
      described.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.package(), "grpc.health.v1");
  ASSERT_EQ(file.service_size(), 1);
  EXPECT_EQ(file.service(0).name(), "Health");
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace cachewatch
