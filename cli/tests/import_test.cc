// `cachewatch import` run as a process on the fixtures in
// tests/fixtures/import (synthetic session logs in each agent's format,
// with the breaks each is built to show), offline and against the real
// cachewatchd on loopback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cli/tests/cli_process.h"
#include "nlohmann/json.hpp"
#include "tests/support/daemon_process.h"
#include "tests/support/stored_rows.h"

namespace cachewatch::cli {
namespace {

using ::cachewatch::cli::testing::ProcessResult;
using ::cachewatch::testing::DaemonProcess;
using ::cachewatch::testing::StoredRows;
using ::cachewatch::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Json = nlohmann::json;

const std::string kFixtures = CACHEWATCH_FIXTURES_DIR;
const std::string kClaudeCode = kFixtures + "/claude-code";
const std::string kClaudeSession =
    kClaudeCode + "/-home-dev-shop/4f7c2a10-1b2c-4d5e-8f90-0a1b2c3d4e5f.jsonl";
const std::string kCodex = kFixtures + "/codex";
const std::string kGemini = kFixtures + "/gemini";
const std::string kSonnet = "claude-sonnet-4-5-20250929";

ProcessResult Cli(const std::vector<std::string>& args) {
  return testing::RunProcess(CACHEWATCH_CLI_PATH, args);
}

Json ImportJson(std::vector<std::string> args) {
  args.insert(args.begin(), "import");
  args.push_back("--json");
  const ProcessResult result = Cli(args);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  return Json::parse(result.out, nullptr, false);
}

using BreakKey = std::tuple<std::string, std::string, std::string>;

// (request id, primary reason, lane) of each break.
std::set<BreakKey> Breaks(const Json& report) {
  std::set<BreakKey> breaks;
  for (const Json& b : report["breaks"]) {
    breaks.emplace(b["request_id"], b["primary_reason"], b["lane"]);
  }
  return breaks;
}

void ExpectNoStructuralReasonInvented(const Json& report) {
  for (const Json& b : report["breaks"]) {
    for (const Json& reason : b["reasons"]) {
      EXPECT_THAT(reason.get<std::string>(),
                  ::testing::Not(::testing::AnyOf(
                      HasSubstr("tools"), HasSubstr("system"),
                      HasSubstr("cache_control"), HasSubstr("options"),
                      HasSubstr("lookback"))))
          << b.dump();
    }
    EXPECT_EQ(b["unobserved"], Json::array({"tools", "system"}));
    EXPECT_THAT(b["changed_tool_names"], IsEmpty());
  }
}

TEST(ImportClaudeCodeTest, FixtureGivesTheBreaksItWasBuiltFor) {
  const Json report = ImportJson({"claude-code", kClaudeCode});
  ASSERT_FALSE(report.is_discarded());
  const std::set<BreakKey> expected = {
      // A subagent's miss, in its own lane, does not touch the main lane.
      {"req_011CSide0002", "likely_provider_eviction", "sidechain-d0000000"},
      // 60 s after the previous request, nothing visible changed.
      {"req_011CTest0003", "likely_provider_eviction", "main"},
      // An hour later.
      {"req_011CTest0004", "ttl_expired", "main"},
      // The user rewound and edited an earlier prompt.
      {"req_011CTest0006", "messages_changed", "main"},
  };
  EXPECT_EQ(Breaks(report), expected);
  ExpectNoStructuralReasonInvented(report);
  for (const Json& b : report["breaks"]) {
    if (b["request_id"] == "req_011CTest0004") {
      EXPECT_EQ(b["evidence"], "provider_suspected");
      EXPECT_EQ(b["missed_tokens"], 30900);
      EXPECT_EQ(b["ttl_seconds"], 300);  // From the 5 m write split.
      EXPECT_EQ(b["previous_request_id"], "req_011CTest0003");
    }
    if (b["request_id"] == "req_011CTest0006") {
      EXPECT_EQ(b["evidence"], "client_explained");
      EXPECT_EQ(b["first_changed_message_block"], 2);
    }
  }
  // The compaction is an expected drop, never a break; the subagent file
  // (the current layout) is a lane of its own, read cleanly.
  EXPECT_EQ(report["turns"]["by_verdict"]["expected_drop"], 1);
  EXPECT_EQ(report["turns"]["by_verdict"]["cold_start"], 3);
  EXPECT_EQ(report["turns"]["total"], 12);
  const Json& read = report["read"];
  EXPECT_EQ(read["files"], 2);
  EXPECT_EQ(read["requests"], 12);
  // req_01's second content-block line.
  EXPECT_EQ(read["duplicate_requests"], 1);
  EXPECT_EQ(read["corrupt_lines"], 1);
  EXPECT_EQ(read["partial_lines"], 1);
  EXPECT_EQ(read["skipped"]["claude-code: unknown type: hologram"], 1);
  EXPECT_EQ(read["skipped"]["claude-code: synthetic or API error message"], 1);
  EXPECT_EQ(read["versions"]["claude-code 1.0.110"], 28);
}

TEST(ImportClaudeCodeTest, PricesFromFlagsOrTheDaemonConfigGiveDollars) {
  const Json by_flag = ImportJson(
      {"claude-code", kClaudeCode, "--price", kSonnet + "=3,3.75,6,0.3"});
  TempDir dir;
  std::ofstream(dir.File("cachewatch.yaml"))
      << "prices:\n  " << kSonnet
      << ": {input: 3, cache_write_5m: 3.75, cache_write_1h: 6, "
         "cache_read: 0.3}\n";
  const Json by_config = ImportJson(
      {"claude-code", kClaudeCode, "--config", dir.File("cachewatch.yaml")});
  for (const Json* report : {&by_flag, &by_config}) {
    // Missed tokens were written at the 5 m rate instead of read.
    double expected = 0;
    for (const Json& b : (*report)["breaks"]) {
      expected += b["missed_tokens"].get<double>() * (3.75 - 0.3) / 1e6;
      EXPECT_TRUE(b.contains("estimated_extra_cost_usd")) << b.dump();
    }
    EXPECT_NEAR((*report)["turns"]["estimated_extra_cost_usd"].get<double>(),
                expected, 1e-9);
    EXPECT_GT(expected, 0.3);
  }
  const Json unpriced = ImportJson({"claude-code", kClaudeCode});
  EXPECT_EQ(unpriced["turns"]["estimated_extra_cost_usd"], 0.0);
}

TEST(ImportClaudeCodeTest, TextReportsBreaksByReasonSessionAndDay) {
  const ProcessResult result =
      Cli({"import", "claude-code", kClaudeCode, "--verbose", "--price",
           kSonnet + "=3,3.75,6,0.3"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("ttl_expired  lost 30900 tok"));
  EXPECT_THAT(result.out, HasSubstr("REASON"));
  EXPECT_THAT(result.out, HasSubstr("SESSION"));
  EXPECT_THAT(result.out, HasSubstr("DAY (UTC)"));
  EXPECT_THAT(result.out, HasSubstr("2025-09-15"));
  EXPECT_THAT(result.out, HasSubstr("4 breaks, 104204 tokens lost, $0.36"));
  EXPECT_THAT(result.out, HasSubstr("never the tools or the system prompt"));
  // --verbose lists what was skipped and where.
  EXPECT_THAT(result.out, HasSubstr("claude-code: unknown type: hologram: 1"));
  EXPECT_THAT(result.out,
              HasSubstr(".jsonl:15: not a JSON object (truncated or corrupt)"));
}

TEST(ImportClaudeCodeTest, ASessionCopiedIntoAnotherFileCountsOnce) {
  TempDir dir;
  std::filesystem::copy_file(kClaudeSession, dir.File("copy.jsonl"));
  const Json report =
      ImportJson({"claude-code", kClaudeCode, dir.File("copy.jsonl")});
  EXPECT_EQ(report["read"]["requests"], 12);
  // Whichever file is read first holds the requests; all 11 request lines
  // of the other (10 requests, one response's second line) are duplicates.
  EXPECT_EQ(report["read"]["duplicate_requests"], 1 + 11);
  EXPECT_EQ(report["turns"]["breaks"], 4);
}

TEST(ImportClaudeCodeTest, APartialLastLineIsReadOnceComplete) {
  TempDir dir;
  const std::string file = dir.File("session.jsonl");
  std::filesystem::copy_file(kClaudeSession, file);
  EXPECT_EQ(ImportJson({"claude-code", file})["read"]["requests"], 10);
  std::ofstream(file, std::ios::app) << "\n";
  const Json report = ImportJson({"claude-code", file});
  EXPECT_EQ(report["read"]["requests"], 11);
  EXPECT_EQ(report["read"]["partial_lines"], 0);
  EXPECT_EQ(report["turns"]["by_verdict"]["ok"], 4);
}

TEST(ImportClaudeCodeTest, GarbageAndHugeLinesNeverStopTheImport) {
  TempDir dir;
  {
    std::ofstream out(dir.File("garbage.jsonl"), std::ios::binary);
    out << std::string("\x00\xff\xfe{{{\n", 7) << "[1,2,3]\n"
        << "{\"type\":42}\n"
        << "{\"type\":\"assistant\",\"uuid\":\"x\",\"message\":{\"usage\":"
           "{\"input_tokens\":-5},\"model\":\"m\"},\"timestamp\":\"nope\"}\n"
        << "{\"type\":\"user\",\"uuid\":\"y\",\"message\":{\"content\":\""
        << std::string(3 << 20, 'a') << "\"}}\n";
    std::ifstream in(kClaudeSession);
    out << in.rdbuf() << "\n";
  }
  std::ofstream(dir.File("empty.jsonl"));
  const Json report = ImportJson({"claude-code", dir.path()});
  EXPECT_EQ(report["read"]["files"], 2);
  EXPECT_EQ(report["read"]["requests"], 11);
  EXPECT_EQ(report["read"]["corrupt_lines"], 1 + 2);  // Not JSON objects.
  EXPECT_EQ(report["turns"]["breaks"], 4);
}

// A session of `requests` requests an hour apart: each after the first is
// a ttl_expired break, the later ones losing more.
void WriteHourlySession(const std::string& path, int requests) {
  std::ofstream out(path);
  std::string parent = "null";
  for (int i = 0; i < requests; ++i) {
    const std::string uuid = "\"u" + std::to_string(i) + "\"";
    const Json usage = {{"input_tokens", 4},
                        {"cache_creation_input_tokens", 20000 + 100 * i},
                        {"cache_read_input_tokens", 0},
                        {"output_tokens", 10}};
    out << "{\"type\":\"assistant\",\"uuid\":" << uuid
        << ",\"parentUuid\":" << parent
        << ",\"sessionId\":\"s\",\"requestId\":\"req_" << i
        << "\",\"timestamp\":\"2025-09-1" << 5 + i / 24 << "T"
        << (i % 24 < 10 ? "0" : "") << i % 24
        << ":00:00.000Z\",\"message\":{\"id\":\"msg_" << i
        << "\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\","
           "\"content\":[],\"usage\":"
        << usage.dump() << "}}\n";
    parent = uuid;
  }
}

TEST(ImportClaudeCodeTest, TextShowsTheCostliestBreaksUnlessVerbose) {
  TempDir dir;
  WriteHourlySession(dir.File("s.jsonl"), 26);
  auto break_lines = [](const std::string& out) {
    int lines = 0;
    for (size_t at = out.find("ttl_expired  lost"); at != std::string::npos;
         at = out.find("ttl_expired  lost", at + 1)) {
      ++lines;
    }
    return lines;
  };
  const ProcessResult brief = Cli({"import", "claude-code", dir.path()});
  ASSERT_EQ(brief.exit_code, 0) << brief.err;
  EXPECT_EQ(break_lines(brief.out), 20);
  EXPECT_THAT(brief.out, HasSubstr("(the 20 costliest of 25 breaks"));
  EXPECT_THAT(brief.out, HasSubstr("ttl_expired  lost 22400 tok"));
  EXPECT_THAT(brief.out, ::testing::Not(HasSubstr("lost 20000 tok")));
  const ProcessResult all =
      Cli({"import", "claude-code", dir.path(), "--verbose"});
  EXPECT_EQ(break_lines(all.out), 25);
}

TEST(ImportClaudeCodeTest, AnAbortedRequestLeavesTheCompactionHintToTheNext) {
  TempDir dir;
  auto assistant = [](const std::string& uuid, const std::string& parent,
                      int second, int write, int read) {
    const Json usage = {{"input_tokens", write == 0 ? 0 : 4},
                        {"cache_creation_input_tokens", write},
                        {"cache_read_input_tokens", read},
                        {"output_tokens", 0}};
    return Json{
        {"type", "assistant"},
        {"uuid", uuid},
        {"parentUuid", parent},
        {"sessionId", "s"},
        {"requestId", "req_" + uuid},
        {"timestamp", "2025-09-15T09:00:0" + std::to_string(second) + ".000Z"},
        {"message",
         {{"id", "msg_" + uuid},
          {"model", "claude-sonnet-4-5"},
          {"content", Json::array()},
          {"usage", usage}}}}
        .dump();
  };
  std::ofstream(dir.File("s.jsonl"))
      << assistant("a1", "", 1, 20000, 0) << "\n"
      << Json{{"type", "system"}, {"subtype", "compact_boundary"},
              {"uuid", "b1"},     {"parentUuid", nullptr},
              {"sessionId", "s"}, {"timestamp", "2025-09-15T09:00:02.000Z"}}
             .dump()
      << "\n"
      // Aborted: no prompt token counted, skipped.
      << assistant("a2", "b1", 3, 0, 0) << "\n"
      << assistant("a3", "a2", 4, 5000, 0) << "\n";
  const Json report = ImportJson({"claude-code", dir.path()});
  EXPECT_EQ(
      report["read"]["skipped"]["claude-code: request with no prompt tokens"],
      1);
  EXPECT_EQ(report["turns"]["by_verdict"]["expected_drop"], 1);
  EXPECT_EQ(report["turns"]["breaks"], 0);
}

TEST(ImportCodexTest, FixtureGivesTheBreaksItWasBuiltFor) {
  const Json report = ImportJson({"codex", kCodex});
  ASSERT_FALSE(report.is_discarded());
  std::vector<std::string> reasons;
  for (const Json& b : report["breaks"]) {
    reasons.push_back(b["primary_reason"]);
    EXPECT_EQ(b["lane"], "main");
    EXPECT_EQ(b["session_id"], "0199a0b1-2c3d-7e4f-8a9b-0c1d2e3f4a5b");
  }
  EXPECT_EQ(reasons, (std::vector<std::string>{"likely_provider_eviction",
                                               "ttl_expired"}));
  ExpectNoStructuralReasonInvented(report);
  EXPECT_EQ(report["turns"]["by_verdict"]["expected_drop"], 1);  // compacted
  EXPECT_EQ(report["turns"]["by_verdict"]["ok"], 2);
  EXPECT_EQ(report["read"]["requests"], 6);
  EXPECT_EQ(report["read"]["duplicate_requests"], 1);  // Repeated totals.
  EXPECT_EQ(report["read"]["corrupt_lines"], 1);
  EXPECT_EQ(report["read"]["skipped"]["codex: unknown type: future_record"], 1);
  EXPECT_EQ(report["read"]["skipped"]["codex: token_count without info"], 1);
  EXPECT_EQ(report["read"]["versions"]["codex 0.39.0"], 1);
}

// A token_count whose usage the normalizer refuses (a count above its
// bound) is skipped and its line named among the problems; one counting no
// prompt token is skipped without a problem; the next request still counts.
TEST(ImportCodexTest, AnUnreadableUsageNamesItsLine) {
  TempDir dir;
  auto token_count = [](int second, int64_t input, int64_t total) {
    const Json usage = {{"input_tokens", input},
                        {"cached_input_tokens", 0},
                        {"output_tokens", 1},
                        {"total_tokens", total}};
    return Json{
        {"timestamp", "2025-09-15T09:00:0" + std::to_string(second) + ".000Z"},
        {"type", "event_msg"},
        {"payload",
         {{"type", "token_count"},
          {"info",
           {{"last_token_usage", usage}, {"total_token_usage", usage}}}}}}
        .dump();
  };
  std::ofstream(dir.File("s.jsonl"))
      << Json{{"timestamp", "2025-09-15T09:00:00.000Z"},
              {"type", "turn_context"},
              {"payload", {{"model", "gpt-5-codex"}}}}
             .dump()
      << "\n"
      << token_count(1, 2'000'000'000'000, 1) << "\n"
      << token_count(2, 0, 2) << "\n"
      << token_count(3, 20000, 20001) << "\n";
  const Json report = ImportJson({"codex", dir.path()});
  EXPECT_EQ(report["read"]["requests"], 1);
  EXPECT_EQ(report["read"]["skipped"]["codex: unreadable usage"], 1);
  EXPECT_EQ(report["read"]["skipped"]["codex: request with no prompt tokens"],
            1);
  const ProcessResult text = Cli({"import", "codex", dir.path(), "--verbose"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("s.jsonl:2: raw_usage_json"));
  EXPECT_THAT(text.out, ::testing::Not(HasSubstr("s.jsonl:3:")));
}

TEST(ImportGeminiTest, FixtureGivesTheBreaksItWasBuiltFor) {
  const Json report = ImportJson({"gemini", kGemini});
  ASSERT_FALSE(report.is_discarded());
  const std::set<BreakKey> expected = {
      {"m6", "likely_provider_eviction", "main"},
      // After a rewind to m7 and a new prompt.
      {"m8b", "messages_changed", "main"},
      {"m10", "ttl_expired", "main"},
  };
  EXPECT_EQ(Breaks(report), expected);
  ExpectNoStructuralReasonInvented(report);
  // The JSONL session and the older single-JSON one.
  EXPECT_EQ(report["read"]["files"], 2);
  EXPECT_EQ(report["read"]["requests"], 8);
  EXPECT_EQ(report["by_session"].size(), 2u);
  // m4 re-appended with its tool calls.
  EXPECT_EQ(report["read"]["duplicate_requests"], 1);
  EXPECT_EQ(report["read"]["corrupt_lines"], 1);
  EXPECT_EQ(report["read"]["skipped"]["gemini-cli: unknown record"], 1);
}

TEST(ImportGeminiTest, ALaterSessionIdNeverMovesTheFilesRequests) {
  TempDir dir;
  std::filesystem::create_directories(dir.File("p/chats"));
  auto message = [](const std::string& id, int input) {
    return Json{{"id", id},
                {"timestamp", "2025-09-15T09:00:0" + id.substr(1) + ".000Z"},
                {"type", "gemini"},
                {"content", id},
                {"model", "gemini-2.5-pro"},
                {"tokens", {{"input", input}, {"cached", 0}, {"output", 1}}}}
        .dump();
  };
  std::ofstream(dir.File("p/chats/session-x.jsonl"))
      << Json{{"sessionId", "first"}, {"projectHash", "p"}}.dump() << "\n"
      << message("m1", 5000)
      << "\n"
      // A resume writes the session id again, here another one.
      << Json{{"$set", {{"sessionId", "second"}}}}.dump() << "\n"
      << message("m2", 6000) << "\n";
  const Json report = ImportJson({"gemini", dir.path()});
  ASSERT_EQ(report["by_session"].size(), 1u);
  EXPECT_EQ(report["by_session"][0]["session"], "gemini-cli/first");
  EXPECT_EQ(report["by_session"][0]["turns"], 2);
}

TEST(ImportTest, BadArgumentsAreUsageErrorsAndMissingPathsFailures) {
  EXPECT_EQ(Cli({"import", "cursor", kFixtures}).exit_code, 2);
  const ProcessResult missing =
      Cli({"import", "codex", kFixtures + "/no-such-dir"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("no-such-dir: no such file or directory"));
}

class ImportToDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Imported history is older than the default retention.
    ASSERT_TRUE(
        daemon_.Start(dir_.File("cachewatch.db"), {"--retention-hours", "0"}));
  }

  ProcessResult Import(const std::string& path) {
    return Cli({"import", "claude-code", path, "--to", daemon_.grpc_address()});
  }

  int64_t Count(const std::string& sql) {
    const std::vector<std::string> rows =
        StoredRows(dir_.File("cachewatch.db"), sql);
    return rows.empty() ? -1 : std::stoll(rows[0]);
  }

  TempDir dir_;
  DaemonProcess daemon_;
};

TEST_F(ImportToDaemonTest, ReimportingCountsNothingTwiceAndContinuesAFile) {
  TempDir logs;
  const std::string session = logs.File("session.jsonl");
  std::filesystem::copy_file(kClaudeSession, session);

  ProcessResult first = Import(session);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_THAT(first.out,
              HasSubstr("read 1 files, 10 requests (1 duplicate "
                        "request lines, 1 corrupt lines, 1 partial"));
  EXPECT_THAT(first.out, HasSubstr("sent 10 turns (20 records); 0 turns"));
  EXPECT_THAT(first.out, HasSubstr("0 refused"));
  EXPECT_EQ(Count("SELECT count(*) FROM turns"), 10);
  EXPECT_EQ(Count("SELECT count(*) FROM prompt_cache_breaks"), 4);
  EXPECT_EQ(Count("SELECT count(*) FROM turns WHERE verdict = 'break'"), 4);

  ProcessResult again = Import(session);
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_THAT(again.out, HasSubstr("sent 0 turns (0 records); 10 turns"));
  EXPECT_EQ(Count("SELECT count(*) FROM turns"), 10);
  EXPECT_EQ(Count("SELECT count(*) FROM prompt_cache_breaks"), 4);

  // The line being written is finished: only it is sent.
  std::ofstream(session, std::ios::app) << "\n";
  ProcessResult continued = Import(session);
  ASSERT_EQ(continued.exit_code, 0) << continued.out << continued.err;
  EXPECT_THAT(continued.out, HasSubstr("sent 1 turns (2 records); 10 turns"));
  EXPECT_EQ(Count("SELECT count(*) FROM turns"), 11);
  EXPECT_EQ(Count("SELECT count(*) FROM prompt_cache_breaks"), 4);
  EXPECT_EQ(StoredRows(dir_.File("cachewatch.db"),
                       "SELECT verdict FROM turns WHERE request_id = "
                       "'req_011CTest0009'"),
            std::vector<std::string>{"ok"});
}

}  // namespace
}  // namespace cachewatch::cli
