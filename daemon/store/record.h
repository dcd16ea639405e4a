// The records the store writes (one per StoreWrite variant, each carrying
// its lane key) and the lane state it gives back after a restart.
//
// Plain values; a SnapshotWrite shares its snapshot immutably, so records may
// be copied and read from several threads.
#ifndef CACHEWATCH_DAEMON_STORE_RECORD_H_
#define CACHEWATCH_DAEMON_STORE_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"
#include "daemon/core/lane_state.h"
#include "daemon/core/turn.h"

namespace cachewatch {

// A turn's snapshot. Written once: a retry of the same (lane key, request
// id) leaves the stored snapshot as it is. `snapshot` must not be null.
struct SnapshotWrite {
  LaneKey key;
  std::shared_ptr<const v1::Snapshot> snapshot;
  // ToolListHash(snapshot->tools()) (columns.h) when the producer computed
  // it (the daemon's pipeline does, on the thread that received the record:
  // not on the store's commit thread); empty: the store computes it. A store
  // stores a non-empty one as it is, so it must be that hash.
  std::string tool_list_hash = {};
};

// A turn's usage as received and as normalized. Written once, like a
// snapshot.
struct UsageWrite {
  LaneKey key;
  v1::Usage usage;
  v1::NormalizedUsage normalized;
};

// A turn's classification, and for VERDICT_BREAK the break event (stored
// once by its break id). A final verdict replaces an earlier one; a
// VERDICT_PENDING never replaces a verdict already stored.
struct ClassificationWrite {
  LaneKey key;
  std::string request_id;
  v1::TurnClassification classification;
};

using StoreWrite = std::variant<SnapshotWrite, UsageWrite, ClassificationWrite>;

// A lane as the store remembers it, to seed the lane tracker with
// (LaneTracker::Restore): after a restart, or when its next record comes
// after the tracker forgot it.
struct RestoredLane {
  LaneKey key;
  LaneState state;
};

// How much of a lane's history a lane lookup reads (RecordStore::LoadLane).
struct LaneLookup {
  // Only turns with request time >= since_us (client clock): retention.
  int64_t since_us = 0;
  // Unclassified turns only when received at or after this (daemon clock):
  // older ones were given up (the pending timeout).
  int64_t waiting_since_us = 0;
  // At most this many classified turns (the tracker's remembered answers).
  size_t answered = 16;
  // At most this many unclassified turns (its pending turns per lane).
  size_t waiting = 64;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_RECORD_H_
