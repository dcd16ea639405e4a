// client_bench: the client library's per-turn costs, against a plain XXH3
// pass over the same bytes (Google Benchmark; ratios in docs/PERFORMANCE.md).
//
//   BM_BuildUnchanged/N       SnapshotBuilder::Build for N tools (~1 KB JSON
//                             each) and a 12 KB system prompt, unchanged since
//                             the last turn: the memoized path.
//   BM_BuildOneSchemaChanged/N  the same, but one tool's definition differs
//                             from the last turn's (one canonicalization).
//   BM_Xxh3SameBytes/N        XXH3_64bits over every tool definition and the
//                             system prompt: the floor Build is compared to.
//   BM_ReporterEnqueueDaemonDown  Reporter::ReportSnapshot of a 50-tool
//                             snapshot with no daemon listening; reports the
//                             p50_ns and p99_ns of single calls.
#include <benchmark/benchmark.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "cachewatch/client/reporter.h"
#include "cachewatch/client/snapshot_builder.h"

namespace cachewatch::bench {
namespace {

using client::ModelRequest;
using client::SnapshotBuilder;
using client::Tool;

// A tool definition of about 1 KB as an agent sends it; `variant` changes
// one description.
std::string Definition(int index, int variant) {
  const std::string name = "mcp__workspace__tool_" + std::to_string(index);
  return "{\"name\":\"" + name +
         "\",\"description\":\"Reads, searches or edits files in the "
         "workspace. Use it when the task needs the contents of a file, a "
         "list of matches for a pattern, or a precise change to a region of "
         "text. Prefer small, targeted calls; large outputs are truncated to "
         "the configured limit and the remainder is reported as omitted "
         "(variant " +
         std::to_string(variant) +
         ").\",\"input_schema\":{\"type\":\"object\",\"properties\":{"
         "\"path\":{\"type\":\"string\",\"description\":\"Absolute path of "
         "the file or directory to operate on.\"},\"pattern\":{\"type\":"
         "\"string\",\"description\":\"A regular expression, RE2 syntax.\"},"
         "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"description\":"
         "\"First line to read, 0-based.\"},\"limit\":{\"type\":\"integer\","
         "\"minimum\":1,\"maximum\":2000,\"description\":\"Maximum number of "
         "lines to return.\"},\"replace\":{\"type\":\"string\","
         "\"description\":\"Replacement text for an edit.\"},\"dry_run\":{"
         "\"type\":\"boolean\",\"default\":false}},\"required\":[\"path\"],"
         "\"additionalProperties\":false}}";
}

std::vector<Tool> Tools(int count) {
  std::vector<Tool> tools(count);
  for (int i = 0; i < count; ++i) {
    tools[i].name = "mcp__workspace__tool_" + std::to_string(i);
    tools[i].definition = Definition(i, 0);
  }
  return tools;
}

const std::string& SystemPrompt() {
  static const std::string* const kPrompt = [] {
    auto* prompt = new std::string;
    while (prompt->size() < 12 * 1024) {
      *prompt +=
          "You are a coding agent working in a repository. Follow the "
          "project's conventions and explain what you change. ";
    }
    return prompt;
  }();
  return *kPrompt;
}

ModelRequest Request(const std::vector<Tool>& tools) {
  return {.request_id = "req_01",
          .provider = v1::PROVIDER_ANTHROPIC,
          .model = "claude-sonnet-4-5",
          .system_prompt = SystemPrompt(),
          .tools = tools,
          .options_json = R"({"max_tokens":8192,"thinking":{"type":"off"}})"};
}

SnapshotBuilder NewBuilder() {
  return SnapshotBuilder({.agent = "bench-agent", .session_id = "session"});
}

void BM_BuildUnchanged(benchmark::State& state) {
  const std::vector<Tool> tools = Tools(static_cast<int>(state.range(0)));
  SnapshotBuilder builder = NewBuilder();
  if (!builder.Build(Request(tools)).ok()) state.SkipWithError("Build failed");
  for (auto _ : state) {
    benchmark::DoNotOptimize(builder.Build(Request(tools)));
  }
}
BENCHMARK(BM_BuildUnchanged)->Arg(20)->Arg(100)->Arg(500);

void BM_BuildOneSchemaChanged(benchmark::State& state) {
  std::vector<Tool> tools = Tools(static_cast<int>(state.range(0)));
  SnapshotBuilder builder = NewBuilder();
  int variant = 0;
  for (auto _ : state) {
    variant ^= 1;
    state.PauseTiming();
    tools[0].definition = Definition(0, variant);
    state.ResumeTiming();
    benchmark::DoNotOptimize(builder.Build(Request(tools)));
  }
}
BENCHMARK(BM_BuildOneSchemaChanged)->Arg(20)->Arg(100)->Arg(500);

void BM_Xxh3SameBytes(benchmark::State& state) {
  const std::vector<Tool> tools = Tools(static_cast<int>(state.range(0)));
  const std::string& prompt = SystemPrompt();
  for (auto _ : state) {
    uint64_t sum = XXH3_64bits(prompt.data(), prompt.size());
    for (const Tool& tool : tools) {
      sum += XXH3_64bits(tool.definition.data(), tool.definition.size());
    }
    benchmark::DoNotOptimize(sum);
  }
}
BENCHMARK(BM_Xxh3SameBytes)->Arg(20)->Arg(100)->Arg(500);

void BM_ReporterEnqueueDaemonDown(benchmark::State& state) {
  const std::vector<Tool> tools = Tools(50);
  SnapshotBuilder builder = NewBuilder();
  absl::StatusOr<v1::Snapshot> snapshot = builder.Build(Request(tools));
  if (!snapshot.ok()) {
    state.SkipWithError("Build failed");
    return;
  }
  // Port 1 on loopback: nothing listens, every connection attempt fails.
  client::Reporter reporter({.address = "127.0.0.1:1",
                             .max_queued_records = 1'000'000,
                             .flush_timeout = std::chrono::milliseconds(1)});
  std::vector<int64_t> latencies_ns;
  latencies_ns.reserve(state.max_iterations);
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(reporter.ReportSnapshot(*snapshot));
    latencies_ns.push_back((std::chrono::steady_clock::now() - start).count());
  }
  std::sort(latencies_ns.begin(), latencies_ns.end());
  state.counters["p50_ns"] = latencies_ns[latencies_ns.size() / 2];
  state.counters["p99_ns"] = latencies_ns[latencies_ns.size() * 99 / 100];
  state.counters["dropped"] = reporter.stats().dropped;
}
BENCHMARK(BM_ReporterEnqueueDaemonDown)->Iterations(50'000);

}  // namespace
}  // namespace cachewatch::bench

BENCHMARK_MAIN();
