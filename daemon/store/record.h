// The records the store writes (one per StoreWrite variant, each carrying
// its lane key) and the lane state it gives back after a restart.
//
// Plain values; a SnapshotWrite shares its snapshot immutably, so records may
// be copied and read from several threads.
#ifndef CACHEWATCH_DAEMON_STORE_RECORD_H_
#define CACHEWATCH_DAEMON_STORE_RECORD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"
#include "daemon/core/turn.h"

namespace cachewatch {

// A turn's snapshot. Written once: a retry of the same (lane key, request
// id) leaves the stored snapshot as it is. `snapshot` must not be null.
struct SnapshotWrite {
  LaneKey key;
  std::shared_ptr<const v1::Snapshot> snapshot;
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

// A lane as the store remembers it, to seed the lane tracker after a restart
// (LaneTracker::Restore).
struct RestoredLane {
  LaneKey key;
  // The lane's last classified turn, with its snapshot (when received),
  // usage and provider diagnostics reconstructed.
  Turn last_turn;
  // The TTL the lane's most recent cache write showed (3600 for 1 h writes,
  // 300 for 5 m writes), 0 when no classified turn showed one.
  uint32_t observed_ttl_seconds = 0;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_RECORD_H_
