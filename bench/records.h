// Realistic ingest records for the benchmarks: what one agent lane reports
// per turn (a snapshot of ~50 tools before the request, a usage with the
// provider's raw JSON after it), so that the daemon and the baselines are fed
// the same bytes.
//
// Plain functions of their arguments; thread-safe.
#ifndef CACHEWATCH_BENCH_RECORDS_H_
#define CACHEWATCH_BENCH_RECORDS_H_

#include <cstdint>
#include <string>

#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"

namespace cachewatch::bench {

// Identifies one simulated agent lane.
struct LaneId {
  std::string agent;
  std::string session_id;
};

// The snapshot of turn `turn` (0-based) of `lane`: `tool_count` tools (the
// same names and hashes every turn, except that every 20th turn one schema
// changes, giving the classifier a break to find), three system sections
// and a message chain growing by two blocks a turn (at most 64).
v1::Snapshot MakeSnapshot(const LaneId& lane, int64_t turn,
                          int tool_count = 50);

// The usage answering MakeSnapshot(lane, turn): an Anthropic-shaped usage
// with its raw JSON (~300 bytes) and normalized token counts.
v1::Usage MakeUsage(const LaneId& lane, int64_t turn);

// The request id both records of turn `turn` carry.
std::string RequestId(int64_t turn);

}  // namespace cachewatch::bench

#endif  // CACHEWATCH_BENCH_RECORDS_H_
