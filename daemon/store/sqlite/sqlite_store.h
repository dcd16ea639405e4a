// The SQLite store: an embedded database (WAL) of turns, tool lists
// (content-addressed, each distinct list once) and prompt_cache_breaks, with
// the queries behind the ListBreaks, ExplainBreak and GetLaneTimeline RPCs,
// the lane state for a restart, and retention. The schema (schema.cc) is a
// public contract for postmortem SQL.
//
// Writes are group-committed, leader/follower style (group_commit_queue.h):
// a Write() that finds no commit in flight commits at once on its own
// thread; writes arriving while a commit is in flight queue up, and when it
// ends the first of them commits everything queued (up to max_batch_records)
// in one transaction. Batches thus grow with the load and the commit time,
// not with a timer. Each Write() returns once its records are durable. Writes
// are idempotent per (lane key, request id, kind): a retry changes nothing. WAL
// checkpoints run on a thread of their own (checkpointer.h); a commit
// checkpoints only the small tail that lets the WAL restart, or the whole WAL
// when that thread falls behind.
//
// A lane key whose lane is empty means lane "main", in writes and queries.
//
// A SqliteStore is safe for concurrent use from multiple threads without
// external synchronization. Queries run on their own connection, one at a
// time, and see every write whose Write() has returned.
#ifndef CACHEWATCH_DAEMON_STORE_SQLITE_SQLITE_STORE_H_
#define CACHEWATCH_DAEMON_STORE_SQLITE_SQLITE_STORE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/service.pb.h"
#include "daemon/core/turn.h"
#include "daemon/store/break_queries.h"
#include "daemon/store/group_commit_queue.h"
#include "daemon/store/record.h"
#include "daemon/store/record_store.h"
#include "daemon/store/sqlite/checkpointer.h"

namespace cachewatch {

class ReadConnection;
class WriteConnection;

struct StoreOptions {
  // The database file; created with mode 0600 when missing. Default
  // "./cachewatch.db".
  std::string path = "./cachewatch.db";
  // Group commit (GroupCommitOptions): an extra wait, from the first queued
  // record, for more records before committing; 0 commits as soon as no
  // commit is in flight. Default 0.
  std::chrono::microseconds max_batch_delay{0};
  // ... and commits at most this many records per transaction (a single
  // Write() is never split, so a larger one commits alone). Default 1000.
  size_t max_batch_records = 1000;
  // Records waiting for a commit; beyond this Write() answers
  // ResourceExhausted at once. Default 100,000.
  size_t max_queued_records = 100000;
  // Connections for the ingest path's lane lookups (see LoadLane), each
  // running one lookup at a time. Default 4.
  int lookup_connections = 4;
  // synchronous=FULL (a commit survives power loss) instead of NORMAL (it
  // survives a process crash). Default false.
  bool synchronous_full = false;
  // Largest size of the database file, in bytes (rounded down to 4 KiB
  // pages); writes that need more fail with Unavailable, as on a full disk,
  // until rows are deleted. 0: no limit. Default 0.
  int64_t max_size_bytes = 0;
  // When the WAL is checkpointed, and by whom (checkpointer.h). Default: its
  // defaults.
  CheckpointerOptions checkpoints;
  // For tests: called on the committing thread just before each transaction
  // with the number of records it holds. Default none.
  std::function<void(size_t records)> before_commit;
};

// The SQLite implementation of RecordStore and BreakQueries (their contracts
// are in daemon/store/record_store.h and daemon/store/break_queries.h).
class SqliteStore final : public RecordStore, public BreakQueries {
 public:
  // Opens (creating when missing) and migrates the database.
  // FailedPrecondition when the file's schema is newer than this
  // build knows; Unavailable when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(
      const StoreOptions& options);

  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  // Drains the queue, then closes the database. No other call may be in
  // progress or follow; calls that returned on other threads are ordered
  // before the close through the store's own mutexes, so the caller may have
  // learnt of their return in any way (even one ThreadSanitizer cannot see).
  ~SqliteStore() override;

