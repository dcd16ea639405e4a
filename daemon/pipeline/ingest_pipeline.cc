#include "daemon/pipeline/ingest_pipeline.h"

#include <chrono>
#include <string>
#include <utility>

#include "daemon/util/log.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

constexpr int64_t kRetentionPeriodUs = 60 * 1'000'000;

IngestOutcome OutcomeOf(const ProcessedRecord& record) {
  switch (record.status.code()) {
    case absl::StatusCode::kOk:
      return record.duplicate ? IngestOutcome::kDuplicate
                              : IngestOutcome::kAccepted;
    case absl::StatusCode::kInvalidArgument:
      return IngestOutcome::kInvalid;
    case absl::StatusCode::kResourceExhausted:
      return IngestOutcome::kResourceExhausted;
    case absl::StatusCode::kUnauthenticated:
      return IngestOutcome::kUnauthenticated;
    default:
      return IngestOutcome::kUnavailable;
  }
}

}  // namespace

IngestPipeline::IngestPipeline(const PipelineOptions& options,
                               RecordStore* store, TurnExporter* exporter,
                               Telemetry* telemetry, const Clock* clock)
    : options_(options),
      store_(store),
      exporter_(exporter),
      telemetry_(telemetry),
      clock_(clock) {
  TrackerOptions per_shard = options_.tracker;
  per_shard.max_lanes =
      std::max<size_t>(1, options_.tracker.max_lanes / options_.shards);
  for (int i = 0; i < options_.shards; ++i) {
    auto shard = std::make_unique<Shard>();
    shard->tracker =
        std::make_unique<LaneTracker>(per_shard, options_.classifier);
    shards_.push_back(std::move(shard));
  }
}

IngestPipeline::Shard& IngestPipeline::ShardFor(const LaneKey& key) {
  return *shards_[LaneKeyHash()(key) % shards_.size()];
}

absl::StatusOr<size_t> IngestPipeline::RestoreLanes() {
  const int64_t now = clock_->NowMicros();
  CACHEWATCH_ASSIGN_OR_RETURN(
      std::vector<RestoredLane> lanes,
      store_->LoadRecentLanes(now - options_.restore_window_us));
  for (RestoredLane& lane : lanes) {
    Shard& shard = ShardFor(lane.key);
    std::lock_guard<std::mutex> lock(shard.mutex);
    shard.tracker->Restore(lane.key, std::move(lane.last_turn),
                           lane.observed_ttl_seconds, now);
  }
  return lanes.size();
}

void IngestPipeline::AddClassifications(
    const std::vector<ClassifiedTurn>& classified,
    std::vector<StoreWrite>& writes) {
  for (const ClassifiedTurn& turn : classified) {
    writes.push_back(ClassificationWrite{turn.key, turn.turn.request_id,
                                         turn.classification});
  }
}

ProcessedRecord IngestPipeline::Reject(RecordKind kind, absl::Status status) {
  ProcessedRecord record;
  record.kind = kind;
  record.status = std::move(status);
  CountOutcome(record);
  return record;
}

ProcessedRecord IngestPipeline::ProcessSnapshot(v1::Snapshot snapshot) {
  ProcessedRecord record;
  record.request_id = snapshot.request_id();
  const int64_t now = clock_->NowMicros();
  record.status = ValidateSnapshot(snapshot, options_.limits, now);
  if (!record.status.ok()) {
    CountOutcome(record);
    return record;
  }
  const LaneKey key = LaneKeyOf(snapshot);
  auto shared = std::make_shared<const v1::Snapshot>(std::move(snapshot));
  SnapshotResult result;
  {
    Shard& shard = ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mutex);
    result = shard.tracker->AddSnapshot(shared, now);
  }
  // A duplicate is written again: the store ignores what it already has, and
  // a retry after a failed commit is made durable this time.
  record.duplicate = result.outcome == RecordOutcome::kDuplicate;
  record.writes.push_back(SnapshotWrite{key, std::move(shared)});
  AddClassifications(result.classified, record.writes);
  record.classified = std::move(result.classified);
  return record;
}

