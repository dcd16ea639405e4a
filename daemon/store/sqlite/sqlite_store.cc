#include "daemon/store/sqlite/sqlite_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/store/sqlite/checkpointer.h"
#include "daemon/store/sqlite/read_connection.h"
#include "daemon/store/sqlite/write_connection.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

// Rows of each kind one retention transaction deletes at most.
constexpr int kRetentionBatchRows = 1000;
// WAL pages past which the checkpointer runs (SQLite's automatic checkpoint
// threshold), and past which a commit checkpoints itself because the
// checkpointer has fallen behind (~40 MiB of WAL).
constexpr int kCheckpointPages = 1000;
constexpr int kCommitCheckpointPages = 10000;

}  // namespace

struct SqliteStore::PendingWrite {
  std::vector<StoreWrite> writes;
  std::chrono::steady_clock::time_point enqueued;
  absl::Status status;  // Set by the writer together with `done`.
  bool done = false;
};

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(
    const StoreOptions& options) {
  CACHEWATCH_ASSIGN_OR_RETURN(
      std::unique_ptr<WriteConnection> writer,
      WriteConnection::Open(options.path, options.synchronous_full));
  if (options.max_size_bytes > 0) {
    constexpr int64_t kPageBytes = 4096;
    CACHEWATCH_RETURN_IF_ERROR(writer->SetMaxPageCount(
        std::max<int64_t>(1, options.max_size_bytes / kPageBytes)));
  }
  CACHEWATCH_ASSIGN_OR_RETURN(std::unique_ptr<ReadConnection> reader,
                              ReadConnection::Open(options.path));
  std::vector<std::unique_ptr<ReadConnection>> lookups;
  for (int i = 0; i < std::max(1, options.lookup_connections); ++i) {
    CACHEWATCH_ASSIGN_OR_RETURN(std::unique_ptr<ReadConnection> lookup,
                                ReadConnection::Open(options.path));
    lookups.push_back(std::move(lookup));
  }
  CACHEWATCH_ASSIGN_OR_RETURN(
      std::unique_ptr<Checkpointer> checkpointer,
      Checkpointer::Open(options.path, kCheckpointPages));
  writer->HandOffCheckpoints(
      [checkpointer = checkpointer.get()](int wal_pages) {
        checkpointer->WalGrew(wal_pages);
      },
      kCommitCheckpointPages);
  return std::unique_ptr<SqliteStore>(
      new SqliteStore(options, std::move(writer), std::move(reader),
                      std::move(lookups), std::move(checkpointer)));
}

SqliteStore::SqliteStore(const StoreOptions& options,
                         std::unique_ptr<WriteConnection> writer,
                         std::unique_ptr<ReadConnection> reader,
                         std::vector<std::unique_ptr<ReadConnection>> lookups,
                         std::unique_ptr<Checkpointer> checkpointer)
    : options_(options),
      writer_(std::move(writer)),
      reader_(std::move(reader)),
      checkpointer_(std::move(checkpointer)) {
  for (std::unique_ptr<ReadConnection>& reader : lookups) {
    auto lookup = std::make_unique<Lookup>();
    lookup->reader = std::move(reader);
    lookups_.push_back(std::move(lookup));
  }
}

template <typename Query>
auto SqliteStore::WithLookup(const Query& query) {
  const size_t start = next_lookup_.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < lookups_.size(); ++i) {
    Lookup& lookup = *lookups_[(start + i) % lookups_.size()];
    std::unique_lock<std::mutex> lock(lookup.mu, std::try_to_lock);
    if (lock.owns_lock()) return query(*lookup.reader);
  }
  Lookup& lookup = *lookups_[start % lookups_.size()];
  std::lock_guard<std::mutex> lock(lookup.mu);
  return query(*lookup.reader);
}

SqliteStore::~SqliteStore() {
  std::lock_guard<std::mutex> lock(queue_mu_);
  closing_ = true;
  queue_changed_.notify_all();
}

absl::Status SqliteStore::Write(std::vector<StoreWrite> writes) {
  if (writes.empty()) return absl::OkStatus();
  const size_t records = writes.size();
  PendingWrite pending;
  pending.writes = std::move(writes);
  std::vector<PendingWrite*> batch;
  {
    std::unique_lock<std::mutex> lock(queue_mu_);
    if (closing_) return absl::UnavailableError("store is closing");
    if (queued_records_ + records > options_.max_queued_records) {
      stats_.rejected_records += static_cast<int64_t>(records);
      return absl::ResourceExhaustedError(absl::StrCat(
          "store queue full: ", queued_records_, " records waiting, limit ",
          options_.max_queued_records));
    }
    pending.enqueued = std::chrono::steady_clock::now();
    queue_.push_back(&pending);
    queued_records_ += records;
    queue_changed_.notify_all();  // A leader may be waiting for a full batch.
    // Either a leader commits this write, or this write becomes the leader:
    // it is at the front of the queue and no commit is in flight.
    queue_changed_.wait(lock, [this, &pending] {
      return pending.done || (!committing_ && queue_.front() == &pending);
    });
    if (pending.done) return pending.status;
    batch = TakeBatch(lock);
  }
  CommitBatch(batch);
  return pending.status;
}

