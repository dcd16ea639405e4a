// The daemon's own health metrics (docs/METRICS.md, "Daemon health"): ingest
// outcomes by record kind, the store's write queue, commit latency and
// failures, store health, lanes held, watch subscribers, retention and
// export failures, plus cachewatch_build_info. Separate from the turn
// metrics (daemon/exporter/prometheus), which describe the traffic; both
// register in the same registry, served on /metrics.
//
// Commits are counted here only: one observation per RecordStore::Write()
// the pipeline makes (the latency an ingest waits), whatever the store's own
// batching.
//
// No method throws. Thread-safe: every method may be called concurrently.
#ifndef CACHEWATCH_DAEMON_TELEMETRY_TELEMETRY_H_
#define CACHEWATCH_DAEMON_TELEMETRY_TELEMETRY_H_

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "daemon/core/turn.h"

namespace cachewatch {

// What became of an ingested record.
enum class IngestOutcome {
  kAccepted,
  kDuplicate,
  kInvalid,
  kResourceExhausted,
  kUnavailable,
  kUnauthenticated,
};

class Telemetry {
 public:
  // Registers every metric in `registry` (not null); `version` is reported
  // as cachewatch_build_info{version}.
  Telemetry(std::shared_ptr<prometheus::Registry> registry,
            const std::string& version);

  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  std::shared_ptr<prometheus::Registry> registry() { return registry_; }

  // Counts one ingested record by kind and outcome.
  void OnIngest(RecordKind kind, IngestOutcome outcome);
  // Records waiting in the store's write queue.
  void SetStoreQueueDepth(size_t records);
  // One store write of `records` records that took `seconds`: its duration
  // is observed whether or not it succeeded (`ok`); the records are counted
  // as committed only when it did, else one failure is counted.
  void ObserveStoreCommit(double seconds, size_t records, bool ok);
  // Whether the store accepts writes (initially true).
  void SetStoreHealthy(bool healthy);
  // Lanes held by the lane trackers.
  void SetActiveLanes(size_t lanes);
  // Clients subscribed to the live break stream.
  void SetWatchSubscribers(size_t subscribers);
  // Rows deleted by a retention pass.
  void OnRetentionDeleted(int64_t rows);
  // An export of committed turns that an exporter dropped or failed.
  void OnExportFailed();

 private:
  static constexpr size_t kRecordKinds = 2;
  static constexpr size_t kOutcomes = 6;

  const std::shared_ptr<prometheus::Registry> registry_;
  // [kind][outcome], all created up front.
  std::array<std::array<prometheus::Counter*, kOutcomes>, kRecordKinds>
      ingest_series_;
  prometheus::Gauge& store_queue_records_;
  prometheus::Histogram& store_commit_duration_;
  prometheus::Counter& store_committed_records_;
  prometheus::Counter& store_commit_failures_;
  prometheus::Gauge& store_healthy_;
  prometheus::Gauge& active_lanes_;
  prometheus::Gauge& watch_subscribers_;
  prometheus::Counter& retention_deleted_rows_;
  prometheus::Counter& export_failures_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_TELEMETRY_TELEMETRY_H_
