#include "daemon/core/lane_history.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

// The TTL a turn's cache write shows: 3600 for 1 h tokens, 300 for 5 m
// tokens, 0 when it shows no split.
uint32_t TtlShownBy(const StoredTurn& stored) {
  if (stored.cache_write_1h_tokens > 0) return 3600;
  if (stored.cache_write_5m_tokens > 0) return 300;
  return 0;
}

// The snapshot of the turn `history` returned last, asked for only when it
// has one.
absl::StatusOr<std::shared_ptr<const v1::Snapshot>> SnapshotOf(
    const StoredTurn& stored, LaneHistory& history) {
  if (!stored.has_snapshot) return nullptr;
  return history.Snapshot();
}

bool IsNewer(const StoredTurn& stored, const Turn& than) {
  return std::pair(stored.request_time_us,
                   std::string_view(stored.request_id)) >
         std::pair(than.request_time_us, std::string_view(than.request_id));
}

}  // namespace

absl::StatusOr<std::optional<LaneState>> RestoreLaneState(
    LaneHistory& history, const LaneLimits& limits) {
  LaneState state;
  bool any = false;
  // The baseline has no snapshot of its own and takes an older turn's.
  bool inherit_snapshot = false;
  while (true) {
    CACHEWATCH_ASSIGN_OR_RETURN(StoredTurn * stored, history.Next());
    if (stored == nullptr) break;
    any = true;
    if (!stored->classification.has_value()) {
      if (state.waiting.size() >= limits.waiting) continue;
      WaitingTurn& waiting = state.waiting.emplace_back();
      CACHEWATCH_ASSIGN_OR_RETURN(waiting.turn, history.FullTurn());
      waiting.received_us = stored->received_us;
      CACHEWATCH_ASSIGN_OR_RETURN(waiting.turn.snapshot,
                                  SnapshotOf(*stored, history));
      continue;
    }
    if (state.answered.size() >= limits.answered) break;
    if (state.observed_ttl_seconds == 0) {
      state.observed_ttl_seconds = TtlShownBy(*stored);
    }
    const bool is_break =
        stored->classification->verdict() == v1::VERDICT_BREAK;
    if (!state.last_turn.has_value() || IsNewer(*stored, *state.last_turn)) {
      CACHEWATCH_ASSIGN_OR_RETURN(state.last_turn, history.FullTurn());
      CACHEWATCH_ASSIGN_OR_RETURN(state.last_turn->snapshot,
                                  SnapshotOf(*stored, history));
      inherit_snapshot = state.last_turn->snapshot == nullptr && !is_break;
    } else if (inherit_snapshot) {
      if (stored->has_snapshot) {
        CACHEWATCH_ASSIGN_OR_RETURN(state.last_turn->snapshot,
                                    history.Snapshot());
        inherit_snapshot = false;
      } else if (is_break) {
        inherit_snapshot = false;
      }
    }
    state.answered.push_back(
        {std::move(stored->request_id), *std::move(stored->classification)});
  }
  if (!any) return std::nullopt;
  std::reverse(state.answered.begin(), state.answered.end());
  if (state.observed_ttl_seconds == 0 && state.last_turn.has_value()) {
    CACHEWATCH_ASSIGN_OR_RETURN(state.observed_ttl_seconds,
                                history.EarlierObservedTtl());
  }
  return state;
}

}  // namespace cachewatch
