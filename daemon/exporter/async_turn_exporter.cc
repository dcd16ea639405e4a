#include "daemon/exporter/async_turn_exporter.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace cachewatch {

AsyncTurnExporter::AsyncTurnExporter(TurnExporter* exporter,
                                     size_t max_queued_batches)
    : exporter_(exporter),
      max_queued_batches_(max_queued_batches),
      thread_([this] { Run(); }) {}

AsyncTurnExporter::~AsyncTurnExporter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

absl::Status AsyncTurnExporter::Export(
    const std::vector<ClassifiedTurn>& turns) {
  if (turns.empty()) return absl::OkStatus();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.size() >= max_queued_batches_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("export queue full (", max_queued_batches_,
                       " batches): dropped ", turns.size(), " turns"));
    }
    queue_.push_back(turns);
  }
  changed_.notify_all();
  return absl::OkStatus();
}

void AsyncTurnExporter::Flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return queue_.empty() && !exporting_; });
}

int64_t AsyncTurnExporter::failed_batches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_batches_;
}

void AsyncTurnExporter::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) return;  // Stopping, and everything exported.
    std::vector<ClassifiedTurn> batch = std::move(queue_.front());
    queue_.pop_front();
    exporting_ = true;
    lock.unlock();
    const bool ok = exporter_->Export(batch).ok();
    lock.lock();
    exporting_ = false;
    if (!ok) ++failed_batches_;
    changed_.notify_all();
  }
}

}  // namespace cachewatch
