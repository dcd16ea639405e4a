// The durable store: an embedded SQLite database (WAL) of turns, tool lists
// (content-addressed, each distinct list once) and prompt_cache_breaks, with
// the queries behind the ListBreaks, ExplainBreak and GetLaneTimeline RPCs,
// the lane state for a restart, and retention. The schema (schema.cc) is a
// public contract for postmortem SQL.
//
// Writes are group-committed, leader/follower style: a Write() that finds no
// commit in flight commits at once on its own thread; writes arriving while
// a commit is in flight queue up, and when it ends the first of them commits
// everything queued (up to max_batch_records) in one transaction. Batches
// thus grow with the load and the commit time, not with a timer. Each
// Write() returns once its records are durable. Writes are idempotent per
// (lane key, request id, kind): a retry changes nothing. WAL checkpoints run
// on a thread of their own (checkpointer.h), not inside a commit.
//
// A lane key whose lane is empty means lane "main", in writes and queries.
//
// A Store is safe for concurrent use from multiple threads without external
// synchronization. Queries run on their own connection, one at a time, and
// see every write whose Write() has returned.
#ifndef CACHEWATCH_DAEMON_STORE_STORE_H_
#define CACHEWATCH_DAEMON_STORE_STORE_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/service.pb.h"
#include "daemon/core/turn.h"
#include "daemon/store/record.h"

namespace cachewatch {

class Checkpointer;
class ReadConnection;
class WriteConnection;

struct StoreOptions {
  // The database file; created with mode 0600 when missing. Default
  // "./cachewatch.db".
  std::string path = "./cachewatch.db";
  // Group commit: an extra wait, from the first queued record, for more
  // records before committing; 0 commits as soon as no commit is in flight.
  // Default 0.
  std::chrono::microseconds max_batch_delay{0};
  // ... and commits at most this many records per transaction (a single
  // Write() is never split, so a larger one commits alone). Default 1000.
  size_t max_batch_records = 1000;
  // Records waiting for a commit; beyond this Write() answers
  // ResourceExhausted at once. Default 100,000.
  size_t max_queued_records = 100000;
  // synchronous=FULL (a commit survives power loss) instead of NORMAL (it
  // survives a process crash). Default false.
  bool synchronous_full = false;
  // Largest size of the database file, in bytes (rounded down to 4 KiB
  // pages); writes that need more fail with Unavailable, as on a full disk,
  // until rows are deleted. 0: no limit. Default 0.
  int64_t max_size_bytes = 0;
  // For tests: called on the committing thread just before each transaction
  // with the number of records it holds. Default none.
  std::function<void(size_t records)> before_commit;
};

// Health and throughput counters, since Open().
struct StoreStats {
  size_t queued_records = 0;  // Waiting for a commit now.
  int64_t commits = 0;        // Transactions committed.
  int64_t committed_records = 0;
  int64_t failed_commits = 0;
  // Records refused with ResourceExhausted because the queue was full.
  int64_t rejected_records = 0;
  std::chrono::microseconds last_commit_duration{0};
  bool last_commit_failed = false;
  std::string last_error;  // Of the last failed commit; empty if none.
  // WAL checkpoints run off the commit path (checkpointer.h).
  int64_t checkpoints = 0;
};

class Store {
 public:
  // Opens (creating when missing) and migrates the database.
  // FailedPrecondition when the file's schema is newer than this
  // build knows; Unavailable when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<Store>> Open(
      const StoreOptions& options);

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Closes the database. No other call may be in progress or follow.
  ~Store();

  // Queues `writes` as one unit (committed all together or not at all, in
  // a transaction shared with other callers' units) and blocks until they
  // are durable or failed; the calling thread may run that transaction
  // itself (see group commit above). OK for no writes. ResourceExhausted at
  // once when the queue cannot take them; Unavailable when the database cannot
  // be written (disk full, read-only, I/O error): the store keeps going, and a
  // later Write() succeeds once the database is writable again. Nothing
  // committed is ever lost.
  absl::Status Write(std::vector<StoreWrite> writes);

  // Breaks matching every filter of `request`, newest first (by request
  // time, then break id), one page at a time: page_size defaults to 100 and
  // is capped at 1000; next_page_token is empty on the last page.
  // InvalidArgument for a negative page size or a bad page token.
  absl::StatusOr<v1::ListBreaksResponse> ListBreaks(
      const v1::ListBreaksRequest& request);

