// import_bench: `cachewatch import claude-code` throughput on generated
// Claude Code session logs.
//
// Writes --mb megabytes (default 200) of sessions in Claude Code's JSONL
// layout to a temporary directory: each session a user prompt, then
// requests answered on one to three content-block lines (text, tool_use),
// each followed by a tool_result of 1-6 KB, with a 5 m cache write split,
// the odd cache miss and now and then a pause past the TTL. Then, best of
// --runs (default 3) over the same files:
//   read:   the files line by line, nothing else (the baseline: I/O and
//           line splitting);
//   nlohmann: read + a nlohmann-json parse of every line (the reader's
//           first version parsed this way and reached 44 MB/s, parsing and
//           re-serializing most of its time; it now uses simdjson);
//   import: the whole import (ReadTranscriptFile + ImportAnalyzer, i.e. the
//           reader, the daemon's validation, lane tracker and classifier).
// Each is reported in MB/s and as a share of the read baseline, and the
// import against a nlohmann-json parse alone. PASS/FAIL: import >= 50 MB/s.
//
// Usage: import_bench [--mb=N] [--runs=N]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "cli/import_analysis.h"
#include "cli/jsonl_lines.h"
#include "cli/transcript_files.h"
#include "nlohmann/json.hpp"

namespace {

using cachewatch::cli::ForEachCompleteLine;
using cachewatch::cli::ImportAnalyzer;
using cachewatch::cli::ReadTally;
using cachewatch::cli::SeenRequests;
using cachewatch::cli::TranscriptAgent;
using cachewatch::cli::TranscriptTurn;
using Json = nlohmann::json;

constexpr double kTargetMbPerSecond = 50;

std::string Timestamp(int64_t seconds) {
  const std::time_t time = 1757926800 + seconds;  // 2025-09-15T09:00:00Z
  std::tm tm;
  gmtime_r(&time, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
  return text;
}

std::string Uuid(std::mt19937_64& random) {
  return absl::StrFormat("%08x-%04x-4%03x-8%03x-%012x", random() & 0xffffffff,
                         random() & 0xffff, random() & 0xfff, random() & 0xfff,
                         random() & 0xffffffffffff);
}

// One session file of about `bytes`; returns the bytes written.
int64_t WriteSession(const std::string& path, int64_t bytes,
                     std::mt19937_64& random) {
  std::ofstream out(path, std::ios::binary);
  const std::string session = Uuid(random);
  const Json base = {{"cwd", "/home/dev/project"},
                     {"sessionId", session},
                     {"version", "2.0.14"},
                     {"gitBranch", "main"},
                     {"userType", "external"}};
  int64_t written = 0;
  auto emit = [&](Json entry) {
    entry.update(base);
    const std::string line = entry.dump() + "\n";
    out << line;
    written += static_cast<int64_t>(line.size());
  };
  std::string parent = Uuid(random);
  int64_t now = 0;
  emit({{"type", "user"},
        {"uuid", parent},
        {"parentUuid", nullptr},
        {"isSidechain", false},
        {"timestamp", Timestamp(now)},
        {"message",
         {{"role", "user"}, {"content", "Refactor the billing module."}}}});
  int64_t cached = 0;
  const std::string filler(6000, 'x');
  for (int request = 0; written < bytes; ++request) {
    now += random() % 40 == 0 ? 600 : 5 + random() % 20;
    const bool miss = random() % 25 == 0;
    const int64_t prompt = 20000 + request * 400;
    const int64_t read = miss ? 0 : cached;
    const int64_t write = prompt - read;
    cached = prompt;
    const Json usage = {{"input_tokens", 4},
                        {"cache_creation_input_tokens", write},
                        {"cache_read_input_tokens", read},
                        {"cache_creation",
                         {{"ephemeral_5m_input_tokens", write},
                          {"ephemeral_1h_input_tokens", 0}}},
                        {"output_tokens", 120 + random() % 400},
                        {"service_tier", "standard"}};
    const std::string request_id = absl::StrFormat("req_011C%016x", random());
    const std::string message_id = absl::StrFormat("msg_01%016x", random());
    const int blocks = 1 + static_cast<int>(random() % 3);
    for (int block = 0; block < blocks; ++block) {
      const std::string uuid = Uuid(random);
      const Json content =
          block + 1 < blocks
              ? Json{{"type", "text"},
                     {"text", filler.substr(0, 200 + random() % 800)}}
              : Json{{"type", "tool_use"},
                     {"id", "toolu_" + std::to_string(request)},
                     {"name", "Edit"},
                     {"input",
                      {{"file_path", "/home/dev/project/billing.py"},
                       {"old_string", filler.substr(0, 300)},
                       {"new_string", filler.substr(0, 320)}}}};
      emit({{"type", "assistant"},
            {"uuid", uuid},
            {"parentUuid", parent},
            {"isSidechain", false},
            {"timestamp", Timestamp(now)},
            {"requestId", request_id},
            {"message",
             {{"id", message_id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", "claude-sonnet-4-5-20250929"},
              {"content", Json::array({content})},
              {"stop_reason", nullptr},
              {"usage", usage}}}});
      parent = uuid;
    }
    const std::string result = Uuid(random);
    emit({{"type", "user"},
          {"uuid", result},
          {"parentUuid", parent},
          {"isSidechain", false},
          {"timestamp", Timestamp(now + 1)},
          {"message",
           {{"role", "user"},
            {"content",
             Json::array({{{"tool_use_id", "toolu_" + std::to_string(request)},
                           {"type", "tool_result"},
                           {"content",
                            filler.substr(0, 1000 + random() % 5000)}}})}}}});
    parent = result;
  }
  return written;
}

int64_t Flag(int argc, char** argv, const char* name, int64_t fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return std::atoll(argv[i] + prefix.size());
    }
  }
  return fallback;
}

template <typename Pass>
double BestSeconds(int runs, const Pass& pass) {
  double best = 1e300;
  for (int run = 0; run < runs; ++run) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    best = std::min(best, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t megabytes = Flag(argc, argv, "mb", 200);
  const int runs = static_cast<int>(Flag(argc, argv, "runs", 3));
  char dir_template[] = "/tmp/import_bench.XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = dir_template;
  std::mt19937_64 random(7);
  std::vector<std::string> files;
  int64_t bytes = 0;
  constexpr int64_t kSessionBytes = 4 << 20;
  for (int i = 0; bytes < megabytes * 1000000; ++i) {
    files.push_back(absl::StrFormat("%s/session-%04d.jsonl", dir, i));
    bytes += WriteSession(files.back(), kSessionBytes, random);
  }
  const double mb = static_cast<double>(bytes) / 1e6;
  std::printf(
      "import_bench: %.0f MB of Claude Code JSONL in %zu files, best "
      "of %d runs\n",
      mb, files.size(), runs);

  int64_t lines = 0;
  const double read_seconds = BestSeconds(runs, [&] {
    ReadTally tally;
    for (const std::string& file : files) {
      (void)ForEachCompleteLine(file, tally, [](std::string_view, int64_t) {});
    }
    lines = tally.lines;
  });
  const double parse_seconds = BestSeconds(runs, [&] {
    ReadTally tally;
    size_t members = 0;
    for (const std::string& file : files) {
      (void)ForEachCompleteLine(
          file, tally, [&](std::string_view line, int64_t) {
            members += Json::parse(line, nullptr, false).size();
          });
    }
    if (members == 0) std::printf("nothing parsed\n");
  });
  int64_t turns = 0;
  int64_t breaks = 0;
  const double import_seconds = BestSeconds(runs, [&] {
    ReadTally tally;
    SeenRequests seen;
    ImportAnalyzer analyzer(cachewatch::ClassifierOptions{});
    for (const std::string& file : files) {
      analyzer.BeginFile();
      (void)cachewatch::cli::ReadTranscriptFile(
          TranscriptAgent::kClaudeCode, file, tally, seen,
          [&](TranscriptTurn turn) { analyzer.Add(turn); });
      analyzer.EndFile();
    }
    turns = analyzer.report().total.turns;
    breaks = analyzer.report().total.breaks;
  });
  std::filesystem::remove_all(dir);

  const double import_rate = mb / import_seconds;
  std::printf("  %lld lines, %lld turns, %lld breaks\n",
              static_cast<long long>(lines), static_cast<long long>(turns),
              static_cast<long long>(breaks));
  std::printf("  %-8s %8.1f MB/s  (baseline)\n", "read", mb / read_seconds);
  std::printf("  %-8s %8.1f MB/s  (%.0f%% of read)\n", "nlohmann",
              mb / parse_seconds, 100 * read_seconds / parse_seconds);
  std::printf(
      "  %-8s %8.1f MB/s  (%.0f%% of read; %.1fx a nlohmann-json "
      "parse alone)\n",
      "import", import_rate, 100 * read_seconds / import_seconds,
      parse_seconds / import_seconds);
  const bool pass = import_rate >= kTargetMbPerSecond;
  std::printf("import: %.1f MB/s, target >= %.0f MB/s: %s\n", import_rate,
              kTargetMbPerSecond, pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}
