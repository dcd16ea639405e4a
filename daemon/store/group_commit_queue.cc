#include "daemon/store/group_commit_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cachewatch {

// One Write() call waiting for its commit, on its caller's stack.
struct GroupCommitQueue::PendingWrite {
  std::vector<StoreWrite> writes;
  std::chrono::steady_clock::time_point enqueued;
  absl::Status status;  // Set by the leader together with `done`.
  bool done = false;
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

absl::Status GroupCommitQueue::Write(std::vector<StoreWrite> writes) {
  if (writes.empty()) return absl::OkStatus();
  const size_t records = writes.size();
  PendingWrite pending;
  pending.writes = std::move(writes);
  std::vector<PendingWrite*> batch;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (closing_) return absl::UnavailableError("store is closing");
    if (queued_records_ + records > options_.max_queued_records) {
      stats_.rejected_records += static_cast<int64_t>(records);
      return absl::ResourceExhaustedError(absl::StrCat(
          "store queue full: ", queued_records_, " records waiting, ", records,
          " more would pass the limit of ", options_.max_queued_records,
          " (--max-queued-records)"));
    }
    pending.enqueued = std::chrono::steady_clock::now();
    queue_.push_back(&pending);
    queued_records_ += records;
    changed_.notify_all();  // A leader may be waiting for a full batch.
    // Either a leader commits this write, or this write becomes the leader:
    // it is at the front of the queue and no commit is in flight.
    changed_.wait(lock, [this, &pending] {
      return pending.done || (!committing_ && queue_.front() == &pending);
    });
    if (pending.done) return pending.status;
    batch = TakeBatch(lock);
  }
  CommitBatch(batch);
  return pending.status;
}

bool GroupCommitQueue::BatchFull() const {
  return closing_ || queued_records_ >= std::min(options_.max_batch_records,
                                                 options_.max_queued_records);
}

std::vector<GroupCommitQueue::PendingWrite*> GroupCommitQueue::TakeBatch(
    std::unique_lock<std::mutex>& lock) {
  committing_ = true;
  if (options_.max_batch_delay.count() > 0) {
    changed_.wait_until(lock,
                        queue_.front()->enqueued + options_.max_batch_delay,
                        [this] { return BatchFull(); });
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

void GroupCommitQueue::CommitBatch(const std::vector<PendingWrite*>& batch) {
  std::vector<Unit> units;
  units.reserve(batch.size());
  for (const PendingWrite* pending : batch) {
    units.push_back(Unit{&pending->writes, absl::OkStatus()});
  }
  const absl::Status status = committer_(units);

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
  // Once `done` is set a follower may return and free its PendingWrite; the
  // next write at the front of the queue becomes the leader.
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!units[i].refused.ok()) {
      batch[i]->status = std::move(units[i].refused);  // Its own, whole.
    } else if (!status.ok()) {
      // A status of its own for each caller, not a copy sharing one
      // reference-counted error across threads (whose release
      // ThreadSanitizer cannot see inside Debian's uninstrumented abseil).
      batch[i]->status = absl::Status(status.code(), status.message());
    }
    batch[i]->done = true;
  }
  committing_ = false;
  changed_.notify_all();
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
