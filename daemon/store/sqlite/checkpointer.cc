#include "daemon/store/sqlite/checkpointer.h"

#include <utility>

#include "daemon/util/status_macros.h"

namespace cachewatch {

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Open(
    const std::string& path, int threshold_pages) {
  CACHEWATCH_ASSIGN_OR_RETURN(Database db,
                              Database::Open(path, /*create=*/false));
  return std::unique_ptr<Checkpointer>(
      new Checkpointer(std::move(db), threshold_pages));
}

Checkpointer::Checkpointer(Database db, int threshold_pages)
    : threshold_pages_(threshold_pages),
      db_(std::move(db)),
      thread_([this] { Run(); }) {}

Checkpointer::~Checkpointer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  wanted_changed_.notify_one();
  thread_.join();
}

bool Checkpointer::WalGrew(int wal_pages) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (wal_pages < asked_at_pages_) asked_at_pages_ = 0;  // Restarted.
    if (wal_pages - asked_at_pages_ < threshold_pages_) return false;
    asked_at_pages_ = wal_pages;
    wanted_ = true;
  }
  wanted_changed_.notify_one();
  return true;
}

CheckpointerStats Checkpointer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Checkpointer::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wanted_changed_.wait(lock, [this] { return wanted_ || closing_; });
    if (closing_) return;
    wanted_ = false;
    lock.unlock();
    db_.Exec("PRAGMA wal_checkpoint(PASSIVE)").IgnoreError();
    lock.lock();
    ++stats_.checkpoints;
  }
}

}  // namespace cachewatch
