#include "daemon/receiver/proxy/observation_queue.h"

#include <exception>
#include <utility>
#include <vector>

namespace cachewatch {

ObservationQueue::ObservationQueue(size_t capacity, ExchangeObserver* observer,
                                   IngestPipeline* pipeline,
                                   ProxyMetrics* metrics)
    : capacity_(capacity),
      observer_(observer),
      pipeline_(pipeline),
      metrics_(metrics),
      thread_([this] { Run(); }) {}

ObservationQueue::~ObservationQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

void ObservationQueue::Submit(HttpExchange exchange) {
  size_t depth = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.size() >= capacity_) {
      metrics_->OnObserveFailure(ProxyMetrics::ObserveFailure::kQueueFull);
      return;
    }
    queue_.push_back(std::move(exchange));
    depth = queue_.size();
  }
  metrics_->SetQueueDepth(depth);
  ready_.notify_one();
}

void ObservationQueue::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // Stopping, and everything observed.
    HttpExchange exchange = std::move(queue_.front());
    queue_.pop_front();
    metrics_->SetQueueDepth(queue_.size());
    lock.unlock();
    Observe(exchange);
    lock.lock();
  }
}

void ObservationQueue::Observe(const HttpExchange& exchange) {
  using Failure = ProxyMetrics::ObserveFailure;
  try {
    absl::StatusOr<ObservedTurn> turn = observer_->Observe(exchange);
    if (!turn.ok()) {
      metrics_->OnObserveFailure(
          turn.status().code() == absl::StatusCode::kNotFound
              ? Failure::kUnknownEndpoint
          : turn.status().code() == absl::StatusCode::kInvalidArgument
              ? Failure::kInvalidBody
              : Failure::kInternal);
      return;
    }
    std::vector<ProcessedRecord> records;
    records.reserve(2);
    if (turn->snapshot.has_value()) {
      records.push_back(pipeline_->ProcessSnapshot(*std::move(turn->snapshot)));
    }
    if (turn->usage.has_value()) {
      records.push_back(pipeline_->ProcessUsage(*std::move(turn->usage)));
    }
    std::vector<ProcessedRecord*> pointers;
    for (ProcessedRecord& record : records) pointers.push_back(&record);
    pipeline_->Commit(pointers);
    for (const ProcessedRecord& record : records) {
      if (record.status.ok()) continue;
      metrics_->OnObserveFailure(record.status.code() ==
                                         absl::StatusCode::kInvalidArgument
                                     ? Failure::kRejected
                                     : Failure::kStoreUnavailable);
      return;
    }
  } catch (const std::exception&) {
    metrics_->OnObserveFailure(Failure::kInternal);
  }
}

}  // namespace cachewatch
