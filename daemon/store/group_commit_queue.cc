#include "daemon/store/group_commit_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cachewatch {

// One write waiting for its commit: a Write()'s on its caller's stack, a
// WriteAsync()'s on the heap (deleted once its callback was called).
struct GroupCommitQueue::PendingWrite {
  std::vector<StoreWrite> writes;
  std::chrono::steady_clock::time_point enqueued;
  Done done;            // Set for a WriteAsync().
  absl::Status status;  // Set by the leader together with `answered`.
  bool answered = false;
};

GroupCommitQueue::GroupCommitQueue(const GroupCommitOptions& options,
                                   Committer committer)
    : options_(options), committer_(std::move(committer)) {}

GroupCommitQueue::~GroupCommitQueue() { Close(); }

void GroupCommitQueue::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closing_ = true;
  changed_.notify_all();
}

absl::Status GroupCommitQueue::Enqueue(PendingWrite* pending) {
  const size_t records = pending->writes.size();
  if (closing_) return absl::UnavailableError("store is closing");
  if (queued_records_ + records > options_.max_queued_records) {
    stats_.rejected_records += static_cast<int64_t>(records);
    return absl::ResourceExhaustedError(absl::StrCat(
        "store queue full: ", queued_records_, " records waiting, ", records,
        " more would pass the limit of ", options_.max_queued_records,
        " (--max-queued-records)"));
  }
  pending->enqueued = std::chrono::steady_clock::now();
  queue_.push_back(pending);
  queued_records_ += records;
  if (delaying_) changed_.notify_all();  // The batch may be full now.
  return absl::OkStatus();
}

absl::Status GroupCommitQueue::Write(std::vector<StoreWrite> writes) {
  if (writes.empty()) return absl::OkStatus();
  PendingWrite pending;
  pending.writes = std::move(writes);
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status queued = Enqueue(&pending); !queued.ok()) return queued;
  // Either a leader commits this write, or this write becomes the leader:
  // it is at the front of the queue and no commit is in flight.
  changed_.wait(lock, [this, &pending] {
    return pending.answered || (!committing_ && queue_.front() == &pending);
  });
  if (!pending.answered) Lead(TakeBatch(lock), lock);
  return std::move(pending.status);
}

void GroupCommitQueue::WriteAsync(std::vector<StoreWrite> writes, Done done) {
  if (writes.empty()) {
    done(absl::OkStatus());
    return;
  }
  auto* pending = new PendingWrite;
  pending->writes = std::move(writes);
  pending->done = std::move(done);
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status queued = Enqueue(pending); !queued.ok()) {
    lock.unlock();
    pending->done(std::move(queued));
    delete pending;
    return;
  }
  // With a commit in flight, or a Write()'s caller at the front about to
  // lead, the write is left to that leader.
  if (committing_ || queue_.front() != pending) return;
  Lead(TakeBatch(lock), lock);
}

bool GroupCommitQueue::BatchFull() const {
  return closing_ || queued_records_ >= std::min(options_.max_batch_records,
                                                 options_.max_queued_records);
}

std::vector<GroupCommitQueue::PendingWrite*> GroupCommitQueue::TakeBatch(
    std::unique_lock<std::mutex>& lock) {
  committing_ = true;
  if (options_.max_batch_delay.count() > 0) {
    delaying_ = true;
    changed_.wait_until(lock,
                        queue_.front()->enqueued + options_.max_batch_delay,
                        [this] { return BatchFull(); });
    delaying_ = false;
  }
  std::vector<PendingWrite*> batch;
  size_t records = 0;
  while (!queue_.empty()) {
    const size_t next = queue_.front()->writes.size();
    if (!batch.empty() && records + next > options_.max_batch_records) break;
    batch.push_back(queue_.front());
    queue_.pop_front();
    records += next;
  }
  queued_records_ -= records;
  return batch;
}

void GroupCommitQueue::Lead(std::vector<PendingWrite*> batch,
                            std::unique_lock<std::mutex>& lock) {
  for (;;) {
    lock.unlock();
    const bool leads_on = CommitBatch(batch);
    lock.lock();
    if (!leads_on) return;
    batch = TakeBatch(lock);
  }
}

bool GroupCommitQueue::CommitBatch(const std::vector<PendingWrite*>& batch) {
  std::vector<Unit> units;
  units.reserve(batch.size());
  for (const PendingWrite* pending : batch) {
    units.push_back(Unit{&pending->writes, absl::OkStatus()});
  }
  const absl::Status status = committer_(units);

  std::vector<PendingWrite*> callbacks;
  bool leads_on = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t committed_units = 0;
    int64_t committed_records = 0;
    for (const Unit& unit : units) {
      if (!unit.refused.ok()) continue;
      ++committed_units;
      committed_records += static_cast<int64_t>(unit.writes->size());
    }
    if (status.ok()) {
      if (committed_units > 0) ++stats_.commits;
      stats_.committed_records += committed_records;
    } else {
      ++stats_.failed_commits;
      stats_.last_error = status.ToString();
    }
    stats_.last_commit_failed = !status.ok();
    ++finished_batches_;
    // Once `answered` is set a Write()'s caller may return and free its
    // PendingWrite.
    for (size_t i = 0; i < batch.size(); ++i) {
      PendingWrite* pending = batch[i];
      if (!units[i].refused.ok()) {
        pending->status = std::move(units[i].refused);  // Its own, whole.
      } else if (!status.ok()) {
        // A status of its own for each caller, not a copy sharing one
        // reference-counted error across threads (whose release
        // ThreadSanitizer cannot see inside Debian's uninstrumented abseil).
        pending->status = absl::Status(status.code(), status.message());
      }
      if (pending->done != nullptr) {
        callbacks.push_back(pending);
      } else {
        pending->answered = true;
      }
    }
    // A Write()'s caller at the front of the queue leads the next batch
    // itself; a WriteAsync()'s has no thread waiting to, so this leader
    // keeps the role (nobody else takes a batch meanwhile, and the front
    // stays).
    leads_on = !queue_.empty() && queue_.front()->done != nullptr;
    if (!leads_on) committing_ = false;
    changed_.notify_all();
  }
  for (PendingWrite* pending : callbacks) {
    pending->done(std::move(pending->status));
    delete pending;
  }
  return leads_on;
}

void GroupCommitQueue::WaitForQueuedBatch() {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t finished = finished_batches_;
  changed_.wait(lock, [this, finished] {
    return queue_.empty() || closing_ || finished_batches_ != finished;
  });
}

void GroupCommitQueue::ForgetLastFailure() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.last_commit_failed = false;
}

size_t GroupCommitQueue::queued_records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_records_;
}

StoreStats GroupCommitQueue::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  StoreStats stats = stats_;
  stats.queued_records = queued_records_;
  return stats;
}

}  // namespace cachewatch
