// The ingest pipeline, the processor between receivers and exporters: a
// receiver (the gRPC service, daemon/receiver/grpc) hands it Snapshot and
// Usage records; it validates each, passes it through the sharded lane
// trackers, makes it and every classification it released durable in the
// RecordStore, and only then hands the classifications to its TurnExporter
// (a fan-out over the turn metrics, the live break stream, ...). Its API is
// the proto messages and absl::Status: a receiver needs no gRPC.
//
// Export is best effort: it runs after a successful commit only, its
// failures are counted in the telemetry and never change a record's answer,
// and it never blocks ingest (TurnExporter's contract: Export() does not
// block; an exporter that might runs behind an AsyncTurnExporter).
//
// Lane state is the store's (docs/CLASSIFICATION.md, "Lane state"): a record
// for a lane no tracker holds (idle, evicted by the lane cap, not used since a
// restart) first reads the lane from the store (RecordStore::LoadLane, one
// indexed lookup, only on such a miss, within retention) and restores it, so
// the record is diffed against the lane's real previous turn and a retry of a
// record answered before is a duplicate. A record that may retry a turn its
// lane no longer remembers is answered from the store's classification
// (LaneTracker::MayHaveForgotten). Lookups run without the shard's lock,
// so a miss holds up neither the shard's other lanes nor other misses. On a
// store shared by several daemons a held lane can be stale (another daemon
// wrote it since): the store then refuses the write (StaleLanesError), the
// lane is forgotten and the records are answered UNAVAILABLE, so that their
// retry reads the lane again (docs/FLEET.md).
//
// Processing is split in two steps so that a stream can commit many records
// in one store write: Process() (validation, lane lookups, tracking) and
// Commit() (one store write for all, then export). A record is acknowledged
// only after Commit() returned OK for it.
//
// Thread-safe: any number of threads may call any method; lanes are sharded
// over trackers, each behind its own mutex.
#ifndef CACHEWATCH_DAEMON_PIPELINE_INGEST_PIPELINE_H_
#define CACHEWATCH_DAEMON_PIPELINE_INGEST_PIPELINE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/service.pb.h"
#include "daemon/core/lane_tracker.h"
#include "daemon/exporter/turn_exporter.h"
#include "daemon/pipeline/clock.h"
#include "daemon/pipeline/validation.h"
#include "daemon/store/record_store.h"
#include "daemon/telemetry/telemetry.h"

namespace cachewatch {

struct PipelineOptions {
  TrackerOptions tracker;
  ClassifierOptions classifier;
  ValidationLimits limits;
  int shards = 16;  // Lane tracker shards.
  // Delete rows older than this; 0 keeps everything. Default 30 days.
  int64_t retention_us = 30LL * 24 * 3600 * 1'000'000;
  // Lanes whose last turn is newer than this are reloaded on start (the
  // others are read from the store when their next record comes).
  // Default 1 hour (the longest common TTL).
  int64_t restore_window_us = 3600LL * 1'000'000;
  // The classifications the pipeline releases itself (Maintain(): usages
  // whose snapshot never came; lanes restored on start) are written in
  // Write()s of at most
  // this many records, so that no commit outgrows the store's batch bound
  // (StoreOptions::max_batch_records). Default 1000.
  size_t max_records_per_write = 1000;
};

// One record on its way through the pipeline.
class IngestPipeline;

// Holds a lane in its tracker's memory (LaneTracker::Pin) while a record
// tracked there is not durable yet: released when the record's commit ends
// (IngestPipeline::Commit / CommitAsync) or the record is destroyed, which
// locks the lane's shard. Move-only.
class LanePin {
 public:
  LanePin() = default;
  // `incarnation`: what LaneTracker::Pin returned.
  LanePin(IngestPipeline* pipeline, LaneKey key, uint32_t incarnation)
      : pipeline_(pipeline), key_(std::move(key)), incarnation_(incarnation) {}
  LanePin(LanePin&& other) noexcept
      : pipeline_(std::exchange(other.pipeline_, nullptr)),
        key_(std::move(other.key_)),
        incarnation_(other.incarnation_) {}
  LanePin& operator=(LanePin&& other) noexcept;
  LanePin(const LanePin&) = delete;
  LanePin& operator=(const LanePin&) = delete;
  ~LanePin() { Release(); }

  void Release();

 private:
  IngestPipeline* pipeline_ = nullptr;  // Null: nothing held.
  LaneKey key_;
  uint32_t incarnation_ = 0;
};

struct ProcessedRecord {
  RecordKind kind = RecordKind::kSnapshot;
  std::string request_id;
  absl::Status status;  // Not OK: rejected before reaching the store.
  bool duplicate = false;
  v1::TurnClassification classification;  // For usages.
  std::vector<StoreWrite> writes;
  std::vector<ClassifiedTurn> classified;  // Exported after the commit.
  LanePin pin;  // Held from the tracking until the commit ends.
};

class IngestPipeline {
 public:
  // `store`, `exporter`, `telemetry` and `clock` must outlive the pipeline.
  IngestPipeline(const PipelineOptions& options, RecordStore* store,
                 TurnExporter* exporter, Telemetry* telemetry,
                 const Clock* clock);

