// The turns the store benchmarks write (store_bench, pg_store_bench): the
// records of records.h grouped per turn, and the three store writes a stream
// handler makes of one turn (its snapshot, its usage, an OK classification).
//
// Plain functions of their arguments; thread-safe.
#ifndef CACHEWATCH_BENCH_STORE_TURNS_H_
#define CACHEWATCH_BENCH_STORE_TURNS_H_

#include <memory>
#include <vector>

#include "bench/records.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"
#include "daemon/store/record.h"

namespace cachewatch::bench {

// One turn of one lane: the snapshot sent before the request and the usage
// answering it.
struct StoreTurn {
  LaneId lane;
  std::shared_ptr<const v1::Snapshot> snapshot;
  v1::Usage usage;
};

// The `turns` turns of writer `writer`: lanes of 100 turns each, the lanes of
// different writers distinct.
std::vector<StoreTurn> MakeStoreTurns(int writer, int turns);

// The snapshot, usage and OK classification of `turn` on its "main" lane.
std::vector<StoreWrite> WritesOf(const StoreTurn& turn);

}  // namespace cachewatch::bench

#endif  // CACHEWATCH_BENCH_STORE_TURNS_H_
