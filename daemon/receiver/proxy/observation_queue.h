// The HTTP proxy's way off the request path: forwarded exchanges wait in a
// bounded queue; one background thread turns each into records with the
// ExchangeObserver and submits them to the ingest pipeline (the snapshot,
// then the usage, in one Commit), in the order they were submitted. A
// response with a Content-Encoding (gzip, deflate) is decoded first.
//
// Fails open: Submit never blocks and never fails the caller; a full queue
// drops the exchange, and every exchange that yields no record for the
// store is counted in cachewatch_proxy_observe_failures_total{reason}.
//
// Thread-safe: Submit may be called from any number of threads.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_OBSERVATION_QUEUE_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_OBSERVATION_QUEUE_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>

#include "daemon/pipeline/ingest_pipeline.h"
#include "daemon/receiver/proxy/exchange_observer.h"
#include "daemon/receiver/proxy/http_exchange.h"
#include "daemon/receiver/proxy/proxy_metrics.h"

namespace cachewatch {

class ObservationQueue {
 public:
  // Holds at most `capacity` exchanges; decodes responses up to
  // `max_decoded_bytes`. The pointers must outlive the queue.
  ObservationQueue(size_t capacity, size_t max_decoded_bytes,
                   ExchangeObserver* observer, IngestPipeline* pipeline,
                   ProxyMetrics* metrics);
  // Observes what is queued, then stops the thread.
  ~ObservationQueue();

  ObservationQueue(const ObservationQueue&) = delete;
  ObservationQueue& operator=(const ObservationQueue&) = delete;

  // Queues `exchange`; drops it (counted as queue_full) when the queue is
  // full. Never blocks on the observer or the store.
  void Submit(HttpExchange exchange);

 private:
  void Run();
  void Observe(HttpExchange& exchange);
  // Replaces an encoded response body by the decoded one.
  void Decode(HttpExchange& exchange);

  const size_t capacity_;
  const size_t max_decoded_bytes_;
  ExchangeObserver* const observer_;
  IngestPipeline* const pipeline_;
  ProxyMetrics* const metrics_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<HttpExchange> queue_;  // Guarded by mutex_.
  bool stopping_ = false;           // Guarded by mutex_.
  std::thread thread_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_OBSERVATION_QUEUE_H_
