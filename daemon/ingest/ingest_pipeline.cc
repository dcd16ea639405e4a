#include "daemon/ingest/ingest_pipeline.h"

#include <chrono>
#include <utility>

namespace cachewatch {
namespace {

constexpr int64_t kRetentionPeriodUs = 60 * 1'000'000;

Metrics::Outcome OutcomeOf(const ProcessedRecord& record) {
  switch (record.status.code()) {
    case absl::StatusCode::kOk:
      return record.duplicate ? Metrics::Outcome::kDuplicate
                              : Metrics::Outcome::kAccepted;
    case absl::StatusCode::kInvalidArgument:
      return Metrics::Outcome::kInvalid;
    case absl::StatusCode::kResourceExhausted:
      return Metrics::Outcome::kResourceExhausted;
    case absl::StatusCode::kUnauthenticated:
      return Metrics::Outcome::kUnauthenticated;
    default:
      return Metrics::Outcome::kUnavailable;
  }
}

}  // namespace

IngestPipeline::IngestPipeline(const PipelineOptions& options, Store* store,
                               Metrics* metrics, BreakHub* hub,
                               const Clock* clock)
    : options_(options),
      store_(store),
      metrics_(metrics),
      hub_(hub),
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
  absl::StatusOr<std::vector<RestoredLane>> lanes =
      store_->LoadRecentLanes(now - options_.restore_window_us);
  if (!lanes.ok()) return lanes.status();
  for (RestoredLane& lane : *lanes) {
    Shard& shard = ShardFor(lane.key);
    std::lock_guard<std::mutex> lock(shard.mutex);
    LaneState state;
    state.last_turn = std::move(lane.last_turn);
    state.observed_ttl_seconds = lane.observed_ttl_seconds;
    shard.tracker->Restore(lane.key, std::move(state), now);
  }
  return lanes->size();
}

void IngestPipeline::AddClassifications(
    const std::vector<ClassifiedTurn>& classified,
    std::vector<StoreWrite>& writes) {
  for (const ClassifiedTurn& turn : classified) {
    writes.push_back(ClassificationWrite{turn.key, turn.turn.request_id,
                                         turn.classification});
  }
}

ProcessedRecord IngestPipeline::Reject(bool is_usage, absl::Status status) {
  ProcessedRecord record;
  record.is_usage = is_usage;
  record.status = std::move(status);
  RecordOutcome(record);
  return record;
}

ProcessedRecord IngestPipeline::ProcessSnapshot(v1::Snapshot snapshot) {
  ProcessedRecord record;
  record.request_id = snapshot.request_id();
  const int64_t now = clock_->NowMicros();
  record.status = ValidateSnapshot(snapshot, options_.limits, now);
  if (!record.status.ok()) {
    RecordOutcome(record);
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
  record.is_usage = true;
  record.request_id = usage.request_id();
  const int64_t now = clock_->NowMicros();
  absl::StatusOr<v1::NormalizedUsage> normalized =
      ValidateUsage(usage, options_.limits, now);
  if (!normalized.ok()) {
    record.status = normalized.status();
    RecordOutcome(record);
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
    metrics_->ObserveStoreCommit(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count(),
        count, committed.ok());
    // A full queue is back-pressure, not an unhealthy store.
    if (committed.code() != absl::StatusCode::kResourceExhausted) {
      metrics_->SetStoreHealthy(committed.ok());
    }
  }
  for (ProcessedRecord* record : records) {
    if (!record->status.ok()) continue;  // Counted when it was rejected.
    if (!committed.ok()) record->status = committed;
    RecordOutcome(*record);
    if (committed.ok()) Export(record->classified);
  }
}

void IngestPipeline::RecordOutcome(const ProcessedRecord& record) {
  metrics_->OnIngest(record.is_usage ? Metrics::RecordKind::kUsage
                                     : Metrics::RecordKind::kSnapshot,
                     OutcomeOf(record));
}

void IngestPipeline::Export(const std::vector<ClassifiedTurn>& classified) {
  for (const ClassifiedTurn& turn : classified) {
    metrics_->OnTurnClassified(turn);
    if (turn.classification.verdict() == v1::VERDICT_BREAK) {
      hub_->Publish(turn.classification.cache_break());
    }
  }
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
    // Released turns not stored now are stored as pending; their records
    // themselves are durable already.
    if (store_->Write(std::move(writes)).ok()) Export(released);
  }
  metrics_->SetActiveLanes(lane_count());
  metrics_->SetStoreQueueDepth(store_->queued_records());
  metrics_->SetWatchSubscribers(hub_->subscriber_count());
  if (options_.retention_us > 0 &&
      now - last_retention_us_ >= kRetentionPeriodUs) {
    last_retention_us_ = now;
    absl::StatusOr<int64_t> deleted =
        store_->DeleteOlderThan(now - options_.retention_us);
    if (deleted.ok()) metrics_->OnRetentionDeleted(*deleted);
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
