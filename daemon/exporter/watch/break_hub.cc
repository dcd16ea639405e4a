#include "daemon/exporter/watch/break_hub.h"

#include <utility>

namespace cachewatch {

bool BreakHub::Subscription::Matches(const v1::PromptCacheBreak& event) const {
  return (filter_.agent().empty() || filter_.agent() == event.agent()) &&
         (filter_.model().empty() || filter_.model() == event.model()) &&
         (filter_.session_id().empty() ||
          filter_.session_id() == event.session_id()) &&
         (filter_.reason() == v1::REASON_UNSPECIFIED ||
          filter_.reason() == event.primary_reason());
}

BreakHub::NextResult BreakHub::Subscription::Next(
    std::chrono::milliseconds timeout, v1::PromptCacheBreak* next) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait_for(lock, timeout, [this] {
    return !buffer_.empty() || overflowed_ || closed_;
  });
  if (overflowed_) return NextResult::kOverflowed;
  if (!buffer_.empty()) {
    *next = std::move(buffer_.front());
    buffer_.pop_front();
    return NextResult::kBreak;
  }
  return closed_ ? NextResult::kClosed : NextResult::kTimeout;
}

std::shared_ptr<BreakHub::Subscription> BreakHub::Subscribe(
    v1::WatchBreaksRequest filter) {
  std::shared_ptr<Subscription> subscription(
      new Subscription(std::move(filter), capacity_));
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) {
    subscription->closed_ = true;
  } else {
    subscribers_.push_back(subscription);
  }
  return subscription;
}

void BreakHub::Publish(const v1::PromptCacheBreak& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = subscribers_.begin(); it != subscribers_.end();) {
    std::shared_ptr<Subscription> subscription = it->lock();
    if (subscription == nullptr) {
      it = subscribers_.erase(it);
      continue;
    }
    ++it;
    if (!subscription->Matches(event)) continue;
    {
      std::lock_guard<std::mutex> sub_lock(subscription->mutex_);
      if (subscription->overflowed_) continue;
      if (subscription->buffer_.size() >= subscription->capacity_) {
        subscription->overflowed_ = true;
        subscription->buffer_.clear();
      } else {
        subscription->buffer_.push_back(event);
      }
    }
    subscription->ready_.notify_one();
  }
}

void BreakHub::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  for (const std::weak_ptr<Subscription>& weak : subscribers_) {
    if (std::shared_ptr<Subscription> subscription = weak.lock()) {
      {
        std::lock_guard<std::mutex> sub_lock(subscription->mutex_);
        subscription->closed_ = true;
      }
      subscription->ready_.notify_all();
    }
  }
  subscribers_.clear();
}

size_t BreakHub::subscriber_count() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::erase_if(subscribers_, [](const auto& weak) { return weak.expired(); });
  return subscribers_.size();
}

absl::Status BreakHub::Export(const std::vector<ClassifiedTurn>& turns) {
  for (const ClassifiedTurn& turn : turns) {
    if (turn.classification.verdict() == v1::VERDICT_BREAK) {
      Publish(turn.classification.cache_break());
    }
  }
  return absl::OkStatus();
}

}  // namespace cachewatch
