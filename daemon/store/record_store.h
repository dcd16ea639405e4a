// RecordStore: the ingest pipeline's durable store — the write path (a batch
// of records committed durably before it is acknowledged), the lane state it
// gives back (after a restart, for a lane the trackers no longer hold, for a
// retried usage), retention and health. SqliteStore
// (daemon/store/sqlite/sqlite_store.h) implements it; a second store
// implements the same contract.
//
// Contract for every implementation:
// - Write() returns OK only once every record of the batch is durable (it
//   survives a process crash), and commits the batch all together or not at
//   all. Writes are idempotent per (lane key, request id, kind): a retry
//   changes nothing already stored. ResourceExhausted when the store cannot
//   take more now (back-pressure); Unavailable when it cannot write at all
//   (the store keeps going and a later Write() may succeed).
// - A lane key whose lane is empty means lane "main", in writes and lookups.
// - Every lookup sees every write whose Write() has returned.
//
// Thread-safety: every method may be called concurrently from any number of
// threads without external synchronization.
#ifndef CACHEWATCH_DAEMON_STORE_RECORD_STORE_H_
#define CACHEWATCH_DAEMON_STORE_RECORD_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/break.pb.h"
#include "daemon/core/turn.h"
#include "daemon/store/record.h"

namespace cachewatch {

// Health and throughput counters of a store, since it was opened. The
// daemon's telemetry (daemon/telemetry) exports what ingest observes; these
// are the store's own view, for health checks and tests.
struct StoreStats {
  size_t queued_records = 0;  // Waiting for a commit now.
  int64_t commits = 0;        // Transactions committed.
  int64_t committed_records = 0;
  int64_t failed_commits = 0;
  // Records refused with ResourceExhausted because the queue was full.
  int64_t rejected_records = 0;
  bool last_commit_failed = false;
  std::string last_error;   // Of the last failed commit; empty if none.
  int64_t checkpoints = 0;  // Store-specific maintenance (SQLite: WAL).
};

class RecordStore {
 public:
  virtual ~RecordStore() = default;

  // Makes `writes` durable as one unit (see the contract above); blocks
  // until they are durable or failed. OK for no writes.
  virtual absl::Status Write(std::vector<StoreWrite> writes) = 0;

  // Write() without waiting for other callers' commits: `done` gets the
  // status Write() would have returned, exactly once, once the writes are
  // durable or failed — on this thread or on the one that committed them —
  // and a refusal (ResourceExhausted, Unavailable) before WriteAsync()
  // returns. `done` must not block. This default runs Write() and then
  // `done` on the caller's thread; a group-committing store queues the
  // writes and returns (group_commit_queue.h).
  using WriteDone = std::function<void(absl::Status)>;
  virtual void WriteAsync(std::vector<StoreWrite> writes, WriteDone done) {
    done(Write(std::move(writes)));
  }

  // For a restart: every lane's last classified turn with request time >=
  // since_us (client clock), to seed LaneTracker::Restore.
  virtual absl::StatusOr<std::vector<RestoredLane>> LoadRecentLanes(
      int64_t since_us) = 0;

  // One lane's state, for a lane no tracker holds (docs/CLASSIFICATION.md,
  // "Lane state"), within `lookup`'s bounds (retention; the pending timeout;
  // how many answers and waiting turns a lane keeps): the baseline — its last
  // classified turn by (request time, request id), snapshot, usage and provider
  // diagnostics rebuilt, and when that turn has no snapshot and was no break,
  // the snapshot of the newest earlier classified turn that has one (as the
  // tracker keeps it) —; the TTL the lane's most recent classified turn
  // with a 5 m / 1 h write split showed (0 if none); its newest
  // `lookup.answered` classified turns with their stored classifications,
  // break events included, oldest first; and its unclassified turns received
  // at or after `lookup.waiting_since_us` and newer than the oldest answer
  // read (at most `lookup.waiting`), with when they were received. Through
  // one indexed read of the lane's newest turns (a lane never seen: one
  // index seek); nullopt when the lane has no turn within the bounds.
  virtual absl::StatusOr<std::optional<RestoredLane>> LoadLane(
      const LaneKey& key, const LaneLookup& lookup) = 0;

  // The stored classification of a turn, for answering a retried usage the
  // tracker no longer remembers; nullopt when the turn is unknown or not
  // classified yet.
  virtual absl::StatusOr<std::optional<v1::TurnClassification>>
  FindClassification(const LaneKey& key, const std::string& request_id) = 0;

  // Retention: deletes turns and breaks with request time < cutoff_us (and
  // whatever only they referenced) without holding up writes for long.
  // Returns the rows deleted.
  virtual absl::StatusOr<int64_t> DeleteOlderThan(int64_t cutoff_us) = 0;

  // Health probe: whether a write could succeed now, changing nothing. OK,
  // or Unavailable naming why not (e.g. the disk or a size cap is full, the
  // store is read-only or unreachable). Cheap enough to call every second;
  // the daemon calls it at start and each second while unhealthy.
  virtual absl::Status ProbeWritable() = 0;

  // Records waiting for a commit.
  virtual size_t queued_records() const = 0;
  virtual StoreStats stats() const = 0;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_RECORD_STORE_H_