bool SqliteStore::BatchFull() const {
  return closing_ || queued_records_ >= std::min(options_.max_batch_records,
                                                 options_.max_queued_records);
}

std::vector<SqliteStore::PendingWrite*> SqliteStore::TakeBatch(
    std::unique_lock<std::mutex>& lock) {
  committing_ = true;
  if (options_.max_batch_delay.count() > 0) {
    queue_changed_.wait_until(
        lock, queue_.front()->enqueued + options_.max_batch_delay,
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

void SqliteStore::CommitBatch(const std::vector<PendingWrite*>& batch) {
  std::vector<const std::vector<StoreWrite>*> units;
  units.reserve(batch.size());
  int64_t records = 0;
  for (const PendingWrite* pending : batch) {
    units.push_back(&pending->writes);
    records += static_cast<int64_t>(pending->writes.size());
  }
  if (options_.before_commit) {
    options_.before_commit(static_cast<size_t>(records));
  }
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(writer_mu_);
    status = writer_->Commit(units, absl::ToUnixMicros(absl::Now()));
  }

  std::lock_guard<std::mutex> lock(queue_mu_);
  if (status.ok()) {
    ++stats_.commits;
    stats_.committed_records += records;
  } else {
    ++stats_.failed_commits;
    stats_.last_error = status.ToString();
  }
  stats_.last_commit_failed = !status.ok();
  ++finished_batches_;
  // Once `done` is set a follower may return and free its PendingWrite; the
  // next write at the front of the queue becomes the leader.
  for (PendingWrite* pending : batch) {
    pending->status = status;
    pending->done = true;
  }
  committing_ = false;
  queue_changed_.notify_all();
}

absl::StatusOr<v1::ListBreaksResponse> SqliteStore::ListBreaks(
    const v1::ListBreaksRequest& request) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  return reader_->ListBreaks(request);
}

absl::StatusOr<v1::ExplainBreakResponse> SqliteStore::ExplainBreak(
    const std::string& break_id) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  return reader_->ExplainBreak(break_id);
}

absl::StatusOr<v1::GetLaneTimelineResponse> SqliteStore::LaneTimeline(
    const LaneKey& key, int limit) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  return reader_->LaneTimeline(key, limit);
}

absl::StatusOr<std::optional<v1::TurnClassification>>
SqliteStore::FindClassification(const LaneKey& key,
                                const std::string& request_id) {
  return WithLookup([&](ReadConnection& reader) {
    return reader.FindClassification(key, request_id);
  });
}

absl::StatusOr<std::optional<RestoredLane>> SqliteStore::LoadLane(
    const LaneKey& key, const LaneLookup& lookup) {
  return WithLookup(
      [&](ReadConnection& reader) { return reader.LoadLane(key, lookup); });
}

absl::StatusOr<std::vector<RestoredLane>> SqliteStore::LoadRecentLanes(
    int64_t since_us) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  return reader_->LoadRecentLanes(since_us);
}

absl::StatusOr<int64_t> SqliteStore::DeleteOlderThan(int64_t cutoff_us) {
  int64_t total = 0;
  while (true) {
    absl::StatusOr<int64_t> deleted;
    {
      std::lock_guard<std::mutex> lock(writer_mu_);
      deleted = writer_->DeleteOlderBatch(cutoff_us, kRetentionBatchRows);
    }
    if (!deleted.ok()) return deleted.status();
    if (*deleted == 0) return total;
    total += *deleted;
    // Let queued writes go first: wait for a batch to finish.
    std::unique_lock<std::mutex> lock(queue_mu_);
    const int64_t finished = finished_batches_;
    queue_changed_.wait(lock, [this, finished] {
      return queue_.empty() || closing_ || finished_batches_ != finished;
    });
  }
}

size_t SqliteStore::queued_records() const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return queued_records_;
}

StoreStats SqliteStore::stats() const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  StoreStats stats = stats_;
  stats.queued_records = queued_records_;
  stats.checkpoints = checkpointer_->stats().checkpoints;
  return stats;
}

absl::Status SqliteStore::ProbeWritable() {
  constexpr int64_t kHeadroomBytes = 64 * 1024;
  std::lock_guard<std::mutex> lock(writer_mu_);
  return writer_->ProbeWritable(options_.path, kHeadroomBytes);
}

absl::Status SqliteStore::SetMaxPageCountForTesting(int64_t pages) {
  std::lock_guard<std::mutex> lock(writer_mu_);
  return writer_->SetMaxPageCount(pages);
}

}  // namespace cachewatch
