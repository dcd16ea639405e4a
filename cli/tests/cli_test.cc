// The cachewatch binary run as a process: offline against the bundled
// trace, and online against the real cachewatchd on loopback.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "cachewatch/v1/break.pb.h"
#include "cli/tests/cli_process.h"
#include "nlohmann/json.hpp"
#include "tests/support/daemon_process.h"

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

}  // namespace
}  // namespace cachewatch::cli
