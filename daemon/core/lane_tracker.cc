#include "daemon/core/lane_tracker.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "daemon/core/usage_normalizer.h"

namespace cachewatch {
namespace {

using google::protobuf::util::TimeUtil;

}  // namespace

LaneTracker::LaneTracker(TrackerOptions tracker_options,
                         ClassifierOptions classifier_options)
    : options_(std::move(tracker_options)),
      classifier_options_(std::move(classifier_options)) {}

LaneTracker::Lane& LaneTracker::Touch(const LaneKey& key, int64_t now_us) {
  auto it = lanes_.find(key);
  if (it == lanes_.end()) {
    EvictDownTo(options_.max_lanes > 0 ? options_.max_lanes - 1 : 0);
    it = lanes_.emplace(key, Lane{}).first;
    if (++last_incarnation_ == 0) ++last_incarnation_;  // 0 is no lane's.
    it->second.incarnation = last_incarnation_;
    lru_.push_front(&it->first);
    it->second.lru_position = lru_.begin();
  } else {
    lru_.splice(lru_.begin(), lru_, it->second.lru_position);
  }
  it->second.last_active_us = now_us;
  return it->second;
}

void LaneTracker::Forget(
    std::unordered_map<LaneKey, Lane, LaneKeyHash>::iterator it) {
  lru_.erase(it->second.lru_position);
  lanes_.erase(it);
}

void LaneTracker::Drop(const LaneKey& key) {
  auto it = lanes_.find(key);
  if (it != lanes_.end()) Forget(it);
}

uint32_t LaneTracker::Pin(const LaneKey& key) {
  auto it = lanes_.find(key);
  if (it == lanes_.end()) return 0;
  ++it->second.pins;
  return it->second.incarnation;
}

void LaneTracker::Unpin(const LaneKey& key, uint32_t incarnation) {
  auto it = lanes_.find(key);
  if (it != lanes_.end() && it->second.incarnation == incarnation &&
      it->second.pins > 0) {
    --it->second.pins;
  }
  EvictDownTo(options_.max_lanes);  // What pins kept above the cap.
}

void LaneTracker::EvictDownTo(size_t lanes) {
  // Least recently used first, skipping the lanes records in flight pin.
  auto victim = lru_.end();
  while (lanes_.size() > lanes && victim != lru_.begin()) {
    --victim;
    auto found = lanes_.find(**victim);
    if (found->second.pins > 0) continue;
    victim = std::next(victim);  // Forget erases the current position.
    Forget(found);
  }
}

LaneTracker::RememberedTurn LaneTracker::RememberedTurn::Of(
    const std::string& request_id,
    const v1::TurnClassification& classification) {
  RememberedTurn remembered;
  remembered.request_id_hash = RequestIdHash(request_id);
  remembered.verdict = classification.verdict();
  remembered.expected_drop = classification.expected_drop();
  remembered.expected_reuse_tokens = classification.expected_reuse_tokens();
  remembered.missed_tokens = classification.missed_tokens();
  if (classification.has_cache_break()) {
    remembered.cache_break = std::make_shared<const v1::PromptCacheBreak>(
        classification.cache_break());
  }
  return remembered;
}

v1::TurnClassification LaneTracker::RememberedTurn::Classification() const {
  v1::TurnClassification classification;
  classification.set_verdict(verdict);
  classification.set_expected_drop(expected_drop);
  classification.set_expected_reuse_tokens(expected_reuse_tokens);
  classification.set_missed_tokens(missed_tokens);
  if (cache_break != nullptr)
    *classification.mutable_cache_break() = *cache_break;
  return classification;
}

const LaneTracker::RememberedTurn* LaneTracker::Remembered(
    const Lane& lane, const std::string& request_id) {
  const uint64_t hash = RequestIdHash(request_id);
  for (const RememberedTurn& remembered : lane.recent) {
    if (remembered.request_id_hash == hash) return &remembered;
  }
  return nullptr;
}

std::map<LaneTracker::PendingKey, LaneTracker::PendingTurn>::iterator
LaneTracker::FindPending(Lane& lane, const std::string& request_id) {
  return std::find_if(
      lane.pending.begin(), lane.pending.end(),
      [&](const auto& entry) { return entry.first.second == request_id; });
}

bool LaneTracker::Ready(const PendingTurn& pending, int64_t now_us) const {
  return pending.turn.usage.has_value() &&
         (pending.turn.snapshot != nullptr ||
          now_us - pending.usage_arrived_us >= options_.usage_grace_us);
}

void LaneTracker::Drain(const LaneKey& key, Lane& lane, int64_t now_us,
                        std::vector<ClassifiedTurn>& classified) {
  while (!lane.pending.empty() && Ready(lane.pending.begin()->second, now_us)) {
    auto node = lane.pending.extract(lane.pending.begin());
    Turn& turn = node.mapped().turn;
    v1::TurnClassification classification =
        Classify(key, lane.last ? &*lane.last : nullptr, turn, lane.context,
                 classifier_options_);
    if (const uint32_t ttl = TtlFromWriteSplit(*turn.usage); ttl > 0) {
      lane.context.observed_ttl_seconds = ttl;
    }
    lane.recent.push_back(RememberedTurn::Of(turn.request_id, classification));
    if (lane.recent.size() > options_.remembered_request_ids) {
      lane.recent.erase(lane.recent.begin());
    }
    lane.last =
        Baseline(turn, lane.last ? &*lane.last : nullptr, classification);
    classified.push_back({key, std::move(turn), std::move(classification)});
  }
}

Turn LaneTracker::Baseline(const Turn& turn, const Turn* previous,
                           const v1::TurnClassification& classification) {
  // No provider diagnostics: the classifier reads only the current turn's.
  Turn baseline;
  baseline.request_id = turn.request_id;
  baseline.usage = turn.usage;
  baseline.provider = turn.provider;
  baseline.model = turn.model;
  baseline.request_time_us = turn.request_time_us;
  if (turn.snapshot != nullptr) {
    // A lane's list and shared part rarely change: compared with the last
    // ones first.
    baseline.tools = tool_lists_.Intern(
        ToolsOf(turn), previous != nullptr ? previous->tools : nullptr);
    const absl::Span<const uint64_t> chain = MessageChainOf(turn);
    baseline.message_chain.assign(chain.begin(), chain.end());
    baseline.snapshot = snapshots_.Intern(
        *turn.snapshot, previous != nullptr ? previous->snapshot : nullptr);
  } else if (previous != nullptr &&
             classification.verdict() != v1::VERDICT_BREAK) {
    // The lost snapshot most likely matched the last one seen: nothing
    // broke. Its usage is what the next turn is measured against.
    baseline.tools = previous->tools;
    baseline.message_chain = previous->message_chain;
    baseline.snapshot = previous->snapshot;
  }
  return baseline;
}

void LaneTracker::LateSnapshot(Lane& lane,
                               std::shared_ptr<const v1::Snapshot> snapshot) {
  if (!lane.last.has_value() ||
      lane.last->request_id != snapshot->request_id()) {
    return;
  }
  Turn& last = *lane.last;
  last.tools = tool_lists_.Intern(snapshot->tools());
  last.message_chain.assign(snapshot->message_chain().begin(),
                            snapshot->message_chain().end());
  last.snapshot = snapshots_.Intern(*snapshot);
  if (last.model.empty()) last.model = snapshot->model();
}

void LaneTracker::DropOldestUnpaired(Lane& lane) {
  for (auto it = lane.pending.begin(); it != lane.pending.end(); ++it) {
    if (!it->second.turn.usage.has_value()) {
      lane.pending.erase(it);
      return;
    }
    if (it->second.turn.snapshot == nullptr) {
      // Stop waiting for this usage's snapshot.
      it->second.usage_arrived_us = std::numeric_limits<int64_t>::min() / 2;
      return;
    }
  }
}

SnapshotResult LaneTracker::AddSnapshot(
    std::shared_ptr<const v1::Snapshot> snapshot, int64_t now_us) {
  SnapshotResult result;
  const LaneKey key = LaneKeyOf(*snapshot);
  Lane& lane = Touch(key, now_us);
  const std::string& request_id = snapshot->request_id();
  if (Remembered(lane, request_id) != nullptr) {
    result.outcome = RecordOutcome::kDuplicate;
    LateSnapshot(lane, std::move(snapshot));
    return result;
  }
  const int64_t request_time_us =
      TimeUtil::TimestampToMicroseconds(snapshot->request_time());
  PendingTurn pending{Turn{}, now_us};
  auto existing = FindPending(lane, request_id);
  if (existing != lane.pending.end()) {
    if (existing->second.turn.snapshot != nullptr) {
      result.outcome = RecordOutcome::kDuplicate;
      return result;
    }
    // The usage came first: re-key the turn by its request time.
    pending = std::move(existing->second);
    lane.pending.erase(existing);
  }
  Turn& turn = pending.turn;
  turn.request_id = request_id;
  turn.provider = snapshot->provider();
  turn.model = snapshot->model();
  turn.request_time_us = request_time_us;
  if (snapshot->expected_drop() == v1::EXPECTED_DROP_ABORTED_PREVIOUS) {
    std::erase_if(lane.pending, [&](const auto& entry) {
      return entry.first.first < request_time_us &&
             !entry.second.turn.usage.has_value();
    });
  }
  turn.snapshot = std::move(snapshot);
  lane.pending.insert_or_assign(PendingKey{request_time_us, request_id},
                                std::move(pending));
  if (lane.pending.size() > options_.max_pending_per_lane) {
    DropOldestUnpaired(lane);
  }
  Drain(key, lane, now_us, result.classified);
  return result;
}

UsageResult LaneTracker::AddUsage(const v1::Usage& usage,
                                  const v1::NormalizedUsage& normalized,
                                  int64_t now_us) {
  UsageResult result;
  result.classification.set_verdict(v1::VERDICT_PENDING);
  const LaneKey key = LaneKeyOf(usage);
  Lane& lane = Touch(key, now_us);
  const std::string& request_id = usage.request_id();
  if (const RememberedTurn* known = Remembered(lane, request_id)) {
    result.outcome = RecordOutcome::kDuplicate;
    result.classification = known->Classification();
    return result;
  }
  auto pending = FindPending(lane, request_id);
  if (pending == lane.pending.end()) {
    // No snapshot (yet): a turn known only by its usage, placed at its
    // response time.
    Turn turn;
    turn.request_id = request_id;
    turn.provider = usage.provider();
    turn.request_time_us =
        TimeUtil::TimestampToMicroseconds(usage.response_time());
    pending = lane.pending
                  .emplace(PendingKey{turn.request_time_us, request_id},
                           PendingTurn{std::move(turn), now_us, now_us})
                  .first;
  } else if (pending->second.turn.usage.has_value()) {
    result.outcome = RecordOutcome::kDuplicate;
    return result;
  }
  pending->second.usage_arrived_us = now_us;
  Turn& turn = pending->second.turn;
  turn.usage = normalized;
  // The provider's own word: the explicit field, else what the raw
  // response carries.
  turn.provider_diagnostics =
      usage.has_provider_diagnostics()
          ? BoundedDiagnostics(usage.provider_diagnostics())
          : ParseProviderDiagnostics(usage.raw_usage_json());
  if (turn.model.empty()) turn.model = usage.model();
  if (turn.provider == v1::PROVIDER_UNSPECIFIED) {
    turn.provider = usage.provider();
  }
  Drain(key, lane, now_us, result.classified);
  if (lane.pending.size() > options_.max_pending_per_lane) {
    DropOldestUnpaired(lane);
    Drain(key, lane, now_us, result.classified);
  }
  // Released by this call, if at all: found among the released turns, not
  // in `recent`, which may already have forgotten it when the call released
  // more turns than a lane remembers.
  for (const ClassifiedTurn& released : result.classified) {
    if (released.turn.request_id == request_id) {
      result.classification = released.classification;
      break;
    }
  }
  return result;
}

std::vector<ClassifiedTurn> LaneTracker::Expire(int64_t now_us) {
  std::vector<ClassifiedTurn> classified;
  for (auto& [key, lane] : lanes_) {
    std::erase_if(lane.pending, [&](const auto& entry) {
      return !entry.second.turn.usage.has_value() &&
             now_us - entry.second.arrived_us >= options_.pending_timeout_us;
    });
    Drain(key, lane, now_us, classified);
  }
  while (!lru_.empty()) {
    auto it = lanes_.find(*lru_.back());
    if (now_us - it->second.last_active_us < options_.idle_lane_timeout_us) {
      break;
    }
    Forget(it);
  }
  tool_lists_.Sweep();
  snapshots_.Sweep();
  return classified;
}

std::vector<ClassifiedTurn> LaneTracker::Restore(const LaneKey& key,
                                                 LaneState state,
                                                 int64_t now_us) {
  std::vector<ClassifiedTurn> classified;
  if (HasLane(key)) return classified;
  Lane& lane = Touch(key, now_us);
  if (state.last_turn.has_value()) {
    lane.last = Baseline(*state.last_turn, nullptr, v1::TurnClassification());
  }
  lane.context.observed_ttl_seconds = state.observed_ttl_seconds;
  const size_t keep =
      std::min(state.answered.size(), options_.remembered_request_ids);
  for (auto it = state.answered.end() - static_cast<std::ptrdiff_t>(keep);
       it != state.answered.end(); ++it) {
    lane.recent.push_back(
        RememberedTurn::Of(it->request_id, it->classification));
  }
  for (WaitingTurn& waiting : state.waiting) {
    // A snapshot whose usage would have been given up by now, had the lane
    // stayed in memory, is given up as it would have been.
    if (!waiting.turn.usage.has_value() &&
        now_us - waiting.received_us >= options_.pending_timeout_us) {
      continue;
    }
    const PendingKey pending_key{waiting.turn.request_time_us,
                                 waiting.turn.request_id};
    lane.pending.insert_or_assign(
        pending_key, PendingTurn{std::move(waiting.turn), waiting.received_us,
                                 waiting.received_us});
  }
  while (lane.pending.size() > options_.max_pending_per_lane) {
    const size_t before = lane.pending.size();
    DropOldestUnpaired(lane);
    if (lane.pending.size() == before) break;  // Only complete turns left.
  }
  Drain(key, lane, now_us, classified);
  return classified;
}

bool LaneTracker::MayHaveForgotten(const LaneKey& key,
                                   const std::string& request_id,
                                   int64_t time_us) const {
  auto it = lanes_.find(key);
  if (it == lanes_.end()) return false;
  const Lane& lane = it->second;
  if (lane.recent.size() < options_.remembered_request_ids ||
      !lane.last.has_value() || time_us > lane.last->request_time_us) {
    return false;
  }
  if (Remembered(lane, request_id) != nullptr) return false;
  return std::none_of(
      lane.pending.begin(), lane.pending.end(),
      [&](const auto& entry) { return entry.first.second == request_id; });
}

}  // namespace cachewatch
