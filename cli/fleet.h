// A synthetic fleet of agents for `cachewatch simulate`: sessions of lanes
// that each produce, turn by turn, the snapshot and usage a real agent would
// send, with every cause of a prompt cache break injected at a realistic
// rate (design §1): MCP tools registering in racy order, a timestamp in the
// system prompt, schema edits, tools added and removed, model switches,
// request option and cache_control changes, history rewrites, compactions
// (hinted as expected drops), long tool fan-outs past the breakpoint
// lookback, idle gaps beyond the TTL and plain provider evictions.
//
// Snapshots are built with the client library's SnapshotBuilder, so their
// hashes are real. Usages carry each provider's raw usage JSON (Anthropic,
// OpenAI Chat Completions, Gemini) with token counts from a simulated
// provider cache with real prefix semantics, shared by the lanes of a
// session: entries keyed by the hash of the whole prefix up to a block;
// Anthropic caches at its breakpoints (the last tool, the system prompt, the
// last message block) and a breakpoint finds an earlier entry only within 20
// blocks; OpenAI and Gemini cache every prefix and read the longest one
// (OpenAI in steps of 128 tokens, from 1,024); an entry lives for its TTL
// from its last write or hit; an early eviction drops the session's entries.
// Client timestamps run faster than wall time and stay within
// [now - 11 h, now].
//
// Each turn also yields its ground truth (TurnTruth): what was injected and
// what the simulated cache did, so that a detector's verdicts can be scored.
// Messy arrival (FleetOptions): lost snapshots, retried usages and idle gaps
// of hours are made here; reordering is the sender's (a random delay per
// record, see `cachewatch simulate --jitter`).
//
// Deterministic: the same options send the same records, apart from the
// time base. Not thread-safe.
#ifndef CACHEWATCH_CLI_FLEET_H_
#define CACHEWATCH_CLI_FLEET_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cachewatch/v1/service.pb.h"

namespace cachewatch::cli {

struct FleetOptions {
  int sessions = 5;           // Concurrent sessions. Default 5.
  int lanes_per_session = 2;  // Main loop plus subagents. Default 2.
  int turns = 40;             // Turns per session; then a new one starts.
  uint64_t seed = 1;
  // Agent names, given to sessions in turn. Default claude-code, my-agent.
  std::vector<std::string> agents = {"claude-code", "my-agent"};
  // Prefix of every session id; tells one run's lanes from another's.
  std::string tag = "sim";
  // Share of snapshots never sent (a reporter that dropped them).
  double lost_snapshot_rate = 0;
  // Share of usages sent twice (a retry whose first ack was lost).
  double duplicate_usage_rate = 0;
  // Share of idle breaks that last hours (2 to 5) instead of minutes.
  double long_idle_rate = 0;
};

// The ground truth of one turn: why its cache read what it read.
struct TurnTruth {
  std::string agent;
  std::string session_id;
  std::string lane;
  std::string request_id;
  // "cold_start", "ok", "expected_drop", "below_min_cacheable", or for a
  // break (the lane's cached prefix missed by at least 2,000 tokens and 5 %)
  // the reason as the design names it (e.g. "tools_added", "ttl_expired");
  // "unexplained" for a break with no injected or provider-side cause.
  std::string truth;
  // What the provider cache did with the lane's previous prefix: "hit",
  // "expired", "evicted", "beyond_lookback", "changed" (the prompt no
  // longer starts with it), "none" (first turn).
  std::string cache;
  int64_t expected_reuse_tokens = 0;
  int64_t cache_read_tokens = 0;
  bool snapshot_lost = false;
};

// What the fleet sent, for its summary.
struct FleetCounts {
  int64_t turns = 0;
  int64_t records = 0;
  std::map<std::string, int64_t> lanes_by_provider;
  // Injected causes by the reason the daemon should give them (or
  // "compaction (expected drop)").
  std::map<std::string, int64_t> causes;
};

class Fleet {
 public:
  explicit Fleet(FleetOptions options);
  ~Fleet();

  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  // Appends the next turn of every lane, snapshot then usage, to `records`,
  // all timestamped at most `now_us`. Lanes whose session has run its turns
  // start a new session. Fails only if the client library refuses a
  // snapshot, which is a bug.
  // The turns' ground truth goes to `truths` when not null.
  absl::Status NextStep(int64_t now_us, std::vector<v1::RecordRequest>& records,
                        std::vector<TurnTruth>* truths = nullptr);

  const FleetCounts& counts() const { return counts_; }

 private:
  class Lane;
  class ProviderCaches;

  const FleetOptions options_;
  std::unique_ptr<ProviderCaches> caches_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  FleetCounts counts_;
};

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_FLEET_H_
