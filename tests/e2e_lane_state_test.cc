// Lane state end to end (docs/CLASSIFICATION.md, "Lane state"): memory is a
// cache of lane state and the store its truth. Over the real daemon: a lane the
// daemon forgot (idle) is read back from its store and its next turn diffed
// over the real gap; after a real SIGKILL or SIGTERM, whatever was acknowledged
// behaves exactly as if there had been no restart — a retried usage is the
// duplicate it is, with its stored verdict; a retried snapshot is a duplicate;
// a snapshot acknowledged before the restart pairs with its usage after it. A
// multi-lane trace with gaps of hours and duplicated usages gets the same
// verdicts from the daemon (restarted in the middle) as from `analyze`.
#include <google/protobuf/util/message_differencer.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cachewatch/v1/service.grpc.pb.h"
#include "cli/analyze.h"
#include "daemon/core/classifier.h"
#include "tests/support/daemon_process.h"
#include "tests/support/stored_rows.h"
#include "tests/support/turn_records.h"

namespace cachewatch {
namespace {

using google::protobuf::util::MessageDifferencer;
using google::protobuf::util::TimeUtil;
using testing::DaemonProcess;
using testing::StoredRows;
using testing::TempDir;

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kHour = 3600 * kSecond;
constexpr char kAgent[] = "lanes";

// The trace's start on the client clock: ten hours ago.
const int64_t kBaseUs =
    TimeUtil::TimestampToMicroseconds(TimeUtil::GetCurrentTime()) - 10 * kHour;

// A turn of lane (session, lane): its request at kBaseUs + at_us, its
// response a second later, reading `read` and writing `write` tokens.
struct TurnSpec {
  std::string session;
  std::string lane = "main";
  std::string request_id;
  int64_t at_us = 0;
  int64_t read = 0;
  int64_t write = 0;
  std::string model = "claude-sonnet-4-5";
  std::vector<std::string> extra_tools;
};

v1::Snapshot SnapshotOf(const TurnSpec& spec) {
  v1::Snapshot snapshot = testing::TurnSnapshot(kAgent, spec.session, 0);
  snapshot.set_lane(spec.lane);
  snapshot.set_request_id(spec.request_id);
  *snapshot.mutable_request_time() =
      TimeUtil::MicrosecondsToTimestamp(kBaseUs + spec.at_us);
  snapshot.set_model(spec.model);
  for (const std::string& name : spec.extra_tools) {
    v1::ToolRef* tool = snapshot.add_tools();
    tool->set_name(name);
    tool->set_schema_hash(name[0]);
  }
  return snapshot;
}

v1::Usage UsageOf(const TurnSpec& spec) {
  v1::Usage usage = testing::TurnUsage(kAgent, spec.session, 0);
  usage.set_lane(spec.lane);
  usage.set_request_id(spec.request_id);
  *usage.mutable_response_time() =
      TimeUtil::MicrosecondsToTimestamp(kBaseUs + spec.at_us + kSecond);
  usage.set_model(spec.model);
  usage.mutable_normalized()->set_cache_read_tokens(spec.read);
  usage.mutable_normalized()->set_cache_write_tokens(spec.write);
  usage.mutable_normalized()->set_uncached_input_tokens(10);
  return usage;
}

class Client {
 public:
  explicit Client(const DaemonProcess& daemon) : stub_(daemon.NewStub()) {}

