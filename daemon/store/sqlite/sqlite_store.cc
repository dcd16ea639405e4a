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

GroupCommitOptions GroupCommitOf(const StoreOptions& options) {
  GroupCommitOptions group;
  group.max_batch_delay = options.max_batch_delay;
  group.max_batch_records = options.max_batch_records;
  group.max_queued_records = options.max_queued_records;
  return group;
}

}  // namespace

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
      Checkpointer::Open(options.path, options.checkpoints));
  writer->HandOffCheckpoints(
      [checkpointer = checkpointer.get()](int wal_pages) {
        const CommitCheckpoint action = checkpointer->AfterCommit(wal_pages);
        return action == CommitCheckpoint::kTail ||
               action == CommitCheckpoint::kFallback;
      },
      [checkpointer = checkpointer.get()](bool busy) {
        checkpointer->CommitCheckpointed(busy);
      });
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
      queue_(GroupCommitOf(options),
             [this](std::vector<GroupCommitQueue::Unit>& batch) {
               return CommitBatch(batch);
             }),
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
  // Orders every call that has returned, on whichever thread, before the
  // member destructors, after this body, close the connections: each call
  // ran under one of these mutexes. The caller knows no call is in progress,
  // but may know it through synchronization ThreadSanitizer cannot see: the
  // daemon destroys the store after grpc::Server::Shutdown() has waited for
  // its handler threads inside Debian's uninstrumented gRPC, and TSan
  // reported the close as racing with the handlers' last queries.
  { std::lock_guard<std::mutex> lock(writer_mu_); }
  { std::lock_guard<std::mutex> lock(reader_mu_); }
  for (const std::unique_ptr<Lookup>& lookup : lookups_) {
    std::lock_guard<std::mutex> lock(lookup->mu);
  }
}

absl::Status SqliteStore::Write(std::vector<StoreWrite> writes) {
  return queue_.Write(std::move(writes));
}

void SqliteStore::WriteAsync(std::vector<StoreWrite> writes, WriteDone done) {
  queue_.WriteAsync(std::move(writes), std::move(done));
}

absl::Status SqliteStore::CommitBatch(
    std::vector<GroupCommitQueue::Unit>& batch) {
  std::vector<const std::vector<StoreWrite>*> units;
  units.reserve(batch.size());
  size_t records = 0;
  for (const GroupCommitQueue::Unit& unit : batch) {
    units.push_back(unit.writes);
    records += unit.writes->size();
  }
  if (options_.before_commit) options_.before_commit(records);
  std::lock_guard<std::mutex> lock(writer_mu_);
  return writer_->Commit(units, absl::ToUnixMicros(absl::Now()));
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
    CACHEWATCH_RETURN_IF_ERROR(deleted.status());
    if (*deleted == 0) return total;
    total += *deleted;
    queue_.WaitForQueuedBatch();  // Let queued writes go first.
  }
}

size_t SqliteStore::queued_records() const { return queue_.queued_records(); }

StoreStats SqliteStore::stats() const {
  StoreStats stats = queue_.stats();
  stats.checkpoints = checkpointer_->stats().checkpoints;
  return stats;
}

CheckpointerStats SqliteStore::checkpointer_stats() const {
  return checkpointer_->stats();
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
