// How a lane's state (LaneState) is rebuilt from the turns a store holds of
// it: the one rule both stores' LoadLane apply (docs/CLASSIFICATION.md,
// "Lane state").
//
// A store reads the lane's turns newest first and hands them, one at a time,
// through a LaneHistory; RestoreLaneState decides which of them the lane
// state keeps:
// - `waiting`: the unclassified turns (no verdict, or VERDICT_PENDING), at
//   most LaneLimits::waiting of them, the newest; each with its snapshot.
// - `answered`: the classified turns, oldest first, at most
//   LaneLimits::answered of them, the newest. The read stops at the first
//   classified turn past that limit: a turn older than it neither is
//   remembered nor waits (a turn waits only behind an unclassified one).
// - `last_turn`: the newest classified turn by (request time, request id),
//   with its snapshot. When it has none of its own and was no break, it
//   takes the snapshot of the newest older classified turn that has one,
//   unless a break comes first: the tracker measures the turn after a
//   snapshot-less turn that was no break against the last snapshot its lane
//   saw, and so does the restored baseline.
// - `observed_ttl_seconds`: 3600 when the newest classified turn read with a
//   5 m / 1 h write split wrote 1 h tokens, else 300; when none read did,
//   what LaneHistory::EarlierObservedTtl says (0: none showed one).
//
// Pure: no I/O of its own (the history is the store's), no clock. Whole
// turns and snapshots are decoded only for the turns kept with one.
//
// Thread-safety: RestoreLaneState keeps no state; a LaneHistory is used by
// one thread at a time.
#ifndef CACHEWATCH_DAEMON_CORE_LANE_HISTORY_H_
#define CACHEWATCH_DAEMON_CORE_LANE_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "daemon/core/lane_state.h"
#include "daemon/core/turn.h"

namespace cachewatch {

// What the rule reads of each stored turn of a lane: the few columns of its
// row it decides by (LaneHistory::Turn decodes the whole turn).
struct StoredTurn {
  std::string request_id;
  // Client time of the request (Turn::request_time_us).
  int64_t request_time_us = 0;
  // Whether the turn's snapshot was received.
  bool has_snapshot = false;
  // Its usage's cache writes with a 5 m and with a 1 h TTL (0 without a
  // usage).
  int64_t cache_write_5m_tokens = 0;
  int64_t cache_write_1h_tokens = 0;
  // Its classification (for a break with its event, for an expected drop
  // with its hint); empty while the turn is unclassified.
  std::optional<v1::TurnClassification> classification;
  // When its first record was received (daemon clock, microseconds).
  int64_t received_us = 0;
};

// A lane's stored turns as a store reads them. Implemented by each store
// over its lane query.
class LaneHistory {
 public:
  virtual ~LaneHistory() = default;

  // The next turn, newest first by request time (turns of the same request
  // time in any order); nullptr after the last. The turn stays valid, and
  // may be moved from, until the next call.
  virtual absl::StatusOr<StoredTurn*> Next() = 0;

  // The whole turn Next() returned last, without its snapshot; asked only
  // for the turns the lane state keeps one of.
  virtual absl::StatusOr<Turn> FullTurn() = 0;

  // The snapshot of the turn Next() returned last; null when it has none.
  virtual absl::StatusOr<std::shared_ptr<const v1::Snapshot>> Snapshot() = 0;

  // The TTL the lane's most recent classified turn with a 5 m / 1 h write
  // split showed (3600 or 300), looking further back than the turns read;
  // 0 when none did. Asked only when no turn read showed one.
  virtual absl::StatusOr<uint32_t> EarlierObservedTtl() = 0;
};

// How much of its history a restored lane keeps.
struct LaneLimits {
  // At most this many classified turns (TrackerOptions::
  // remembered_request_ids).
  size_t answered = 0;
  // At most this many unclassified turns (TrackerOptions::
  // max_pending_per_lane).
  size_t waiting = 0;
};

// The lane state `history` holds, by the rule above; empty when the history
// has no turns. An error of the history is returned as it is.
absl::StatusOr<std::optional<LaneState>> RestoreLaneState(
    LaneHistory& history, const LaneLimits& limits);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CORE_LANE_HISTORY_H_
