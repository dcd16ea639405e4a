#include "daemon/telemetry/telemetry.h"

#include <utility>

#include "daemon/telemetry/metric_families.h"
#include "daemon/util/enum_name.h"

namespace cachewatch {
namespace {

constexpr std::array<double, 11> kCommitDurationBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};

constexpr EnumNames<RecordKind, 2> kRecordKindNames = {{
    {RecordKind::kSnapshot, "snapshot"},
    {RecordKind::kUsage, "usage"},
}};

constexpr EnumNames<IngestOutcome, 6> kOutcomeNames = {{
    {IngestOutcome::kAccepted, "accepted"},
    {IngestOutcome::kDuplicate, "duplicate"},
    {IngestOutcome::kInvalid, "invalid"},
    {IngestOutcome::kResourceExhausted, "resource_exhausted"},
    {IngestOutcome::kUnavailable, "unavailable"},
    {IngestOutcome::kUnauthenticated, "unauthenticated"},
}};

}  // namespace

Telemetry::Telemetry(std::shared_ptr<prometheus::Registry> registry,
                     const std::string& version)
    : registry_(std::move(registry)),
      store_queue_records_(
          GaugeFamily(*registry_, "cachewatch_store_queue_records",
                      "Records waiting in the store's write queue.")
              .Add({})),
      store_commit_duration_(
          HistogramFamily(*registry_,
                          "cachewatch_store_commit_duration_seconds",
                          "Duration of store commits in seconds.")
              .Add({}, Buckets(kCommitDurationBuckets))),
      store_committed_records_(
          CounterFamily(*registry_, "cachewatch_store_committed_records_total",
                        "Records made durable by successful store commits.")
              .Add({})),
      store_commit_failures_(
          CounterFamily(*registry_, "cachewatch_store_commit_failures_total",
                        "Store commits that failed.")
              .Add({})),
      store_healthy_(GaugeFamily(*registry_, "cachewatch_store_healthy",
                                 "1 while the store accepts writes, else 0.")
                         .Add({})),
      active_lanes_(GaugeFamily(*registry_, "cachewatch_active_lanes",
                                "Lanes held by the lane trackers.")
                        .Add({})),
      watch_subscribers_(
          GaugeFamily(*registry_, "cachewatch_watch_subscribers",
                      "Clients subscribed to the live break stream.")
              .Add({})),
      retention_deleted_rows_(
          CounterFamily(*registry_, "cachewatch_retention_deleted_rows_total",
                        "Rows deleted by retention.")
              .Add({})),
      export_failures_(
          CounterFamily(*registry_, "cachewatch_export_failures_total",
                        "Exports of committed turns that an exporter dropped "
                        "or failed (metrics, live stream).")
              .Add({})) {
  GaugeFamily(*registry_, "cachewatch_build_info",
              "Always 1; the version of cachewatchd in a label.")
      .Add({{"version", version}})
      .Set(1);
  store_healthy_.Set(1);
  auto& ingest_records =
      CounterFamily(*registry_, "cachewatch_ingest_records_total",
                    "Ingested records by kind and outcome.");
  for (const auto& [kind, kind_name] : kRecordKindNames) {
    for (const auto& [outcome, outcome_name] : kOutcomeNames) {
      ingest_series_[static_cast<size_t>(kind)][static_cast<size_t>(outcome)] =
          &ingest_records.Add({{"kind", std::string(kind_name)},
                               {"outcome", std::string(outcome_name)}});
    }
  }
}

void Telemetry::OnIngest(RecordKind kind, IngestOutcome outcome) {
  ingest_series_[static_cast<size_t>(kind)][static_cast<size_t>(outcome)]
      ->Increment();
}

void Telemetry::SetStoreQueueDepth(size_t records) {
  store_queue_records_.Set(static_cast<double>(records));
}

void Telemetry::ObserveStoreCommit(double seconds, size_t records, bool ok) {
  store_commit_duration_.Observe(seconds);
  if (ok) {
    store_committed_records_.Increment(static_cast<double>(records));
  } else {
    store_commit_failures_.Increment();
  }
}

void Telemetry::SetStoreHealthy(bool healthy) {
  store_healthy_.Set(healthy ? 1 : 0);
}

void Telemetry::SetActiveLanes(size_t lanes) {
  active_lanes_.Set(static_cast<double>(lanes));
}

void Telemetry::SetWatchSubscribers(size_t subscribers) {
  watch_subscribers_.Set(static_cast<double>(subscribers));
}

void Telemetry::OnRetentionDeleted(int64_t rows) {
  retention_deleted_rows_.Increment(static_cast<double>(rows));
}

void Telemetry::OnExportFailed() { export_failures_.Increment(); }

}  // namespace cachewatch
