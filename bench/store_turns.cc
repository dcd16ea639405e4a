#include "bench/store_turns.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "daemon/store/columns.h"

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
    auto snapshot = std::make_shared<v1::Snapshot>(MakeSnapshot(lane, turn));
    std::string list_hash = ToolListHash(snapshot->tools());
    result.push_back({lane, std::move(snapshot), std::move(list_hash),
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
  writes.emplace_back(SnapshotWrite{key, turn.snapshot, turn.tool_list_hash});
  writes.emplace_back(UsageWrite{key, turn.usage, normalized});
  writes.emplace_back(
      ClassificationWrite{key, turn.usage.request_id(), classification});
  return writes;
}

std::vector<std::vector<StoreTurn>> MakeWritersTurns(int writers,
                                                     int turns_per_writer) {
  std::vector<std::vector<StoreTurn>> turns;
  for (int w = 0; w < writers; ++w) {
    turns.push_back(MakeStoreTurns(w, turns_per_writer));
  }
  return turns;
}

std::optional<int> TurnsPerWriterFlag(int argc, char** argv,
                                      const char* program, int fallback,
                                      int min) {
  int turns = fallback;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--turns=", 8) == 0) {
      turns = std::max(min, std::atoi(argv[i] + 8));
    } else {
      std::fprintf(stderr, "usage: %s [--turns=N]\n", program);
      return std::nullopt;
    }
  }
  return turns;
}

double TimeStoreWrites(RecordStore& store,
                       const std::vector<std::vector<StoreTurn>>& turns,
                       int turns_per_write, const char* program,
                       TurnSpread spread) {
  std::vector<std::vector<std::vector<StoreWrite>>> batches(turns.size());
  int64_t written = 0;
  for (size_t w = 0; w < turns.size(); ++w) {
    const size_t per_write = static_cast<size_t>(turns_per_write);
    // kTwoWrites: the usages and classifications of the previous batch's
    // turns, carried into the next batch.
    std::vector<StoreWrite> carried;
    for (size_t i = 0; i < turns[w].size(); i += per_write) {
      std::vector<StoreWrite> batch = std::move(carried);
      carried.clear();
      for (size_t j = i; j < std::min(turns[w].size(), i + per_write); ++j) {
        std::vector<StoreWrite> writes = WritesOf(turns[w][j]);
        for (size_t k = 0; k < writes.size(); ++k) {
          const bool later = spread == TurnSpread::kTwoWrites && k > 0;
          (later ? carried : batch).push_back(std::move(writes[k]));
        }
        ++written;
      }
      batches[w].push_back(std::move(batch));
    }
    if (!carried.empty()) batches[w].push_back(std::move(carried));
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (auto& writer_batches : batches) {
    threads.emplace_back([&store, &writer_batches, program] {
      for (std::vector<StoreWrite>& batch : writer_batches) {
        const absl::Status status = store.Write(std::move(batch));
        if (!status.ok()) {
          std::fprintf(stderr, "%s: %s\n", program, status.ToString().c_str());
          std::exit(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return written / std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace cachewatch::bench
