// The cachewatch binary run as a process: offline against the bundled
// trace, and online against the real cachewatchd on loopback.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cachewatch/v1/break.pb.h"
#include "cli/tests/cli_process.h"
#include "nlohmann/json.hpp"
#include "tests/support/daemon_process.h"
#include "tests/support/stored_rows.h"

namespace cachewatch::cli {
namespace {

using ::cachewatch::cli::testing::BackgroundProcess;
using ::cachewatch::cli::testing::ProcessResult;
using ::cachewatch::testing::DaemonProcess;
using ::cachewatch::testing::TempDir;
using ::testing::HasSubstr;

const std::string kTrace = CACHEWATCH_EXAMPLES_DIR "/trace.jsonl";

ProcessResult Cli(const std::vector<std::string>& args) {
  return testing::RunProcess(CACHEWATCH_CLI_PATH, args);
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

std::vector<v1::PromptCacheBreak> ParseBreaks(const std::string& json_lines) {
  std::vector<v1::PromptCacheBreak> breaks;
  for (const std::string& line : Lines(json_lines)) {
    v1::PromptCacheBreak cache_break;
    EXPECT_TRUE(
        google::protobuf::util::JsonStringToMessage(line, &cache_break).ok())
        << line;
    breaks.push_back(cache_break);
  }
  return breaks;
}

TEST(AnalyzeTest, ExampleTraceGivesTheExpectedBreaks) {
  const ProcessResult result = Cli({"analyze", "--json", kTrace});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  std::set<std::pair<std::string, std::string>> breaks;
  for (const std::string& line : Lines(result.out)) {
    const nlohmann::json object = nlohmann::json::parse(line);
    breaks.emplace(object["request_id"], object["primary_reason"]);
    if (object["request_id"] == "req_04") {
      EXPECT_EQ(object["changed_tool_names"],
                nlohmann::json::array({"mcp__github__search"}));
      EXPECT_EQ(object["missed_tokens"], 22900);
      EXPECT_EQ(object["evidence"], "client_explained");
    }
  }
  const std::set<std::pair<std::string, std::string>> expected = {
      {"req_04", "tools_order_changed"},
      {"req_06", "tools_schema_changed"},
      {"req_07", "system_changed"},
      {"req_09", "ttl_expired"},
      {"req_13", "unknown"},
  };
  EXPECT_EQ(breaks, expected);
}

TEST(AnalyzeTest, TextShowsEachBreakAndTheSummary) {
  const ProcessResult result = Cli({"analyze", kTrace});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out,
              HasSubstr("my-agent/s1/main  tools_order_changed  lost 22900 "
                        "tok  tools: mcp__github__search (moved)"));
  EXPECT_THAT(result.out, HasSubstr("system: date"));
  EXPECT_THAT(result.out, HasSubstr("1 duplicate records"));
  EXPECT_THAT(result.out, HasSubstr("total"));
}

TEST(AnalyzeTest, ReportsMalformedLinesAndContinues) {
  TempDir dir;
  std::ifstream example(kTrace);
  std::stringstream lines;
  lines << example.rdbuf();
  const std::string path = dir.File("trace.jsonl");
  std::ofstream trace(path);
  std::string first;
  std::getline(lines, first);
  trace << first << "\n{not json\n"
        << R"({"usage":{"agent":"my-agent","sessionId":"s1","requestId":"x"}})"
        << "\n"
        << lines.rdbuf();
  trace.close();

  const ProcessResult result = Cli({"analyze", "--json", path});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.err, HasSubstr(path + ":2: "));
  EXPECT_THAT(result.err, HasSubstr(path + ":3: "));
  EXPECT_EQ(Lines(result.out).size(), 5u);
}

TEST(AnalyzeTest, ExitStatuses) {
  EXPECT_EQ(Cli({"analyze", "/nonexistent/trace.jsonl"}).exit_code, 1);
  EXPECT_EQ(Cli({"analyze"}).exit_code, 2);
  EXPECT_EQ(Cli({"frobnicate"}).exit_code, 2);
  const ProcessResult help = Cli({"analyze", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--json"));
}

TEST(UnreachableTest, SaysSoAndExitsOne) {
  for (const char* command : {"breaks", "tail", "simulate"}) {
    const ProcessResult result =
        Cli({command, "--address", "127.0.0.1:1", "--timeout", "5"});
    EXPECT_EQ(result.exit_code, 1) << command;
    EXPECT_THAT(result.err, HasSubstr("cachewatch: cannot reach cachewatchd at "
                                      "127.0.0.1:1 (is it running?)"))
        << command;
  }
}

class DaemonCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(daemon_.Start(dir_.File("cachewatch.db")));
  }

  ProcessResult Run(std::vector<std::string> args) {
    args.push_back("--address");
    args.push_back(daemon_.grpc_address());
    return Cli(args);
  }

  void ReplayExample() {
    const ProcessResult replay = Run({"replay", "--retime", kTrace});
    ASSERT_EQ(replay.exit_code, 0) << replay.out << replay.err;
    EXPECT_THAT(replay.out, HasSubstr("0 refused"));
  }

  TempDir dir_;
  DaemonProcess daemon_;
};

TEST_F(DaemonCliTest, SimulateThenBreaksListsSeveralReasons) {
  const ProcessResult simulate = Run({"simulate", "--sessions", "4", "--turns",
                                      "30", "--seed", "3", "--rate", "0"});
  ASSERT_EQ(simulate.exit_code, 0) << simulate.out << simulate.err;
  EXPECT_THAT(simulate.out, HasSubstr("0 refused"));

  const ProcessResult breaks =
      Run({"breaks", "--json", "--limit", "1000", "--since", "12h"});
  ASSERT_EQ(breaks.exit_code, 0) << breaks.err;
  std::set<std::string> reasons;
  for (const v1::PromptCacheBreak& cache_break : ParseBreaks(breaks.out)) {
    reasons.insert(v1::Reason_Name(cache_break.primary_reason()));
  }
  EXPECT_GE(reasons.size(), 5u);
  EXPECT_TRUE(reasons.contains("REASON_TOOLS_ORDER_CHANGED"));
  EXPECT_TRUE(reasons.contains("REASON_SYSTEM_CHANGED"));
  EXPECT_TRUE(reasons.contains("REASON_TTL_EXPIRED"));

  const ProcessResult table = Run({"breaks", "--limit", "3"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(Lines(table.out).size(), 4u) << table.out;
}

TEST_F(DaemonCliTest, ReplayThenExplainShowsTheMovedTools) {
  ReplayExample();
  const ProcessResult listed =
      Run({"breaks", "--json", "--reason", "tools_order_changed"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const std::vector<v1::PromptCacheBreak> breaks = ParseBreaks(listed.out);
  ASSERT_EQ(breaks.size(), 1u) << listed.out;
  EXPECT_EQ(breaks[0].request_id(), "req_04");

  const ProcessResult explain = Run({"explain", breaks[0].break_id()});
  ASSERT_EQ(explain.exit_code, 0) << explain.err;
  EXPECT_THAT(explain.out, HasSubstr("mcp__github__search  <- moved"));
  EXPECT_THAT(explain.out, HasSubstr("moved: mcp__github__search"));
  EXPECT_THAT(explain.out, HasSubstr("tools_changed"));

  const ProcessResult json = Run({"explain", "--json", breaks[0].break_id()});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::ExplainBreakResponse response;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json.out, &response).ok());
  EXPECT_EQ(response.snapshot().tools(3).name(), "mcp__github__search");

  EXPECT_EQ(Run({"explain", "0000000000000000"}).exit_code, 1);
}

TEST_F(DaemonCliTest, LaneShowsTheTurns) {
  ReplayExample();
  const ProcessResult lane = Run({"lane", "my-agent/s1"});
  ASSERT_EQ(lane.exit_code, 0) << lane.err;
  for (const char* expected : {"req_01", "req_12", "req_13", "cold_start",
                               "tools_order_changed", "ttl_expired"}) {
    EXPECT_THAT(lane.out, HasSubstr(expected));
  }
  EXPECT_EQ(Lines(lane.out).size(), 14u) << lane.out;
  EXPECT_EQ(Run({"lane", "only-agent"}).exit_code, 2);
}

TEST_F(DaemonCliTest, TailPrintsABreakProducedWhileItRuns) {
  BackgroundProcess tail(CACHEWATCH_CLI_PATH,
                         {"tail", "--address", daemon_.grpc_address()});
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const ProcessResult simulate =
      Run({"simulate", "--sessions", "2", "--turns", "20", "--rate", "0"});
  ASSERT_EQ(simulate.exit_code, 0) << simulate.err;
  const std::string out = tail.WaitForOutput(" tok", std::chrono::seconds(10));
  EXPECT_THAT(out, HasSubstr(" tok"));
  EXPECT_THAT(out, HasSubstr("claude-code/sim"));
}

// simulate --trace writes the fleet's records and --truth one ground truth
// per turn; on records in order, analyze finds every real break with its
// true reason (the simulated provider cache is honest: only what changed,
// expired, was evicted or fell beyond the lookback misses).
TEST(SimulateTest, TraceAndTruthAgreeWithAnalyzeOnOrderedRecords) {
  TempDir dir;
  const std::string trace = dir.File("fleet.jsonl");
  const std::string truth_path = dir.File("truth.jsonl");
  const ProcessResult simulated =
      Cli({"simulate", "--trace", trace, "--truth", truth_path, "--sessions",
           "6", "--lanes-per-session", "2", "--turns", "30", "--seed", "5"});
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  std::map<std::string, std::string> truth;
  std::ifstream truth_file(truth_path);
  for (std::string line; std::getline(truth_file, line);) {
    const nlohmann::json turn = nlohmann::json::parse(line);
    truth[absl::StrCat(turn["session_id"].get<std::string>(), "/",
                       turn["lane"].get<std::string>(), "/",
                       turn["request_id"].get<std::string>())] =
        turn["truth"].get<std::string>();
  }
  EXPECT_EQ(truth.size(), 6u * 2 * 30);

  const ProcessResult analyzed = Cli({"analyze", "--turns", trace});
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  std::set<std::string> reasons;
  int breaks = 0;
  for (const std::string& line : Lines(analyzed.out)) {
    const nlohmann::json turn = nlohmann::json::parse(line);
    const std::string id =
        absl::StrCat(turn["session_id"].get<std::string>(), "/",
                     turn["lane"].get<std::string>(), "/",
                     turn["request_id"].get<std::string>());
    const std::string verdict = turn["verdict"];
    const std::string expected = truth[id];
    if (verdict == "break") {
      ++breaks;
      reasons.insert(turn["primary_reason"].get<std::string>());
      EXPECT_EQ(turn["primary_reason"], expected) << id;
    } else {
      EXPECT_EQ(verdict, expected == "ok" || expected == "cold_start" ||
                                 expected == "expected_drop" ||
                                 expected == "below_min_cacheable"
                             ? expected
                             : "break")
          << id;
    }
  }
  EXPECT_GT(breaks, 50);
  EXPECT_GE(reasons.size(), 8u);
}

// A multi-lane trace as it arrives at a daemon: usages that overtake their
// snapshots, a usage sent twice, a lost snapshot, an hour-long gap, and a
// tool added under a breakpoint on the last tool. Client times are seconds
// from two hours ago.
class MessyTrace {
 public:
  std::string Write(const std::string& path) const {
    std::ofstream out(path);
    for (const std::string& line : lines_) out << line << "\n";
    return path;
  }

  v1::Snapshot NewSnapshot(const std::string& session, const std::string& lane,
                           const std::string& id, double seconds) const {
    v1::Snapshot snapshot;
    snapshot.set_agent("messy");
    snapshot.set_session_id(session);
    snapshot.set_lane(lane);
    snapshot.set_request_id(id);
    *snapshot.mutable_request_time() = At(seconds);
    snapshot.set_provider(v1::PROVIDER_ANTHROPIC);
    snapshot.set_model("claude-sonnet-4-5");
    snapshot.set_system_hash(0xabc);
    for (const char* name : {"Bash", "Read", "Write"}) {
      v1::ToolRef* tool = snapshot.add_tools();
      tool->set_name(name);
      tool->set_schema_hash(name[0]);
    }
    v1::CacheControl& control = *snapshot.mutable_cache_control();
    control.set_enabled(true);
    v1::Breakpoint* on_last_tool = control.add_breakpoints();
    on_last_tool->set_segment(v1::PROMPT_SEGMENT_TOOLS);
    on_last_tool->set_index(2);
    return snapshot;
  }

  void Add(const v1::Snapshot& snapshot) {
    v1::RecordRequest record;
    *record.mutable_snapshot() = snapshot;
    Append(record);
  }

  // The usage of `id`, answered 3 s after `seconds`, reading `read` tokens.
  void AddUsage(const v1::Snapshot& of, double seconds, int64_t read) {
    v1::RecordRequest record;
    v1::Usage& usage = *record.mutable_usage();
    usage.set_agent(of.agent());
    usage.set_session_id(of.session_id());
    usage.set_lane(of.lane());
    usage.set_request_id(of.request_id());
    *usage.mutable_response_time() = At(seconds + 3);
    usage.set_provider(v1::PROVIDER_ANTHROPIC);
    usage.set_raw_usage_json(nlohmann::json{
        {"input_tokens", 40},
        {"cache_read_input_tokens", read},
        {"cache_creation_input_tokens", 20000 - read},
        {"output_tokens", 100}}.dump());
    Append(record);
  }

 private:
  google::protobuf::Timestamp At(double seconds) const {
    return google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(
        start_us_ + static_cast<int64_t>(seconds * 1e6));
  }
  void Append(const v1::RecordRequest& record) {
    std::string line;
    EXPECT_TRUE(
        google::protobuf::util::MessageToJsonString(record, &line).ok());
    lines_.push_back(std::move(line));
  }

  const int64_t start_us_ =
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count() -
      7200LL * 1'000'000;
  std::vector<std::string> lines_;
};

// The same reordered multi-lane trace gives identical verdicts offline
// (analyze) and through the real daemon (replay over gRPC), and every break
// has its true primary reason.
TEST(AnalyzeAndDaemonTest, AReorderedTraceGivesIdenticalVerdicts) {
  TempDir dir;
  MessyTrace trace;
  // Lane main.
  const v1::Snapshot a1 = trace.NewSnapshot("s1", "main", "a1", 0);
  v1::Snapshot a2 = trace.NewSnapshot("s1", "main", "a2", 20);
  a2.mutable_tools()->SwapElements(0, 1);  // Bash <-> Read.
  v1::Snapshot a3 = a2;
  a3.set_request_id("a3");
  *a3.mutable_request_time() = trace.NewSnapshot("", "", "", 40).request_time();
  v1::ToolRef* grep = a3.add_tools();  // Grep added; its breakpoint moves
  grep->set_name("Grep");              // with the last tool.
  grep->set_schema_hash(7);
  a3.mutable_cache_control()->mutable_breakpoints(0)->set_index(3);
  v1::Snapshot a4 = a3;
  a4.set_request_id("a4");
  *a4.mutable_request_time() = trace.NewSnapshot("", "", "", 60).request_time();
  v1::Snapshot a5 = a4;  // Its snapshot is lost.
  a5.set_request_id("a5");
  *a5.mutable_request_time() = trace.NewSnapshot("", "", "", 80).request_time();
  v1::Snapshot a6 = a4;
  a6.set_request_id("a6");
  *a6.mutable_request_time() =
      trace.NewSnapshot("", "", "", 100).request_time();
  a6.set_system_hash(0xdef);
  v1::Snapshot a7 = a6;  // After 70 minutes away.
  a7.set_request_id("a7");
  *a7.mutable_request_time() =
      trace.NewSnapshot("", "", "", 4300).request_time();
  // Lane explore, interleaved.
  const v1::Snapshot b1 = trace.NewSnapshot("s1", "explore", "b1", 5);
  v1::Snapshot b2 = trace.NewSnapshot("s1", "explore", "b2", 25);
  b2.set_model("claude-opus-4-1");
  v1::Snapshot b3 = b2;
  b3.set_request_id("b3");
  *b3.mutable_request_time() = trace.NewSnapshot("", "", "", 45).request_time();

  trace.Add(a1);
  trace.AddUsage(a1, 0, 0);
  trace.Add(b1);
  trace.AddUsage(b1, 5, 0);
  trace.AddUsage(a2, 20, 0);  // Overtakes its snapshot.
  trace.AddUsage(b2, 25, 0);  // Overtakes its snapshot too.
  trace.Add(b2);
  trace.Add(a2);
  trace.Add(a3);
  trace.AddUsage(a3, 40, 0);
  trace.Add(b3);
  trace.AddUsage(b3, 45, 20000);
  trace.Add(a4);
  trace.AddUsage(a4, 60, 20000);
  trace.AddUsage(a4, 60, 20000);  // Retried.
  trace.AddUsage(a5, 80, 20000);  // Never gets its snapshot.
  trace.Add(a6);
  trace.AddUsage(a6, 100, 0);
  trace.Add(a7);
  trace.AddUsage(a7, 4300, 0);
  const std::string path = trace.Write(dir.File("messy.jsonl"));

  const ProcessResult analyzed = Cli({"analyze", "--turns", path});
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  EXPECT_EQ(analyzed.err, "");
  std::set<std::string> offline;
  for (const std::string& line : Lines(analyzed.out)) {
    const nlohmann::json turn = nlohmann::json::parse(line);
    offline.insert(absl::StrCat(turn["lane"].get<std::string>(), "/",
                                turn["request_id"].get<std::string>(), " ",
                                turn["verdict"].get<std::string>(), " ",
                                turn.value("primary_reason", "")));
  }
  const std::set<std::string> expected = {
      "main/a1 cold_start ",
      "main/a2 break tools_order_changed",
      "main/a3 break tools_added",
      "main/a4 ok ",
      "main/a5 ok ",
      "main/a6 break system_changed",
      "main/a7 break ttl_expired",
      "explore/b1 cold_start ",
      "explore/b2 break model_changed",
      "explore/b3 ok ",
  };
  EXPECT_EQ(offline, expected);

  DaemonProcess daemon;
  ASSERT_TRUE(
      daemon.Start(dir.File("cachewatch.db"), {"--usage-grace-seconds=2"}));
  const ProcessResult replay =
      Cli({"replay", "--retime", path, "--address", daemon.grpc_address()});
  ASSERT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  const std::string sql =
      "SELECT lane || '/' || request_id || ' ' || coalesce(verdict, '') || "
      "' ' || coalesce(primary_reason, '') FROM turns WHERE agent = 'messy'";
  std::set<std::string> online;
  for (int attempt = 0; attempt < 100; ++attempt) {
    online =
        ::cachewatch::testing::StoredRowSet(dir.File("cachewatch.db"), sql);
    if (online == offline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(online, offline);
  EXPECT_EQ(daemon.Stop(), 0);
}

}  // namespace
}  // namespace cachewatch::cli
