#include "daemon/pipeline/ingest_pipeline.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <string>
#include <utility>

#include "daemon/store/columns.h"
#include "daemon/store/stale_lanes.h"
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

LaneLookup IngestPipeline::LookupAt(int64_t now_us) const {
  LaneLookup lookup;
  lookup.since_us =
      options_.retention_us > 0 ? now_us - options_.retention_us : 0;
  lookup.waiting_since_us = now_us - options_.tracker.pending_timeout_us;
  lookup.answered = options_.tracker.remembered_request_ids;
  lookup.waiting = options_.tracker.max_pending_per_lane;
  return lookup;
}

absl::StatusOr<std::vector<RestoredLane>> IngestPipeline::RestoreLanes() {
  const int64_t now = clock_->NowMicros();
  CACHEWATCH_ASSIGN_OR_RETURN(
      std::vector<RestoredLane> recent,
      store_->LoadRecentLanes(now - options_.restore_window_us));
  const LaneLookup lookup = LookupAt(now);
  std::vector<ClassifiedTurn> released;
  for (const RestoredLane& lane : recent) {
    CACHEWATCH_ASSIGN_OR_RETURN(std::optional<RestoredLane> stored,
                                store_->LoadLane(lane.key, lookup));
    if (!stored.has_value()) continue;
    Shard& shard = ShardFor(lane.key);
    std::lock_guard<std::mutex> lock(shard.mutex);
    std::vector<ClassifiedTurn> restored =
        shard.tracker->Restore(lane.key, std::move(stored->state), now);
    std::move(restored.begin(), restored.end(), std::back_inserter(released));
  }
  for (std::vector<ClassifiedTurn>& part : SplitForWrites(released)) {
    std::vector<StoreWrite> writes;
    AddClassifications(part, writes);
    if (absl::Status written = store_->Write(std::move(writes));
        !written.ok()) {
      DropStaleLanes(written);
      return written;
    }
    Export(part);
  }
  return recent;
}

absl::Status IngestPipeline::Track(
    const LaneKey& key, const std::string& request_id, int64_t time_us,
    int64_t now_us, std::vector<ClassifiedTurn>& released,
    std::optional<v1::TurnClassification>& answered, LanePin& pin,
    const std::function<void(LaneTracker&)>& track) {
  Shard& shard = ShardFor(key);
  std::optional<LaneState> loaded;
  bool asked_store = false;
  while (true) {
    bool missing = false;
    {
      std::lock_guard<std::mutex> lock(shard.mutex);
      LaneTracker& tracker = *shard.tracker;
      if (loaded.has_value()) {
        std::vector<ClassifiedTurn> restored =
            tracker.Restore(key, *std::move(loaded), now_us);
        std::move(restored.begin(), restored.end(),
                  std::back_inserter(released));
        loaded.reset();
      }
      if (!tracker.HasLane(key)) {
        missing = true;
      } else if (asked_store ||
                 !tracker.MayHaveForgotten(key, request_id, time_us)) {
        track(tracker);
        pin = LanePin(this, key, tracker.Pin(key));
        return absl::OkStatus();
      }
    }
    if (missing) {
      CACHEWATCH_ASSIGN_OR_RETURN(std::optional<RestoredLane> stored,
                                  store_->LoadLane(key, LookupAt(now_us)));
      // A lane truly new is restored empty: held from now on.
      loaded = stored.has_value() ? std::move(stored->state) : LaneState{};
      continue;
    }
    CACHEWATCH_ASSIGN_OR_RETURN(std::optional<v1::TurnClassification> found,
                                store_->FindClassification(key, request_id));
    if (found.has_value()) {
      answered = *std::move(found);
      return absl::OkStatus();
    }
    asked_store = true;
  }
}

std::vector<std::vector<ClassifiedTurn>> IngestPipeline::SplitForWrites(
    std::vector<ClassifiedTurn>& turns) const {
  // One record (its classification) per turn.
  const size_t size = std::max<size_t>(1, options_.max_records_per_write);
  std::vector<std::vector<ClassifiedTurn>> parts;
  for (size_t begin = 0; begin < turns.size(); begin += size) {
    const size_t end = std::min(turns.size(), begin + size);
    parts.emplace_back(std::make_move_iterator(turns.begin() + begin),
                       std::make_move_iterator(turns.begin() + end));
  }
  return parts;
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
  return ProcessSnapshot(
      std::make_shared<const v1::Snapshot>(std::move(snapshot)));
}