  void Snapshot(const v1::Snapshot& snapshot) {
    grpc::ClientContext context;
    v1::RecordSnapshotRequest request;
    *request.mutable_snapshot() = snapshot;
    v1::RecordSnapshotResponse response;
    const grpc::Status status =
        stub_->RecordSnapshot(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  v1::RecordUsageResponse Usage(const v1::Usage& usage) {
    grpc::ClientContext context;
    v1::RecordUsageRequest request;
    *request.mutable_usage() = usage;
    v1::RecordUsageResponse response;
    const grpc::Status status =
        stub_->RecordUsage(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }
  v1::TurnClassification Turn(const TurnSpec& spec) {
    Snapshot(SnapshotOf(spec));
    return Usage(UsageOf(spec)).classification();
  }

 private:
  std::unique_ptr<v1::CacheWatch::Stub> stub_;
};

std::string StoredVerdict(const std::string& db, const std::string& id) {
  const std::vector<std::string> rows = StoredRows(
      db, "SELECT verdict FROM turns WHERE request_id = '" + id + "'");
  return rows.empty() ? "" : rows[0];
}

int64_t StoredBreaks(const std::string& db) {
  return std::stoll(
      StoredRows(db, "SELECT count(*) FROM prompt_cache_breaks").at(0));
}

// Long enough for the daemon's once-a-second maintenance to forget lanes
// idle for more than --idle-lane-seconds=1.
void LetLanesGoIdle() { std::this_thread::sleep_for(std::chrono::seconds(3)); }

TEST(LaneStateTest, AnIdleLaneIsReadBackAndDiffedOverTheRealGap) {
  TempDir dir;
  const std::string db = dir.File("cachewatch.db");
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(db, {"--idle-lane-seconds=1"}));
  Client client(daemon);
  client.Turn({.session = "lunch", .request_id = "a0", .write = 20000});
  EXPECT_EQ(client
                .Turn({.session = "lunch",
                       .request_id = "a1",
                       .at_us = 60 * kSecond,
                       .read = 20000,
                       .write = 100})
                .verdict(),
            v1::VERDICT_OK);
  client.Turn({.session = "switch", .request_id = "b0", .write = 20000});
  LetLanesGoIdle();
  ASSERT_EQ(testing::MetricValue(
                testing::HttpGet(daemon.metrics_address(), "/metrics"),
                {"cachewatch_active_lanes"}),
            0)
      << "the lanes were not forgotten: the test proves nothing";

  // Back from lunch, three hours later: the whole prefix written again.
  const v1::TurnClassification lunch = client.Turn({.session = "lunch",
                                                    .request_id = "a2",
                                                    .at_us = 3 * kHour,
                                                    .read = 0,
                                                    .write = 20100});
  ASSERT_EQ(lunch.verdict(), v1::VERDICT_BREAK) << lunch.DebugString();
  EXPECT_EQ(lunch.cache_break().primary_reason(), v1::REASON_TTL_EXPIRED);
  EXPECT_EQ(lunch.cache_break().previous_request_id(), "a1");
  EXPECT_DOUBLE_EQ(lunch.cache_break().gap_seconds(), 3 * 3600 - 60);

  // A model switch after a pause.
  const v1::TurnClassification switched =
      client.Turn({.session = "switch",
                   .request_id = "b1",
                   .at_us = 2 * kSecond,
                   .read = 0,
                   .write = 20000,
                   .model = "claude-opus-4-1"});
  ASSERT_EQ(switched.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(switched.cache_break().primary_reason(), v1::REASON_MODEL_CHANGED);
  EXPECT_EQ(switched.cache_break().previous_request_id(), "b0");

  // A lane truly new is still a cold start.
  EXPECT_EQ(client.Turn({.session = "new", .request_id = "c0", .write = 20000})
                .verdict(),
            v1::VERDICT_COLD_START);
  EXPECT_EQ(daemon.Stop(), 0);
}

// How the daemon goes down before it is started again.
enum class Restart { kSigkill, kSigterm };

std::string RestartName(const ::testing::TestParamInfo<Restart>& info) {
  return info.param == Restart::kSigkill ? "Sigkill" : "Sigterm";
}

class AcrossRestartTest : public ::testing::TestWithParam<Restart> {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.Start(db_)); }

  void RestartDaemon() {
    if (GetParam() == Restart::kSigkill) {
      daemon_.Kill();
    } else {
      ASSERT_EQ(daemon_.Stop(), 0);
    }
    ASSERT_TRUE(restarted_.Start(db_));
  }

  TempDir dir_;
  const std::string db_ = dir_.File("cachewatch.db");
  DaemonProcess daemon_;
  DaemonProcess restarted_;
};

// The usage was committed and its ack lost in the crash: its retry is the
// duplicate it is, answered with the stored verdict, which stays as it was.
TEST_P(AcrossRestartTest, ARetriedUsageIsTheDuplicateItIs) {
  const TurnSpec r1{.session = "s",
                    .request_id = "r1",
                    .at_us = 30 * kSecond,
                    .read = 20000,
                    .write = 100};
  v1::TurnClassification original;
  {
    Client client(daemon_);
    client.Turn({.session = "s", .request_id = "r0", .write = 20000});
    original = client.Turn(r1);
    ASSERT_EQ(original.verdict(), v1::VERDICT_OK);
  }
  RestartDaemon();
  Client client(restarted_);
  const v1::RecordUsageResponse retry = client.Usage(UsageOf(r1));
  EXPECT_TRUE(retry.duplicate());
  EXPECT_TRUE(MessageDifferencer::Equals(retry.classification(), original))
      << retry.classification().DebugString();
  client.Snapshot(SnapshotOf(r1));  // A retried snapshot: a duplicate.
  EXPECT_EQ(StoredVerdict(db_, "r1"), "ok");
  EXPECT_EQ(StoredBreaks(db_), 0);

  // The lane's next turn is classified at once, against r1: no retried
  // snapshot waits ahead of it.
  const v1::TurnClassification next = client.Turn({.session = "s",
                                                   .request_id = "r2",
                                                   .at_us = 60 * kSecond,
                                                   .read = 20100,
                                                   .write = 100});
  EXPECT_EQ(next.verdict(), v1::VERDICT_OK) << next.DebugString();
  EXPECT_EQ(restarted_.Stop(), 0);
}

// Acknowledged before the restart, the snapshot is durable lane state: its
// usage after the restart gets its real reason, not `unknown`.
TEST_P(AcrossRestartTest, ASnapshotAcknowledgedBeforeGetsItsUsageAfter) {
  const TurnSpec r1{.session = "s",
                    .request_id = "r1",
                    .at_us = 30 * kSecond,
                    .read = 0,
                    .write = 20000,
                    .model = "claude-opus-4-1"};
  {
    Client client(daemon_);
    client.Turn({.session = "s", .request_id = "r0", .write = 20000});
    client.Snapshot(SnapshotOf(r1));
  }
  RestartDaemon();
  Client client(restarted_);
  client.Snapshot(SnapshotOf(r1));  // Retried: the same waiting turn.
  const v1::RecordUsageResponse usage = client.Usage(UsageOf(r1));
  EXPECT_FALSE(usage.duplicate());
  ASSERT_EQ(usage.classification().verdict(), v1::VERDICT_BREAK)
      << usage.classification().DebugString();
  EXPECT_EQ(usage.classification().cache_break().primary_reason(),
            v1::REASON_MODEL_CHANGED);
  EXPECT_NE(usage.classification().cache_break().evidence(),
            v1::EVIDENCE_UNKNOWN);
  EXPECT_EQ(usage.classification().cache_break().previous_request_id(), "r0");
  const v1::TurnClassification next = client.Turn({.session = "s",
                                                   .request_id = "r2",
                                                   .at_us = 60 * kSecond,
                                                   .read = 20000,
                                                   .write = 100,
                                                   .model = "claude-opus-4-1"});
  EXPECT_EQ(next.verdict(), v1::VERDICT_OK) << next.DebugString();
  EXPECT_EQ(restarted_.Stop(), 0);
}

// A system prompt of `sections` sections, cached by a breakpoint on its
// last block (blocks_after 0, as the client libraries and the proxy set it).
v1::Snapshot WithSystemBreakpoint(v1::Snapshot snapshot, int sections) {
  snapshot.clear_system_sections();
  for (int i = 0; i < sections; ++i) {
    v1::SystemSection* section = snapshot.add_system_sections();
    section->set_name(std::string(1, static_cast<char>('a' + i)));
    section->set_hash(i + 1);
  }
  snapshot.set_system_hash(sections);
  v1::CacheControl* control = snapshot.mutable_cache_control();
  control->set_enabled(true);
  v1::Breakpoint* breakpoint = control->add_breakpoints();
  breakpoint->set_segment(v1::PROMPT_SEGMENT_SYSTEM);
  breakpoint->set_index(sections - 1);
  breakpoint->set_blocks_after(0);
  return snapshot;
}

// The breakpoint stays "on the system prompt's last block" when a section
// is added: the restored previous turn says so too, so the break has the
// reasons it has without a restart (system_changed, not also
// cache_control_changed).
TEST_P(AcrossRestartTest, ABreakpointAtTheSegmentsEndIsRestoredThere) {
  const TurnSpec r0{.session = "bp", .request_id = "r0", .write = 20000};
  const TurnSpec r1{.session = "bp",
                    .request_id = "r1",
                    .at_us = 30 * kSecond,
                    .write = 20000};
  const auto send = [](Client& client, const TurnSpec& spec, int sections) {
    client.Snapshot(WithSystemBreakpoint(SnapshotOf(spec), sections));
    return client.Usage(UsageOf(spec)).classification();
  };
  v1::TurnClassification without_restart;
  {
    DaemonProcess reference;
    ASSERT_TRUE(reference.Start(dir_.File("reference.db")));
    Client client(reference);
    send(client, r0, 2);
    without_restart = send(client, r1, 3);
    EXPECT_EQ(reference.Stop(), 0);
  }
  ASSERT_EQ(without_restart.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(without_restart.cache_break().primary_reason(),
            v1::REASON_SYSTEM_CHANGED);
  {
    Client client(daemon_);
    send(client, r0, 2);
  }
  RestartDaemon();
  Client client(restarted_);
  const v1::TurnClassification after_restart = send(client, r1, 3);
  ASSERT_EQ(after_restart.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(after_restart.cache_break().primary_reason(),
            without_restart.cache_break().primary_reason());
  EXPECT_EQ(std::vector<int>(after_restart.cache_break().reasons().begin(),
                             after_restart.cache_break().reasons().end()),
            std::vector<int>(without_restart.cache_break().reasons().begin(),
                             without_restart.cache_break().reasons().end()));
  EXPECT_EQ(restarted_.Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Restarts, AcrossRestartTest,
                         ::testing::Values(Restart::kSigkill,
                                           Restart::kSigterm),
                         RestartName);

// Three sessions, a subagent lane, gaps of hours, a model switch after a
// pause, a tool added after lunch, and usages sent twice: in file order.
std::vector<v1::RecordRequest> MultiLaneTrace() {
  std::vector<TurnSpec> turns;
  auto add = [&](TurnSpec spec) { turns.push_back(std::move(spec)); };
  for (const std::string session : {"alpha", "beta", "gamma"}) {
    const std::string p = session + "-";
    add({.session = session, .request_id = p + "0", .write = 20000});
    add({.session = session,
         .request_id = p + "1",
         .at_us = 40 * kSecond,
         .read = 20000,
         .write = 500});
    add({.session = session,
         .lane = "explore",
         .request_id = p + "x0",
         .at_us = 50 * kSecond,
         .write = 8000});
    add({.session = session,
         .request_id = p + "2",
         .at_us = 2 * kHour,
         .read = 0,
         .write = 20600});  // After lunch: ttl_expired.
    add({.session = session,
         .lane = "explore",
         .request_id = p + "x1",
         .at_us = 2 * kHour + 30 * kSecond,
         .read = 0,
         .write = 8100,
         .extra_tools = {"Grep"}});  // tools_added.
    add({.session = session,
         .request_id = p + "3",
         .at_us = 2 * kHour + 90 * kSecond,
         .read = 20600,
         .write = 200});
    add({.session = session,
         .request_id = p + "4",
         .at_us = 2 * kHour + 40 * 60 * kSecond,
         .read = 0,
         .write = 20800,
         .model = "claude-opus-4-1"});  // model_changed after a pause.
    add({.session = session,
         .request_id = p + "5",
         .at_us = 5 * kHour,
         .read = 0,
         .write = 20800,
         .model = "claude-opus-4-1"});  // ttl_expired again.
  }
  std::sort(
      turns.begin(), turns.end(),
      [](const TurnSpec& a, const TurnSpec& b) { return a.at_us < b.at_us; });
  std::vector<v1::RecordRequest> records;
  for (const TurnSpec& turn : turns) {
    *records.emplace_back().mutable_snapshot() = SnapshotOf(turn);
    *records.emplace_back().mutable_usage() = UsageOf(turn);
    if (turn.request_id.back() == '1' || turn.request_id.back() == '3') {
      *records.emplace_back().mutable_usage() = UsageOf(turn);  // A retry.
    }
  }
  return records;
}

// "request id: verdict [primary reason, previous request id]", sorted.
std::set<std::string> DaemonVerdicts(const std::string& db) {
  const std::vector<std::string> rows = StoredRows(
      db,
      "SELECT t.request_id || ': ' || t.verdict || coalesce(' ' || "
      "b.primary_reason || ' after ' || b.previous_request_id, '') FROM turns "
      "AS t LEFT JOIN prompt_cache_breaks AS b ON b.break_id = t.break_id");
  return {rows.begin(), rows.end()};
}

TEST(LaneStateTest, ATraceGetsTheSameVerdictsFromTheDaemonAndAnalyze) {
  const std::vector<v1::RecordRequest> trace = MultiLaneTrace();
  TempDir dir;
  const std::string db = dir.File("cachewatch.db");
  {
    DaemonProcess daemon;
    ASSERT_TRUE(daemon.Start(db, {"--idle-lane-seconds=1"}));
    DaemonProcess restarted;
    std::unique_ptr<Client> client = std::make_unique<Client>(daemon);
    for (size_t i = 0; i < trace.size(); ++i) {
      if (i == trace.size() / 2) {  // Forgotten lanes, then a crash.
        LetLanesGoIdle();
        daemon.Kill();
        ASSERT_TRUE(restarted.Start(db, {"--idle-lane-seconds=1"}));
        client = std::make_unique<Client>(restarted);
      }
      if (trace[i].has_snapshot()) {
        client->Snapshot(trace[i].snapshot());
      } else {
        client->Usage(trace[i].usage());
      }
    }
    EXPECT_EQ(restarted.Stop(), 0);
  }

  std::vector<cli::TraceRecord> records;
  for (const v1::RecordRequest& record : trace) {
    records.push_back({static_cast<int>(records.size() + 1), record});
  }
  const cli::TraceAnalysis analysis = cli::AnalyzeTrace(
      records, [](const cli::TraceRecord& record, const absl::Status& why) {
        ADD_FAILURE() << "line " << record.line << ": " << why;
      });
  std::map<std::string, std::string> breaks;
  for (const v1::PromptCacheBreak& event : analysis.breaks) {
    breaks[event.request_id()] =
        absl::StrCat(" ", ReasonName(event.primary_reason()), " after ",
                     event.previous_request_id());
  }
  std::set<std::string> analyzed;
  for (const v1::RecordRequest& record : trace) {
    if (!record.has_snapshot()) continue;
    const std::string& id = record.snapshot().request_id();
    const bool cold = id.back() == '0';
    analyzed.insert(breaks.contains(id) ? id + ": break" + breaks[id]
                    : cold              ? id + ": cold_start"
                                        : id + ": ok");
  }
  EXPECT_EQ(DaemonVerdicts(db), analyzed);
  EXPECT_EQ(analysis.duplicates, 9);
  // Every break of the trace, with its primary reason.
  std::set<std::string> expected_breaks;
  for (const std::string session : {"alpha", "beta", "gamma"}) {
    const std::string p = session + "-";
    expected_breaks.insert(p + "2: break ttl_expired after " + p + "1");
    expected_breaks.insert(p + "x1: break tools_added after " + p + "x0");
    expected_breaks.insert(p + "4: break model_changed after " + p + "3");
    expected_breaks.insert(p + "5: break ttl_expired after " + p + "4");
  }
  std::set<std::string> stored_breaks;
  for (const std::string& verdict : DaemonVerdicts(db)) {
    if (verdict.find(": break") != std::string::npos) {
      stored_breaks.insert(verdict);
    }
  }
  EXPECT_EQ(stored_breaks, expected_breaks);
}

}  // namespace
}  // namespace cachewatch
