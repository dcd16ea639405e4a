// The turns the store benchmarks write (store_bench, pg_store_bench): the
// records of records.h grouped per turn, the three store writes a stream
// handler makes of one turn (its snapshot, its usage, an OK classification),
// and the harness both time a RecordStore with.
//
// Plain functions of their arguments; thread-safe.
#ifndef CACHEWATCH_BENCH_STORE_TURNS_H_
#define CACHEWATCH_BENCH_STORE_TURNS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/records.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"
#include "daemon/store/record.h"
#include "daemon/store/record_store.h"

namespace cachewatch::bench {

// One turn of one lane: the snapshot sent before the request and the usage
// answering it.
struct StoreTurn {
  LaneId lane;
  std::shared_ptr<const v1::Snapshot> snapshot;
  // ToolListHash of the snapshot's tools, computed when the turn is made, as
  // the daemon's pipeline computes it when it receives the snapshot (before
  // the store: SnapshotWrite).
  std::string tool_list_hash;
  v1::Usage usage;
};

// The `turns` turns of writer `writer`: lanes of 100 turns each, the lanes of
// different writers distinct.
std::vector<StoreTurn> MakeStoreTurns(int writer, int turns);

// The snapshot, usage and OK classification of `turn` on its "main" lane.
std::vector<StoreWrite> WritesOf(const StoreTurn& turn);

// The turns of `writers` writers, `turns_per_writer` each (MakeStoreTurns).
std::vector<std::vector<StoreTurn>> MakeWritersTurns(int writers,
                                                     int turns_per_writer);

// The turns per writer a benchmark's command line asks for: --turns=N (at
// least `min`), else `fallback`. Any other argument prints a usage line
// naming `program` and gives nullopt.
std::optional<int> TurnsPerWriterFlag(int argc, char** argv,
                                      const char* program, int fallback,
                                      int min);

// How a turn's three records are spread over a writer's Writes.
enum class TurnSpread {
  // All three in one Write: every turn is new to the store.
  kOneWrite,
  // The snapshot in one Write, the usage and classification in the
  // writer's next (with the next turns' snapshots), as records arrive from
  // unary clients: every turn is inserted, then found and updated.
  kTwoWrites,
};

// Turns per second `store` writes `turns` at: a thread per writer, each
// Write carrying the records of `turns_per_write` of its turns (WritesOf
// each, spread as `spread` says); the batches are built before the clock
// starts. A failed write prints its status after `program` and exits 1.
double TimeStoreWrites(RecordStore& store,
                       const std::vector<std::vector<StoreTurn>>& turns,
                       int turns_per_write, const char* program,
                       TurnSpread spread = TurnSpread::kOneWrite);

}  // namespace cachewatch::bench

#endif  // CACHEWATCH_BENCH_STORE_TURNS_H_
