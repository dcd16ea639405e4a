// memory_bench: memory per idle lane in the daemon's lane trackers.
//
// For each of 10 k, 100 k and 1 M lanes, a fresh child process builds that
// many idle lanes in kShards LaneTrackers (the daemon's structure: lanes
// sharded by LaneKeyHash, as IngestPipeline does, with the lane cap raised
// so none is evicted). Each lane plays --turns turns (snapshot, then usage,
// as records.h builds them: 50 tools, three system sections, a growing
// message chain) and then stays idle. Lanes use one of kToolLists distinct
// tool lists, so most lanes share a list with many others, as agents of one
// kind do. Lane keys are realistic: a few agent names, 36-character session
// ids.
//
// Reported per run: peak RSS (VmHWM), heap bytes in use (mallinfo2) after
// the lanes were built minus before, and that divided by the lanes. The
// size of one 50-tool list in the tracker's form is measured on its own;
// a second run of 10 k lanes, each with a tool list of its own, shows
// whether lists are shared: if they are, unique lists cost about one list
// more per lane than shared ones; if every lane copies its list, both cost
// the same. PASS/FAIL: at most 1 KiB per idle lane beyond its tool list
// (the heap of the shared lists, a fixed cost per tracker, is subtracted
// before dividing by the lanes), and identical tool lists shared.
//
// Usage: memory_bench [--turns=N] [--lanes=N]
// --turns: turns per lane (default 4); --lanes: build only that many lanes,
// in this process, and print heap bytes per lane (for heaptrack).
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/records.h"
#include "daemon/core/lane_tracker.h"

namespace cachewatch::bench {
namespace {

constexpr int kShards = 16;  // IngestPipeline's default.
constexpr int kToolLists = 8;
constexpr int kTools = 50;
constexpr double kTargetBytesPerLane = 1024;
constexpr int64_t kNowUs = 1'790'000'000'000'000;

// A /proc/self/status field in KiB.
int64_t StatusKiB(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const size_t length = std::strlen(field);
  while (std::getline(status, line)) {
    if (line.compare(0, length, field) == 0 && line[length] == ':') {
      return std::strtoll(line.c_str() + length + 1, nullptr, 10);
    }
  }
  return -1;
}

int64_t HeapInUse() { return static_cast<int64_t>(mallinfo2().uordblks); }

// A session id shaped like a UUID, distinct per lane.
std::string SessionId(int64_t lane) {
  char buffer[64];
  std::snprintf(
      buffer, sizeof(buffer), "%08llx-4b1e-9c2d-a7f3-%012llx",
      static_cast<unsigned long long>((lane * 2654435761ULL) & 0xffffffffULL),
      static_cast<unsigned long long>(lane));
  return buffer;
}

// Snapshot and usage templates of one lane: turn `turn` of a lane whose
// tools are list `list`.
struct LaneRecords {
  std::vector<v1::Snapshot> snapshots;
  std::vector<v1::Usage> usages;
};

LaneRecords MakeTemplates(int list, int turns) {
  LaneRecords records;
  const LaneId lane{"agent", "session"};
  for (int turn = 0; turn < turns; ++turn) {
    v1::Snapshot snapshot = MakeSnapshot(lane, turn, kTools);
    // Distinct lists: the same names, one schema hash differs per list.
    snapshot.mutable_tools(list % kTools)->set_schema_hash(0x5eed0000 + list);
    records.snapshots.push_back(std::move(snapshot));
    records.usages.push_back(MakeUsage(lane, turn));
  }
  return records;
}

struct Run {
  int64_t lanes = 0;
  int64_t heap_bytes = 0;
  int64_t peak_rss_kib = 0;
  int64_t rss_kib = 0;
};

// Builds `lanes` idle lanes; `unique_lists` gives every lane a tool list of
// its own instead of one of kToolLists.
Run BuildLanes(int64_t lanes, int turns, bool unique_lists) {
  std::vector<LaneRecords> templates;
  for (int list = 0; list < kToolLists; ++list) {
    templates.push_back(MakeTemplates(list, turns));
  }
  static const char* const kAgents[] = {"claude-code", "support-bot",
                                        "research-agent", "codex-cli"};
  const int64_t heap_before = HeapInUse();

  TrackerOptions options;
  options.max_lanes = static_cast<size_t>(lanes);  // Per shard: no eviction.
  std::vector<std::unique_ptr<LaneTracker>> shards;
  for (int i = 0; i < kShards; ++i) {
    shards.push_back(
        std::make_unique<LaneTracker>(options, ClassifierOptions()));
  }
  for (int64_t lane = 0; lane < lanes; ++lane) {
    const LaneRecords& records = templates[lane % kToolLists];
    const std::string agent = kAgents[lane % 4];
    const std::string session = SessionId(lane);
    for (int turn = 0; turn < turns; ++turn) {
      // What IngestPipeline::ProcessSnapshot does with a request's snapshot.
      auto snapshot = std::make_shared<v1::Snapshot>(records.snapshots[turn]);
      snapshot->set_agent(agent);
      snapshot->set_session_id(session);
      if (unique_lists) {
        snapshot->mutable_tools(0)->set_schema_hash(
            static_cast<uint64_t>(lane));
      }
      v1::Usage usage = records.usages[turn];
      usage.set_agent(agent);
      usage.set_session_id(session);
      LaneTracker& tracker = *shards[LaneKeyHash()(LaneKeyOf(usage)) % kShards];
      tracker.AddSnapshot(std::move(snapshot), kNowUs + turn);
      tracker.AddUsage(usage, usage.normalized(), kNowUs + turn);
    }
  }
  int64_t tracked = 0;
  for (const auto& shard : shards) tracked += shard->lane_count();
  if (tracked != lanes) {
    std::fprintf(stderr, "memory_bench: %lld lanes tracked, %lld built\n",
                 static_cast<long long>(tracked),
                 static_cast<long long>(lanes));
    std::exit(1);
  }
  Run run;
  run.lanes = lanes;
  run.heap_bytes = HeapInUse() - heap_before;
  run.peak_rss_kib = StatusKiB("VmHWM");
  run.rss_kib = StatusKiB("VmRSS");
  return run;
}

// Runs BuildLanes in a child process, so that each run's peak RSS is its
// own.
Run InChild(int64_t lanes, int turns, bool unique_lists) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(1);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const Run run = BuildLanes(lanes, turns, unique_lists);
    const ssize_t written = write(fds[1], &run, sizeof(run));
    _exit(written == sizeof(run) ? 0 : 1);
  }
  close(fds[1]);
  Run run;
  const ssize_t got = read(fds[0], &run, sizeof(run));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != sizeof(run) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "memory_bench: the run of %lld lanes failed\n",
                 static_cast<long long>(lanes));
    std::exit(1);
  }
  return run;
}

