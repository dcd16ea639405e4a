// GroupCommitQueue: the leader/follower group commit both stores write
// through. Callers' writes queue up; a caller that finds its write at the
// front of the queue and no commit in flight becomes the leader: it takes a
// batch off the queue and commits it, on its own thread, through the
// store's Committer (one transaction), then answers every caller in the
// batch. Writes arriving while a commit is in flight wait, and when it ends
// the first of them leads the next batch. Batches thus grow with the load
// and the commit time, not with a timer (unless max_batch_delay asks for an
// extra wait).
//
// A write is queued either by Write(), whose caller sleeps until its batch
// is answered, or by WriteAsync(), whose caller goes on and is answered
// through a callback: no thread waits for it. A WriteAsync() that finds no
// commit in flight leads, on its caller's thread, like a Write(); a leader
// that finishes a batch and finds a WriteAsync()'s write at the front of the
// queue leads the next batch too (no caller sleeps there to lead it), and so
// on until the queue is empty or a Write()'s caller is at its front. So a
// Write() may return only after committing others' asynchronous writes
// queued behind its own.
//
// Contract:
// - Write() returns only after the batch holding its writes was committed
//   (or failed) by whichever caller led it, with that commit's status (its
//   code and message) — or the status the Committer gave its unit alone
//   (Unit::refused), whole. WriteAsync() calls its callback exactly once,
//   with the same status, at the same point (on the leader's thread, without
//   the queue's lock).
// - A batch holds at most max_batch_records records, but never splits one
//   write: a larger one commits alone. Writes commit in the order they
//   were queued.
// - ResourceExhausted at once, naming the limit, when queuing a write would
//   put more than max_queued_records records in the queue (the records are
//   counted in stats().rejected_records); Unavailable once Close() was
//   called. WriteAsync() answers these through its callback before it
//   returns.
// - stats(): commits (batches with at least one unit committed), committed
//   records, failed commits and the last one's error, rejected records, the
//   records queued now.
//
// Thread-safe: every method may be called concurrently, but for the
// destructor, which requires that no Write() be in progress and every
// WriteAsync() callback be called. The Committer and the callbacks are
// called on a leader's thread without the queue's lock, one batch at a time.
#ifndef CACHEWATCH_DAEMON_STORE_GROUP_COMMIT_QUEUE_H_
#define CACHEWATCH_DAEMON_STORE_GROUP_COMMIT_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "daemon/store/record.h"
#include "daemon/store/record_store.h"

namespace cachewatch {

struct GroupCommitOptions {
  // An extra wait, from when the batch's first write was queued, for more
  // records before committing; 0 commits as soon as no commit is in flight.
  // The leader waits it out on its own thread, a WriteAsync() caller's too.
  // Default 0.
  std::chrono::microseconds max_batch_delay{0};
  // Most records of one batch (a single Write() is never split, so a larger
  // one commits alone). Default 1000.
  size_t max_batch_records = 1000;
  // Records waiting for a commit; beyond this Write() answers
  // ResourceExhausted at once. Default 100,000.
  size_t max_queued_records = 100000;
};

class GroupCommitQueue {
 public:
  // One Write() call's records, as the Committer sees them.
  struct Unit {
    const std::vector<StoreWrite>* writes;
    // Set by the Committer to answer this unit alone with this (non-OK)
    // status: it is then neither committed nor counted. Left OK, the unit
    // takes the batch's status.
    absl::Status refused;
  };
  // Commits `batch` (all of it but the units it refuses, in one transaction)
  // and returns the batch's status.
  using Committer = std::function<absl::Status(std::vector<Unit>& batch)>;

  GroupCommitQueue(const GroupCommitOptions& options, Committer committer);
  GroupCommitQueue(const GroupCommitQueue&) = delete;
  GroupCommitQueue& operator=(const GroupCommitQueue&) = delete;
  ~GroupCommitQueue();

  // Called with a WriteAsync()'s status.
  using Done = std::function<void(absl::Status)>;

  // Queues `writes` as one unit and blocks until its batch is committed or
  // failed (see the contract above). OK at once for no writes.
  absl::Status Write(std::vector<StoreWrite> writes);

  // Queues `writes` as one unit, or refuses them, like Write(), but without
  // waiting for another caller's commit: `done` gets the unit's status once
  // its batch is committed or failed, on the thread that led it — this one,
  // before WriteAsync() returns, when it finds no commit in flight (and
  // then also for the asynchronous writes queued behind, see above). OK at
  // once for no writes.
  void WriteAsync(std::vector<StoreWrite> writes, Done done);

  // From now on Write() answers Unavailable; writes already queued still
  // commit, without waiting out max_batch_delay. Idempotent.
  void Close();

  // For maintenance that should let queued writes go first: returns at once
  // when nothing is queued or the queue is closed, else once a batch has
  // finished (committed or failed) since the call.
  void WaitForQueuedBatch();

  // The cause of the last failed commit is known to be gone (e.g. the
  // server is reachable again): stats().last_commit_failed is false until
  // the next commit fails.
  void ForgetLastFailure();

  size_t queued_records() const;
  // commits, committed_records, failed_commits, rejected_records,
  // last_commit_failed, last_error and queued_records; the rest zero.
  StoreStats stats() const;

 private:
  struct PendingWrite;

  // Requires mu_: queues `pending`, or returns why not (counting a
  // refusal).
  absl::Status Enqueue(PendingWrite* pending);
  // Called by the leader: waits up to max_batch_delay for a full batch,
  // then takes the batch off the queue. `lock` holds mu_.
  std::vector<PendingWrite*> TakeBatch(std::unique_lock<std::mutex>& lock);
  // Called by the leader with the batch it took (`lock` holds mu_, and is
  // released while committing): commits it and answers its callers, then
  // leads the next batches while an asynchronous write is at the front of
  // the queue. Returns with `lock` held and the leader's role given up.
  void Lead(std::vector<PendingWrite*> batch,
            std::unique_lock<std::mutex>& lock);
  // Commits a batch (without mu_ held) and answers its callers: a Write()'s
  // under mu_, a WriteAsync()'s callback after, without it. Returns whether
  // the leader leads the next batch (a WriteAsync()'s write is at the front
  // of the queue); if not, it gave up the role.
  bool CommitBatch(const std::vector<PendingWrite*>& batch);
  // Requires mu_.
  bool BatchFull() const;

  const GroupCommitOptions options_;
  const Committer committer_;

  // std::mutex rather than absl::Mutex: ThreadSanitizer sees through it
  // (Debian's abseil is not instrumented).
  mutable std::mutex mu_;
  // Notified when a batch is answered, the leader gives up its role or
  // Close() is called, and when a write is queued while a leader waits out
  // max_batch_delay (no other waiter needs that, nor a batch taken).
  std::condition_variable changed_;
  std::deque<PendingWrite*> queue_;  // Guarded by mu_.
  size_t queued_records_ = 0;        // Guarded by mu_.
  bool closing_ = false;             // Guarded by mu_.
  // A leader has taken a batch and not yet answered it.
  bool committing_ = false;  // Guarded by mu_.
  // The leader waits out max_batch_delay.
  bool delaying_ = false;  // Guarded by mu_.
  // Batches finished, committed or failed.
  int64_t finished_batches_ = 0;  // Guarded by mu_.
  StoreStats stats_;              // Guarded by mu_.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_GROUP_COMMIT_QUEUE_H_
