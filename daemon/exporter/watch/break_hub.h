// The live break stream, a TurnExporter: every committed break is published
// to all subscribers whose filter it matches. Each subscriber has a bounded
// buffer; a subscriber that falls further behind is cut off (its next Next()
// says kOverflowed) so that a slow reader never slows ingest or grows memory.
//
// Export() never blocks: it copies each break into the matching subscribers'
// bounded buffers.
//
// Thread-safe: Export, Publish, Subscribe and Close may be called from any
// thread;
// each Subscription is read by one thread.
#ifndef CACHEWATCH_DAEMON_EXPORTER_WATCH_BREAK_HUB_H_
#define CACHEWATCH_DAEMON_EXPORTER_WATCH_BREAK_HUB_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/service.pb.h"
#include "daemon/exporter/turn_exporter.h"

namespace cachewatch {

class BreakHub final : public TurnExporter {
 public:
  enum class NextResult { kBreak, kTimeout, kOverflowed, kClosed };

  class Subscription {
   public:
    // Waits up to `timeout` for the next matching break.
    NextResult Next(std::chrono::milliseconds timeout,
                    v1::PromptCacheBreak* next);

   private:
    friend class BreakHub;
    Subscription(v1::WatchBreaksRequest filter, size_t capacity)
        : filter_(std::move(filter)), capacity_(capacity) {}
    bool Matches(const v1::PromptCacheBreak& event) const;

    const v1::WatchBreaksRequest filter_;
    const size_t capacity_;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<v1::PromptCacheBreak> buffer_;  // Guarded by mutex_.
    bool overflowed_ = false;                  // Guarded by mutex_.
    bool closed_ = false;                      // Guarded by mutex_.
  };

  // `capacity`: breaks buffered per subscriber before it is cut off.
  explicit BreakHub(size_t capacity) : capacity_(capacity) {}

  // The subscription stays registered until the returned pointer is
  // released and the next Publish notices it.
  std::shared_ptr<Subscription> Subscribe(v1::WatchBreaksRequest filter);
  void Publish(const v1::PromptCacheBreak& event);
  // Publishes the break of every turn classified VERDICT_BREAK; always OK.
  absl::Status Export(const std::vector<ClassifiedTurn>& turns) override;
  // Ends every subscription (kClosed); later Subscribe calls get closed ones.
  void Close();
  size_t subscriber_count();

 private:
  const size_t capacity_;
  std::mutex mutex_;
  std::list<std::weak_ptr<Subscription>> subscribers_;  // Guarded by mutex_.
  bool closed_ = false;                                 // Guarded by mutex_.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_EXPORTER_WATCH_BREAK_HUB_H_
