// AsyncTurnExporter: runs an exporter that may block (network, disk) on a
// thread of its own behind a bounded queue, so that it keeps TurnExporter's
// non-blocking contract. Export() queues a copy of the turns and returns at
// once; when `max_queued_batches` batches already wait, the batch is dropped
// and Export() answers ResourceExhausted (counted by the pipeline). What the
// wrapped exporter answers on its thread is dropped the same way, counted in
// failed_batches().
//
// Thread-safe. The destructor exports what is still queued, then stops the
// thread.
#ifndef CACHEWATCH_DAEMON_EXPORTER_ASYNC_TURN_EXPORTER_H_
#define CACHEWATCH_DAEMON_EXPORTER_ASYNC_TURN_EXPORTER_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/exporter/turn_exporter.h"

namespace cachewatch {

class AsyncTurnExporter final : public TurnExporter {
 public:
  // `exporter` must outlive this object.
  AsyncTurnExporter(TurnExporter* exporter, size_t max_queued_batches);
  ~AsyncTurnExporter() override;

  AsyncTurnExporter(const AsyncTurnExporter&) = delete;
  AsyncTurnExporter& operator=(const AsyncTurnExporter&) = delete;

  absl::Status Export(const std::vector<ClassifiedTurn>& turns) override;

  // Blocks until every batch queued so far has been exported.
  void Flush();
  // Batches the wrapped exporter failed.
  int64_t failed_batches() const;

 private:
  void Run();

  TurnExporter* const exporter_;
  const size_t max_queued_batches_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::vector<ClassifiedTurn>> queue_;  // Guarded by mutex_.
  bool exporting_ = false;                         // Guarded by mutex_.
  bool stopping_ = false;                          // Guarded by mutex_.
  int64_t failed_batches_ = 0;                     // Guarded by mutex_.
  std::thread thread_;  // Last: started once the rest is initialized.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_EXPORTER_ASYNC_TURN_EXPORTER_H_