// Heap bytes of one 50-tool list as a snapshot holds it.
int64_t ToolListBytes() {
  const v1::Snapshot snapshot = MakeSnapshot(LaneId{"a", "s"}, 0, kTools);
  auto copy = std::make_unique<v1::Snapshot>();
  const int64_t before = HeapInUse();
  *copy->mutable_tools() = snapshot.tools();
  const int64_t bytes = HeapInUse() - before;
  return bytes;
}

int Main(int argc, char** argv) {
  int turns = 4;
  int64_t profile_lanes = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--turns=", 8) == 0) {
      turns = std::atoi(argv[i] + 8);
    } else if (std::strncmp(argv[i], "--lanes=", 8) == 0) {
      profile_lanes = std::atoll(argv[i] + 8);
    } else {
      std::fprintf(stderr, "usage: memory_bench [--turns=N] [--lanes=N]\n");
      return 2;
    }
  }
  if (profile_lanes > 0) {
    // One run in this process, for a heap profiler (heaptrack).
    const Run run = BuildLanes(profile_lanes, turns, /*unique_lists=*/false);
    std::printf("%lld lanes: %.0f bytes of heap per lane\n",
                static_cast<long long>(run.lanes),
                static_cast<double>(run.heap_bytes) / run.lanes);
    return 0;
  }
  const int64_t list_bytes = ToolListBytes();
  std::printf(
      "\nMemory per idle lane (%d lane trackers, %d turns per lane, "
      "%d-tool lists, %d distinct lists)\n",
      kShards, turns, kTools, kToolLists);
  std::printf("one %d-tool list: %lld bytes of heap\n", kTools,
              static_cast<long long>(list_bytes));
  std::printf(
      "| lanes | peak RSS (VmHWM) | heap in use | bytes per lane |"
      " target | result |\n|---|---|---|---|---|---|\n");
  // The lanes share kToolLists lists per tracker: a fixed cost, not a
  // lane's, taken out before dividing (the target is beyond the tool list).
  const int64_t shared_list_bytes =
      static_cast<int64_t>(kShards) * kToolLists * list_bytes;
  bool all_pass = true;
  for (const int64_t lanes : {10'000, 100'000, 1'000'000}) {
    const Run run = InChild(lanes, turns, /*unique_lists=*/false);
    const double per_lane =
        static_cast<double>(run.heap_bytes - shared_list_bytes) / lanes;
    const bool pass = per_lane <= kTargetBytesPerLane;
    all_pass = all_pass && pass;
    std::printf("| %lld | %.1f MiB | %.1f MiB | %.0f | <= %.0f | %s |\n",
                static_cast<long long>(lanes), run.peak_rss_kib / 1024.0,
                run.heap_bytes / 1048576.0, per_lane, kTargetBytesPerLane,
                pass ? "PASS" : "FAIL");
  }
  constexpr int64_t kSharingLanes = 10'000;
  const Run shared = InChild(kSharingLanes, turns, /*unique_lists=*/false);
  const Run unique = InChild(kSharingLanes, turns, /*unique_lists=*/true);
  const double extra =
      static_cast<double>(unique.heap_bytes - shared.heap_bytes) /
      kSharingLanes;
  // Shared lists: a list of its own costs each lane about one more list.
  const bool sharing = extra >= 0.5 * static_cast<double>(list_bytes);
  std::printf(
      "tool lists: %lld lanes with a list each use %.0f bytes per lane more "
      "than %lld lanes sharing %d lists (one list: %lld bytes): identical "
      "lists %s -- %s\n",
      static_cast<long long>(kSharingLanes), extra,
      static_cast<long long>(kSharingLanes), kToolLists,
      static_cast<long long>(list_bytes),
      sharing ? "shared" : "copied per lane", sharing ? "PASS" : "FAIL");
  std::printf("memory: %s\n", all_pass && sharing ? "PASS" : "FAIL");
  return 0;
}

}  // namespace
}  // namespace cachewatch::bench

int main(int argc, char** argv) { return cachewatch::bench::Main(argc, argv); }