  // The break and the two snapshots it compares (each absent when never
  // received), rebuilt from the stored turns. NotFound for an unknown id.
  absl::StatusOr<v1::ExplainBreakResponse> ExplainBreak(
      const std::string& break_id);

  // The lane's most recent `limit` turns (default 200 when <= 0, at most
  // 5000), oldest first.
  absl::StatusOr<v1::GetLaneTimelineResponse> LaneTimeline(const LaneKey& key,
                                                           int limit);

  // The stored classification of a turn, for answering a retried usage the
  // tracker no longer remembers; nullopt when the turn is unknown or not
  // classified yet.
  absl::StatusOr<std::optional<v1::TurnClassification>> FindClassification(
      const LaneKey& key, const std::string& request_id);

  // For a restart: every lane's last classified turn with request time >=
  // since_us (client clock), to seed LaneTracker::Restore.
  absl::StatusOr<std::vector<RestoredLane>> LoadRecentLanes(int64_t since_us);

  // Retention: deletes turns and breaks with request time < cutoff_us, then
  // the tool lists no turn references, in small transactions so writes are
  // never held up long. Returns the rows deleted (turns, breaks and tool
  // lists).
  absl::StatusOr<int64_t> DeleteOlderThan(int64_t cutoff_us);

  // Whether a write could succeed now, changing nothing: OK, or Unavailable
  // naming why not (size cap or file system within 64 KiB of full, database
  // read-only or failing). Cheap: for health at start and after a failure.
  absl::Status ProbeWritable();

  // Records waiting for a commit.
  size_t queued_records() const;
  StoreStats stats() const;

  // For tests: caps the file at `pages` database pages (PRAGMA
  // max_page_count on the write connection), so that writes needing more
  // fail as on a full disk.
  absl::Status SetMaxPageCountForTesting(int64_t pages);

 private:
  // One Write() call waiting for its commit.
  struct PendingWrite;

  Store(const StoreOptions& options, std::unique_ptr<WriteConnection> writer,
        std::unique_ptr<ReadConnection> reader,
        std::unique_ptr<Checkpointer> checkpointer);

  // Called by the leader (the write at the queue's front, no commit in
  // flight): waits up to max_batch_delay for a full batch, then takes the
  // batch off the queue and marks a commit in flight. `lock` holds
  // queue_mu_.
  std::vector<PendingWrite*> TakeBatch(std::unique_lock<std::mutex>& lock)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_);
  // Commits a batch (without queue_mu_ held) and answers its callers.
  void CommitBatch(const std::vector<PendingWrite*>& batch)
      ABSL_LOCKS_EXCLUDED(queue_mu_);
  bool BatchFull() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_);

  const StoreOptions options_;

  // std::mutex rather than absl::Mutex: ThreadSanitizer sees through it
  // (Debian's abseil is not instrumented).
  mutable std::mutex queue_mu_;
  // Notified whenever the queue, `committing_` or `closing_` changes.
  std::condition_variable queue_changed_;
  std::deque<PendingWrite*> queue_ ABSL_GUARDED_BY(queue_mu_);
  size_t queued_records_ ABSL_GUARDED_BY(queue_mu_) = 0;
  bool closing_ ABSL_GUARDED_BY(queue_mu_) = false;
  // A leader has taken a batch and not yet answered it.
  bool committing_ ABSL_GUARDED_BY(queue_mu_) = false;
  StoreStats stats_ ABSL_GUARDED_BY(queue_mu_);
  // Batches finished, committed or failed.
  int64_t finished_batches_ ABSL_GUARDED_BY(queue_mu_) = 0;

  // Held by the leader for each commit, and by retention batches; never
  // together with queue_mu_.
  std::mutex writer_mu_;
  const std::unique_ptr<WriteConnection> writer_ ABSL_PT_GUARDED_BY(writer_mu_);

  std::mutex reader_mu_;
  const std::unique_ptr<ReadConnection> reader_ ABSL_PT_GUARDED_BY(reader_mu_);

  // Thread-safe. Declared last, so stopped before the connections close.
  const std::unique_ptr<Checkpointer> checkpointer_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_STORE_H_
