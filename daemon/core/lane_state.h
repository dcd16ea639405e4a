// A lane's state as the store holds it: what LaneTracker::Restore seeds a
// lane it does not hold with, so that a lane evicted from memory (idle, the
// lane cap, a restart) resumes exactly where it was (design §7: memory is a
// cache of lane state, the store its truth).
//
// Plain values; may be copied and read from several threads.
#ifndef CACHEWATCH_DAEMON_CORE_LANE_STATE_H_
#define CACHEWATCH_DAEMON_CORE_LANE_STATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cachewatch/v1/break.pb.h"
#include "daemon/core/turn.h"

namespace cachewatch {

// A classified turn, as a retry of its records is answered.
struct AnsweredTurn {
  std::string request_id;
  v1::TurnClassification classification;
};

// A turn acknowledged but not classified yet: its snapshot waits for its
// usage, or its usage waits for its snapshot or behind an earlier turn.
struct WaitingTurn {
  Turn turn;
  // When its first record was received (daemon clock, microseconds since
  // the epoch); its pending timeout runs from there.
  int64_t received_us = 0;
};

struct LaneState {
  // The lane's last classified turn (by request time, then request id): the
  // baseline its next turn is diffed against. Empty when none is stored.
  std::optional<Turn> last_turn;
  // The TTL the lane's most recent cache write showed (3600 for 1 h writes,
  // 300 for 5 m writes), 0 when no classified turn showed one.
  uint32_t observed_ttl_seconds = 0;
  // The lane's most recent classified turns, oldest first (at most
  // TrackerOptions::remembered_request_ids are kept).
  std::vector<AnsweredTurn> answered;
  // Its unclassified turns received within the pending timeout, any order.
  std::vector<WaitingTurn> waiting;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CORE_LANE_STATE_H_
