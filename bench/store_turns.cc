#include "bench/store_turns.h"

#include <string>

namespace cachewatch::bench {

namespace {
constexpr int kTurnsPerLane = 100;
}  // namespace

std::vector<StoreTurn> MakeStoreTurns(int writer, int turns) {
  std::vector<StoreTurn> result;
  result.reserve(turns);
  for (int i = 0; i < turns; ++i) {
    const LaneId lane{"bench-agent", "session-" + std::to_string(writer) + "-" +
                                         std::to_string(i / kTurnsPerLane)};
    const int64_t turn = i % kTurnsPerLane;
    result.push_back({lane,
                      std::make_shared<v1::Snapshot>(MakeSnapshot(lane, turn)),
                      MakeUsage(lane, turn)});
  }
  return result;
}

std::vector<StoreWrite> WritesOf(const StoreTurn& turn) {
  const LaneKey key{turn.lane.agent, turn.lane.session_id, "main"};
  v1::NormalizedUsage normalized = turn.usage.normalized();
  v1::TurnClassification classification;
  classification.set_verdict(v1::VERDICT_OK);
  classification.set_expected_reuse_tokens(normalized.cache_read_tokens());
  std::vector<StoreWrite> writes;
  writes.emplace_back(SnapshotWrite{key, turn.snapshot});
  writes.emplace_back(UsageWrite{key, turn.usage, normalized});
  writes.emplace_back(
      ClassificationWrite{key, turn.usage.request_id(), classification});
  return writes;
}

}  // namespace cachewatch::bench