ProcessedRecord IngestPipeline::ProcessUsage(v1::Usage usage) {
  ProcessedRecord record;
  record.kind = RecordKind::kUsage;
  record.request_id = usage.request_id();
  const int64_t now = clock_->NowMicros();
  absl::StatusOr<v1::NormalizedUsage> normalized =
      ValidateUsage(usage, options_.limits, now);
  if (!normalized.ok()) {
    record.status = normalized.status();
    CountOutcome(record);
    return record;
  }
  const LaneKey key = LaneKeyOf(usage);
  UsageResult result;
  {
    Shard& shard = ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mutex);
    result = shard.tracker->AddUsage(usage, *normalized, now);
  }
  record.duplicate = result.outcome == RecordOutcome::kDuplicate;
  record.classification = result.classification;
  if (record.duplicate &&
      result.classification.verdict() != v1::VERDICT_PENDING) {
    record.writes.push_back(
        ClassificationWrite{key, usage.request_id(), result.classification});
  }
  record.writes.push_back(
      UsageWrite{key, std::move(usage), *std::move(normalized)});
  AddClassifications(result.classified, record.writes);
  record.classified = std::move(result.classified);
  return record;
}

void IngestPipeline::Commit(std::vector<ProcessedRecord*> records) {
  std::vector<StoreWrite> writes;
  for (ProcessedRecord* record : records) {
    if (!record->status.ok()) continue;
    for (StoreWrite& write : record->writes) writes.push_back(std::move(write));
    record->writes.clear();
  }
  absl::Status committed;
  if (!writes.empty()) {
    const size_t count = writes.size();
    const auto start = std::chrono::steady_clock::now();
    committed = store_->Write(std::move(writes));
    telemetry_->ObserveStoreCommit(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count(),
        count, committed.ok());
    // A full queue is back-pressure, not an unhealthy store.
    if (committed.code() != absl::StatusCode::kResourceExhausted) {
      telemetry_->SetStoreHealthy(committed.ok());
    }
  }
  for (ProcessedRecord* record : records) {
    if (!record->status.ok()) continue;  // Counted when it was rejected.
    if (!committed.ok()) record->status = committed;
    CountOutcome(*record);
    if (committed.ok()) Export(record->classified);
  }
}

void IngestPipeline::CountOutcome(const ProcessedRecord& record) {
  telemetry_->OnIngest(record.kind, OutcomeOf(record));
}

void IngestPipeline::Export(const std::vector<ClassifiedTurn>& classified) {
  if (classified.empty()) return;
  if (!exporter_->Export(classified).ok()) telemetry_->OnExportFailed();
}

void IngestPipeline::Maintain() {
  std::lock_guard<std::mutex> maintenance(maintenance_mutex_);
  const int64_t now = clock_->NowMicros();
  for (const std::unique_ptr<Shard>& shard : shards_) {
    std::vector<ClassifiedTurn> released;
    {
      std::lock_guard<std::mutex> lock(shard->mutex);
      released = shard->tracker->Expire(now);
    }
    if (released.empty()) continue;
    std::vector<StoreWrite> writes;
    AddClassifications(released, writes);
    // Released turns not stored now stay pending in the store; their
    // records themselves are durable already.
    const absl::Status stored = store_->Write(std::move(writes));
    if (stored.ok()) {
      Export(released);
    } else {
      Log(LogLevel::kWarn, "could not store expired turns' classifications",
          {{"turns", released.size()},
           {"error", std::string(stored.message())}});
    }
  }
  telemetry_->SetActiveLanes(lane_count());
  telemetry_->SetStoreQueueDepth(store_->queued_records());
  if (options_.retention_us > 0 &&
      now - last_retention_us_ >= kRetentionPeriodUs) {
    last_retention_us_ = now;
    absl::StatusOr<int64_t> deleted =
        store_->DeleteOlderThan(now - options_.retention_us);
    if (deleted.ok()) {
      telemetry_->OnRetentionDeleted(*deleted);
    } else {
      Log(LogLevel::kWarn, "retention failed",
          {{"error", std::string(deleted.status().message())}});
    }
  }
}

size_t IngestPipeline::lane_count() {
  size_t lanes = 0;
  for (const std::unique_ptr<Shard>& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard->mutex);
    lanes += shard->tracker->lane_count();
  }
  return lanes;
}

}  // namespace cachewatch