ProcessedRecord IngestPipeline::ProcessSnapshot(
    std::shared_ptr<const v1::Snapshot> shared) {
  const v1::Snapshot& snapshot = *shared;
  ProcessedRecord record;
  record.request_id = snapshot.request_id();
  const int64_t now = clock_->NowMicros();
  record.status = ValidateSnapshot(snapshot, options_.limits, now);
  if (!record.status.ok()) {
    CountOutcome(record);
    return record;
  }
  const LaneKey key = LaneKeyOf(snapshot);
  const int64_t request_time_us =
      google::protobuf::util::TimeUtil::TimestampToMicroseconds(
          snapshot.request_time());
  SnapshotResult result;
  std::vector<ClassifiedTurn> released;
  std::optional<v1::TurnClassification> answered;
  record.status = Track(key, record.request_id, request_time_us, now, released,
                        answered, record.pin, [&](LaneTracker& tracker) {
                          result = tracker.AddSnapshot(shared, now);
                        });
  if (!record.status.ok()) {
    CountOutcome(record);
    return record;
  }
  // A duplicate is written again: the store ignores what it already has, and
  // a retry after a failed commit is made durable this time.
  record.duplicate =
      answered.has_value() || result.outcome == RecordOutcome::kDuplicate;
  // The list's hash here, on the receiving thread, not on the store's
  // single commit thread (SnapshotWrite).
  std::string list_hash = ToolListHash(snapshot.tools());
  record.writes.push_back(
      SnapshotWrite{key, std::move(shared), std::move(list_hash)});
  std::move(result.classified.begin(), result.classified.end(),
            std::back_inserter(released));
  AddClassifications(released, record.writes);
  record.classified = std::move(released);
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
  const int64_t response_time_us =
      google::protobuf::util::TimeUtil::TimestampToMicroseconds(
          usage.response_time());
  UsageResult result;
  std::vector<ClassifiedTurn> released;
  std::optional<v1::TurnClassification> answered;
  record.status = Track(key, record.request_id, response_time_us, now, released,
                        answered, record.pin, [&](LaneTracker& tracker) {
                          result = tracker.AddUsage(usage, *normalized, now);
                        });
  if (!record.status.ok()) {
    CountOutcome(record);
    return record;
  }
  if (answered.has_value()) {
    result.outcome = RecordOutcome::kDuplicate;
    result.classification = *std::move(answered);
  }
  record.duplicate = result.outcome == RecordOutcome::kDuplicate;
  record.classification = result.classification;
  // A retry's classification is written again, like its records: the store
  // keeps the verdict it has, and stores it if a failed commit lost it.
  if (record.duplicate &&
      result.classification.verdict() != v1::VERDICT_PENDING) {
    record.writes.push_back(
        ClassificationWrite{key, usage.request_id(), result.classification});
  }
  record.writes.push_back(
      UsageWrite{key, std::move(usage), *std::move(normalized)});
  std::move(result.classified.begin(), result.classified.end(),
            std::back_inserter(released));
  AddClassifications(released, record.writes);
  record.classified = std::move(released);
  return record;
}

std::vector<StoreWrite> IngestPipeline::TakeWrites(
    const std::vector<ProcessedRecord*>& records) {
  std::vector<StoreWrite> writes;
  for (ProcessedRecord* record : records) {
    if (!record->status.ok()) continue;
    for (StoreWrite& write : record->writes) writes.push_back(std::move(write));
    record->writes.clear();
  }
  return writes;
}

void IngestPipeline::Commit(std::vector<ProcessedRecord*> records) {
  std::vector<StoreWrite> writes = TakeWrites(records);
  const size_t count = writes.size();
  const auto start = std::chrono::steady_clock::now();
  absl::Status committed;
  if (count > 0) committed = store_->Write(std::move(writes));
  FinishCommit(records, std::move(committed), count, start);
}

void IngestPipeline::CommitAsync(std::vector<ProcessedRecord*> records,
                                 std::function<void()> done) {
  std::vector<StoreWrite> writes = TakeWrites(records);
  const size_t count = writes.size();
  const auto start = std::chrono::steady_clock::now();
  if (count == 0) {
    FinishCommit(records, absl::OkStatus(), count, start);
    done();
    return;
  }
  store_->WriteAsync(std::move(writes), [this, records = std::move(records),
                                         done = std::move(done), count,
                                         start](absl::Status committed) {
    FinishCommit(records, std::move(committed), count, start);
    done();
  });
}

void IngestPipeline::FinishCommit(const std::vector<ProcessedRecord*>& records,
                                  absl::Status committed, size_t count,
                                  std::chrono::steady_clock::time_point start) {
  if (count > 0) {
    telemetry_->ObserveStoreCommit(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count(),
        count, committed.ok());
    // A full queue is back-pressure, and a stale lane this daemon's cache,
    // not an unhealthy store.
    if (committed.code() != absl::StatusCode::kResourceExhausted &&
        committed.code() != absl::StatusCode::kAborted) {
      telemetry_->SetStoreHealthy(committed.ok());
    }
  }
  if (DropStaleLanes(committed)) {
    // Retried by the client, its records are tracked again from the store.
    committed = absl::UnavailableError(committed.message());
  }
  for (ProcessedRecord* record : records) {
    record->pin.Release();  // Durable now, or refused: either way final.
    if (!record->status.ok()) continue;  // Counted when it was rejected.
    if (!committed.ok()) record->status = committed;
    CountOutcome(*record);
    if (committed.ok()) Export(record->classified);
  }
}

void IngestPipeline::Unpin(const LaneKey& key, uint32_t incarnation) {
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mutex);
  shard.tracker->Unpin(key, incarnation);
}

LanePin& LanePin::operator=(LanePin&& other) noexcept {
  if (this != &other) {
    Release();
    pipeline_ = std::exchange(other.pipeline_, nullptr);
    key_ = std::move(other.key_);
    incarnation_ = other.incarnation_;
  }
  return *this;
}

void LanePin::Release() {
  if (pipeline_ != nullptr) {
    std::exchange(pipeline_, nullptr)->Unpin(key_, incarnation_);
  }
}

bool IngestPipeline::DropStaleLanes(const absl::Status& status) {
  const std::vector<LaneKey> stale = StaleLanesOf(status);
  for (const LaneKey& key : stale) {
    Shard& shard = ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mutex);
    shard.tracker->Drop(key);
  }
  return !stale.empty();
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
    for (std::vector<ClassifiedTurn>& part : SplitForWrites(released)) {
      std::vector<StoreWrite> writes;
      AddClassifications(part, writes);
      // Released turns not stored now stay pending in the store; their
      // records themselves are durable already.
      const absl::Status stored = store_->Write(std::move(writes));
      DropStaleLanes(stored);
      if (stored.ok()) {
        Export(part);
      } else {
        Log(LogLevel::kWarn, "could not store expired turns' classifications",
            {{"turns", part.size()}, {"error", std::string(stored.message())}});
      }
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
