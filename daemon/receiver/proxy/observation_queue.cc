#include "daemon/receiver/proxy/observation_queue.h"

#include <algorithm>
#include <exception>
#include <utility>
#include <vector>

#include "daemon/receiver/proxy/content_decoding.h"

namespace cachewatch {

ObservationQueue::ObservationQueue(size_t capacity, size_t max_decoded_bytes,
                                   ExchangeObserver* observer,
                                   IngestPipeline* pipeline,
                                   ProxyMetrics* metrics)
    : capacity_(capacity),
      max_decoded_bytes_(max_decoded_bytes),
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

void ObservationQueue::Decode(HttpExchange& exchange) {
  auto encoding = std::find_if(
      exchange.response_headers.begin(), exchange.response_headers.end(),
      [](const auto& header) { return header.first == "content-encoding"; });
  if (encoding == exchange.response_headers.end()) return;
  absl::StatusOr<std::string> decoded = DecodeContent(
      encoding->second, exchange.response_body, max_decoded_bytes_);
  exchange.response_headers.erase(encoding);
  if (decoded.ok()) {
    exchange.response_body = *std::move(decoded);
    return;
  }
  // The request is still observed; the response's usage is not.
  metrics_->OnObserveFailure(
      ProxyMetrics::ObserveFailure::kUndecodableResponse);
  exchange.response_body.clear();
  exchange.response_complete = false;
}

void ObservationQueue::Observe(HttpExchange& exchange) {
  using Failure = ProxyMetrics::ObserveFailure;
  try {
    Decode(exchange);
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
