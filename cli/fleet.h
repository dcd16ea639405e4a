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
// OpenAI Chat Completions, Gemini) with token counts that follow the
// provider's caching rules. Client timestamps run faster than wall time and
// stay within [now - 11 h, now].
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
  absl::Status NextStep(int64_t now_us,
                        std::vector<v1::RecordRequest>& records);

  const FleetCounts& counts() const { return counts_; }

 private:
  class Lane;

  const FleetOptions options_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  FleetCounts counts_;
};

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_FLEET_H_
