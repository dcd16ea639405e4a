#include "daemon/store/sqlite/checkpointer.h"

#include <chrono>
#include <utility>

#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

// How long a run asked for waits for the commit that is to see the last
// run's figures (Run()).
constexpr std::chrono::milliseconds kNextCommitWait(100);

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Open(
    const std::string& path, const CheckpointerOptions& options) {
  CACHEWATCH_ASSIGN_OR_RETURN(Database db,
                              Database::Open(path, /*create=*/false));
  return std::unique_ptr<Checkpointer>(
      new Checkpointer(std::move(db), options));
}

Checkpointer::Checkpointer(Database db, const CheckpointerOptions& options)
    : options_(options), db_(std::move(db)), thread_([this] { Run(); }) {}

Checkpointer::~Checkpointer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  wanted_changed_.notify_one();
  thread_.join();
}

CommitCheckpoint Checkpointer::AfterCommit(int wal_pages) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (wal_pages < last_commit_pages_) ++stats_.wal_restarts;
    last_commit_pages_ = wal_pages;
    if (wal_pages < asked_at_pages_) asked_at_pages_ = 0;  // Restarted.
    const bool after_run = std::exchange(ran_, false);
    // A run beside the commit's own checkpoint would make it copy nothing.
    if (!running_) {
      // With fewer pages than the run saw, the WAL restarted since, and the
      // run's figures are of the old one.
      const bool small_tail =
          after_run && wal_pages >= options_.restart_pages &&
          wal_pages >= last_run_.wal_frames &&
          wal_pages - last_run_.checkpointed_frames <= options_.tail_pages;
      if (wal_pages >= options_.fallback_pages || small_tail) {
        wanted_ = false;  // This checkpoint does what a run would.
        asked_at_pages_ = wal_pages;
        return wal_pages >= options_.fallback_pages
                   ? CommitCheckpoint::kFallback
                   : CommitCheckpoint::kTail;
      }
    }
    if (after_run && wanted_) {
      wanted_changed_.notify_one();  // The run waited for this commit.
    }
    if (wal_pages - asked_at_pages_ < options_.threshold_pages) {
      return CommitCheckpoint::kNone;
    }
    asked_at_pages_ = wal_pages;
    wanted_ = true;
  }
  wanted_changed_.notify_one();
  return CommitCheckpoint::kAskedCheckpointer;
}

void Checkpointer::CommitCheckpointed(bool busy) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.commit_checkpoints;
  if (busy) ++stats_.busy_commit_checkpoints;
}

CheckpointerStats Checkpointer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Checkpointer::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wanted_changed_.wait(lock, [this] { return wanted_ || closing_; });
    // The last run's figures are for the next commit, which may checkpoint
    // the WAL itself (a small tail, or the fallback) only while no run is
    // under way: back-to-back runs under steady commits would leave it no
    // moment to. Commits are milliseconds apart then; without one, the run
    // goes ahead.
    wanted_changed_.wait_for(lock, kNextCommitWait,
                             [this] { return !ran_ || closing_; });
    if (closing_) return;
    if (!wanted_) continue;  // That commit checkpointed instead.
    wanted_ = false;
    ran_ = false;
    running_ = true;
    lock.unlock();
    absl::StatusOr<Database::CheckpointResult> result = db_.CheckpointPassive();
    // The pages just copied are flushed here rather than by the commit that
    // empties the WAL (SQLite flushes them itself only when the run reaches
    // the WAL's end, which commits landing meanwhile prevent).
    const bool synced = result.ok() && db_.SyncDatabaseFile().ok();
    lock.lock();
    running_ = false;
    ++stats_.checkpoints;
    if (synced) {
      ran_ = true;
      last_run_ = *result;
    }
  }
}

}  // namespace cachewatch