  // Queues `writes` as one unit (committed all together or not at all, in
  // a transaction shared with other callers' units) and blocks until they
  // are durable or failed; the calling thread may run that transaction
  // itself (see group commit above). ResourceExhausted at once when the
  // queue cannot take them (max_queued_records); Unavailable when the
  // database cannot be written (disk full, read-only, I/O error).
  absl::Status Write(std::vector<StoreWrite> writes) override;
  // Queues `writes` like Write() but returns without waiting for another
  // caller's commit; `done` is called on the thread that led their batch
  // (GroupCommitQueue::WriteAsync).
  void WriteAsync(std::vector<StoreWrite> writes, WriteDone done) override;

  absl::StatusOr<v1::ListBreaksResponse> ListBreaks(
      const v1::ListBreaksRequest& request) override;
  absl::StatusOr<v1::ExplainBreakResponse> ExplainBreak(
      const std::string& break_id) override;
  absl::StatusOr<v1::GetLaneTimelineResponse> LaneTimeline(const LaneKey& key,
                                                           int limit) override;

  absl::StatusOr<std::optional<v1::TurnClassification>> FindClassification(
      const LaneKey& key, const std::string& request_id) override;
  absl::StatusOr<std::vector<RestoredLane>> LoadRecentLanes(
      int64_t since_us) override;
  // Reads the lane's newest rows through turns_by_lane_time on one of the
  // lookup connections (lookup_connections); a second read, of at most 1000
  // rows, only when none of them showed a TTL.
  absl::StatusOr<std::optional<RestoredLane>> LoadLane(
      const LaneKey& key, const LaneLookup& lookup) override;

  // Deletes in transactions of at most 1000 rows of each kind, letting
  // queued writes commit in between; the rows counted are turns, breaks and
  // the tool lists no turn references any more.
  absl::StatusOr<int64_t> DeleteOlderThan(int64_t cutoff_us) override;

  // OK, or Unavailable naming why not: the size cap or the file system
  // within 64 KiB of full, the database read-only or failing.
  absl::Status ProbeWritable() override;

  size_t queued_records() const override;
  StoreStats stats() const override;
  // The WAL's checkpoints in detail (stats().checkpoints is their runs).
  CheckpointerStats checkpointer_stats() const;

  // For tests: caps the file at `pages` database pages (PRAGMA
  // max_page_count on the write connection), so that writes needing more
  // fail as on a full disk.
  absl::Status SetMaxPageCountForTesting(int64_t pages);

 private:
  SqliteStore(const StoreOptions& options,
              std::unique_ptr<WriteConnection> writer,
              std::unique_ptr<ReadConnection> reader,
              std::vector<std::unique_ptr<ReadConnection>> lookups,
              std::unique_ptr<Checkpointer> checkpointer);

  // The queue's Committer: commits the batch in one transaction on the
  // leader's thread.
  absl::Status CommitBatch(std::vector<GroupCommitQueue::Unit>& batch);

  const StoreOptions options_;

  // Held by the leader for each commit, and by retention batches.
  std::mutex writer_mu_;
  const std::unique_ptr<WriteConnection> writer_;  // Used under writer_mu_.
  // After writer_: the commits it runs use it.
  GroupCommitQueue queue_;

  std::mutex reader_mu_;
  const std::unique_ptr<ReadConnection> reader_;  // Used under reader_mu_.

  // The ingest path's lookups (LoadLane, FindClassification) run on
  // connections of their own, so that they neither wait behind a long query
  // nor, up to their number, behind each other.
  struct Lookup {
    std::mutex mu;
    std::unique_ptr<ReadConnection> reader;  // Used under mu.
  };
  // Runs `query` on a free lookup connection (waiting for one when none is).
  template <typename Query>
  auto WithLookup(const Query& query);
  std::vector<std::unique_ptr<Lookup>> lookups_;
  std::atomic<size_t> next_lookup_{0};

  // Thread-safe. Declared last, so stopped before the connections close.
  const std::unique_ptr<Checkpointer> checkpointer_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_SQLITE_SQLITE_STORE_H_