  IngestPipeline(const IngestPipeline&) = delete;
  IngestPipeline& operator=(const IngestPipeline&) = delete;

  // Reloads the lanes active within the restore window from the store.
  // Returns the lanes read, each with its last classified turn
  // (RecordStore::LoadRecentLanes), for the other receivers' own state (the
  // proxy's lane inference).
  absl::StatusOr<std::vector<RestoredLane>> RestoreLanes();

  // Process a record the caller gives up: a stream moves it out of the
  // request it read (no copy), a unary call copies it.
  ProcessedRecord ProcessSnapshot(v1::Snapshot snapshot);
  // The same for a snapshot the caller shares: the pipeline keeps `snapshot`
  // (which must not be null) until the record is stored and its turn
  // classified, and never changes it; nor may the caller.
  ProcessedRecord ProcessSnapshot(std::shared_ptr<const v1::Snapshot> snapshot);
  // A record refused before it could be parsed into a snapshot or usage
  // (e.g. a request without one); counted like any rejected record.
  ProcessedRecord Reject(RecordKind kind, absl::Status status);
  ProcessedRecord ProcessUsage(v1::Usage usage);
  // Makes every OK record durable in one store write; on success exports
  // their classifications. On failure sets each OK record's status to the
  // store's error (RESOURCE_EXHAUSTED or UNAVAILABLE) and exports nothing.
  void Commit(std::vector<ProcessedRecord*> records);
  // Commit() without waiting for other callers' commits (a unary call's
  // receiver hands its record over and goes on): the records go into the
  // store's queue now (RecordStore::WriteAsync, which refuses them at once
  // when it is full), and `done` is called exactly once when every record's
  // status is final and their classifications are exported — on this thread
  // (at once when none needs a commit, or when it led the commit) or on the
  // thread that committed them. The records must live until then; `done`
  // must not block.
  void CommitAsync(std::vector<ProcessedRecord*> records,
                   std::function<void()> done);

  // Expires unpaired snapshots and idle lanes, updates gauges and, at most
  // once a minute, applies retention; logs the store and retention errors
  // (the next call tries again). Called periodically.
  void Maintain();

  size_t lane_count();

  // The limits records and queries are validated against.
  const ValidationLimits& limits() const { return options_.limits; }

 private:
  struct Shard {
    std::mutex mutex;
    std::unique_ptr<LaneTracker> tracker;  // Guarded by mutex.
  };

  Shard& ShardFor(const LaneKey& key);
  // Runs `track` on the tracker of lane `key` under its shard's lock, once
  // that tracker holds the lane (restoring it from the store first when it
  // does not; turns the restore released are appended to `released`), and
  // returns OK with `answered` empty. When the record, of `request_id` at
  // client time `time_us`, retries a turn only the store remembers, sets
  // `answered` to its stored classification instead and does not run
  // `track`. A failed lookup is returned (Unavailable) and nothing is run.
  // When `track` ran, the lane is pinned for the record (`pin`).
  absl::Status Track(const LaneKey& key, const std::string& request_id,
                     int64_t time_us, int64_t now_us,
                     std::vector<ClassifiedTurn>& released,
                     std::optional<v1::TurnClassification>& answered,
                     LanePin& pin,
                     const std::function<void(LaneTracker&)>& track);
  friend class LanePin;
  void Unpin(const LaneKey& key, uint32_t incarnation);
  // How far back a lane lookup at `now_us` reads.
  LaneLookup LookupAt(int64_t now_us) const;
  void CountOutcome(const ProcessedRecord& record);
  // Commit()'s two halves: moves the OK records' writes out into one
  // store write; after the store answered `committed` (for `count` writes
  // queued at `start`), sets the records' statuses, counts and exports them.
  static std::vector<StoreWrite> TakeWrites(
      const std::vector<ProcessedRecord*>& records);
  void FinishCommit(const std::vector<ProcessedRecord*>& records,
                    absl::Status committed, size_t count,
                    std::chrono::steady_clock::time_point start);
  // Forgets the lanes a failed store write found stale (a shared store,
  // daemon/store/stale_lanes.h); whether there were any.
  bool DropStaleLanes(const absl::Status& status);
  void Export(const std::vector<ClassifiedTurn>& classified);
  static void AddClassifications(const std::vector<ClassifiedTurn>& classified,
                                 std::vector<StoreWrite>& writes);
  // `turns` (moved from) in parts of at most max_records_per_write turns.
  std::vector<std::vector<ClassifiedTurn>> SplitForWrites(
      std::vector<ClassifiedTurn>& turns) const;

  const PipelineOptions options_;
  RecordStore* const store_;
  TurnExporter* const exporter_;
  Telemetry* const telemetry_;
  const Clock* const clock_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::mutex maintenance_mutex_;
  int64_t last_retention_us_ = 0;  // Guarded by maintenance_mutex_.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_PIPELINE_INGEST_PIPELINE_H_
