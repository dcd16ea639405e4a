#include "daemon/receiver/grpc/snapshot_pool.h"

#include <utility>

namespace cachewatch {

SnapshotPool::SnapshotPool() : idle_(std::make_shared<Idle>()) {}

std::shared_ptr<v1::Snapshot> SnapshotPool::Acquire() {
  std::unique_ptr<v1::Snapshot> message;
  {
    std::lock_guard<std::mutex> lock(idle_->mutex);
    if (!idle_->messages.empty()) {
      message = std::move(idle_->messages.back());
      idle_->messages.pop_back();
    }
  }
  if (message == nullptr) message = std::make_unique<v1::Snapshot>();
  return std::shared_ptr<v1::Snapshot>(
      message.release(), [idle = idle_](v1::Snapshot* released) {
        std::unique_ptr<v1::Snapshot> owned(released);
        if (owned->tools_size() > kMaxKeptTools) return;
        owned->Clear();  // Outside the lock.
        std::lock_guard<std::mutex> lock(idle->mutex);
        if (idle->messages.size() < kMaxIdle) {
          idle->messages.push_back(std::move(owned));
        }
      });
}

size_t SnapshotPool::idle() const {
  std::lock_guard<std::mutex> lock(idle_->mutex);
  return idle_->messages.size();
}

}  // namespace cachewatch
