// The lane tracker: pairs each snapshot with its usage by request id, orders
// a lane's turns by client request time, and classifies each completed turn
// against the lane's previous one (docs/CLASSIFICATION.md, "Pairing and
// ordering").
//
// A completed turn waits while an earlier turn of its lane (by request time)
// still lacks its usage, so an out-of-order usage is diffed against the right
// previous turn. A usage whose snapshot has not arrived waits for it for a
// grace window (a usage may overtake its snapshot in a reporter's queue or on
// the network); paired in time, the turn is classified as if the records had
// come in order. Only a snapshot that never comes leaves its turn without one
// (its break, if any, is `unknown`); the lane's next turn is then diffed
// against the last snapshot the lane saw, unless the snapshot-less turn was a
// break itself. Unpaired snapshots are given up after a timeout, idle lanes
// are evicted, and the number of lanes is bounded (least recently used goes
// first). The daemon's clock (`now_us`) is used only for those expiries and
// the grace window; classification and ordering use the client's timestamps.
//
// Memory is a cache of lane state; the store is its truth
// (docs/CLASSIFICATION.md, "Lane state"). A forgotten lane is not a new one:
// before a lane's first record the caller asks HasLane() and, when the tracker
// does not hold the lane, seeds it from the store with Restore() (a lane truly
// new is restored empty), so its next turn is diffed against its real previous
// turn, a retry of a record it answered is a duplicate, and its waiting turns
// wait on. The tracker itself does no I/O.
//
// An idle lane keeps only its baseline (what the classifier compares the
// next turn with, without the fields its key already holds and without
// provider diagnostics), its recent
// turns' request ids (as XXH3-64 hashes: two ids of one lane's last
// `remembered_request_ids` turns sharing a hash, a ~2^-60 event, would make
// the second a duplicate) with their classifications, and its tool list,
// which is shared with every other lane of the tracker that sent the same
// list (ToolListInterner). Of the baseline's snapshot a lane keeps its
// message chain; the rest (model, system sections, cache_control layout,
// options) is shared with every lane of the tracker whose last turn sent the
// same (SnapshotInterner).
//
// Not thread-safe: callers serialize access (the daemon shards lanes over
// several trackers, each behind its own mutex).
#ifndef CACHEWATCH_DAEMON_CORE_LANE_TRACKER_H_
#define CACHEWATCH_DAEMON_CORE_LANE_TRACKER_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"
#include "daemon/core/classifier.h"
#include "daemon/core/lane_state.h"
#include "daemon/core/snapshot_interner.h"
#include "daemon/core/tool_list_interner.h"
#include "daemon/core/turn.h"

namespace cachewatch {

struct TrackerOptions {
  // A snapshot whose usage has not arrived after this long is given up.
  // Default 10 minutes.
  int64_t pending_timeout_us = 600'000'000;
  // A usage whose snapshot has not arrived waits this long for it (daemon
  // clock) before its turn is classified without one. Default 30 seconds.
  int64_t usage_grace_us = 30'000'000;
  // A lane without records for this long is forgotten. Default 2 hours.
  int64_t idle_lane_timeout_us = 7'200'000'000;
  // At most this many lanes; the least recently used is forgotten first.
  // Default 1,000,000.
  size_t max_lanes = 1'000'000;
  // At most this many unclassified turns per lane; beyond it the oldest
  // unpaired snapshot is given up (or the oldest usage stops waiting for its
  // snapshot). Default 64.
  size_t max_pending_per_lane = 64;
  // Classified request ids remembered per lane, so that a retried record is
  // recognized as a duplicate. Default 16.
  size_t remembered_request_ids = 16;
};

// A turn whose classification became known.
struct ClassifiedTurn {
  LaneKey key;
  Turn turn;
  v1::TurnClassification classification;
};

enum class RecordOutcome {
  kAccepted,
  kDuplicate,  // Same (lane, request id, kind) seen before; nothing changed.
};

struct SnapshotResult {
  RecordOutcome outcome = RecordOutcome::kAccepted;
  std::vector<ClassifiedTurn> classified;  // Turns this record released.
};

struct UsageResult {
  RecordOutcome outcome = RecordOutcome::kAccepted;
  // This turn's classification: VERDICT_PENDING while an earlier turn of the
  // lane waits for its usage. A duplicate gets the remembered one.
  v1::TurnClassification classification;
  std::vector<ClassifiedTurn> classified;  // Turns this record released.
};

class LaneTracker {
 public:
  LaneTracker(TrackerOptions tracker_options,
              ClassifierOptions classifier_options);

  LaneTracker(const LaneTracker&) = delete;
  LaneTracker& operator=(const LaneTracker&) = delete;

  // Records a snapshot, which must be valid (see ingest validation).
  SnapshotResult AddSnapshot(std::shared_ptr<const v1::Snapshot> snapshot,
                             int64_t now_us);

  // Records a usage, already normalized, which must be valid.
  UsageResult AddUsage(const v1::Usage& usage,
                       const v1::NormalizedUsage& normalized, int64_t now_us);

  // Gives up snapshots unpaired for too long, classifies usages whose
  // snapshot did not come within the grace window (with the turns that
  // waited behind them) and forgets idle lanes.
  std::vector<ClassifiedTurn> Expire(int64_t now_us);

  // Whether the tracker holds lane `key`. When it does not, the lane's state
  // must be read from the store and given to Restore() before the lane's
  // next record.
  bool HasLane(const LaneKey& key) const { return lanes_.contains(key); }

  // Forgets lane `key` (a no-op when not held): its cached state is stale
  // (another daemon wrote it since, daemon/store/stale_lanes.h), and its
  // next record reads it from the store again.
  void Drop(const LaneKey& key);

  // Memory must not forget what the store does not hold yet: the caller pins
  // lane `key` for each record it tracked there until that record's commit
  // has ended, and the lane cap then evicts the least recently used lane
  // that no record pins (when every lane is pinned, none: the cap is
  // exceeded by at most the lanes of the records in flight). Idle expiry and
  // Drop() are unaffected. Pin() returns the lane's incarnation, which
  // Unpin() takes: a lane forgotten and held again since is another
  // incarnation, which an older pin's Unpin() leaves alone. Both are no-ops
  // for a lane not held (Pin() then returns 0, no lane's incarnation).
  uint32_t Pin(const LaneKey& key);
  void Unpin(const LaneKey& key, uint32_t incarnation);

  // Seeds lane `key` with its state as the store holds it: its baseline and
  // TTL, the answers a retry gets (the newest remembered_request_ids of
  // `state.answered`) and its waiting turns, whose pending timeouts run from
  // their `received_us` (a snapshot past its timeout is given up at once, as
  // it would have been in memory). A lane the tracker already holds is left as
  // it is (what it holds is newer than what was read). Returns the turns the
  // waiting ones released: complete turns no longer waiting behind one
  // (e.g. a classification whose write failed before a restart); they must
  // be stored like any other.
  std::vector<ClassifiedTurn> Restore(const LaneKey& key, LaneState state,
                                      int64_t now_us);

  // Whether a record of `request_id` with client time `time_us` (a
  // snapshot's request time, a usage's response time) may retry a turn lane
  // `key` answered and no longer remembers, so that only the store can tell
  // (Store::FindClassification): the lane is held, knows no turn of that id,
  // remembers as many answers as it keeps (older ones were forgotten) and
  // the record is not newer than its baseline. A record in order is never
  // in doubt.
  bool MayHaveForgotten(const LaneKey& key, const std::string& request_id,
                        int64_t time_us) const;

  size_t lane_count() const { return lanes_.size(); }

 private:
  struct PendingTurn {
    Turn turn;
    int64_t arrived_us = 0;        // Of its first record, daemon clock.
    int64_t usage_arrived_us = 0;  // Of its usage, daemon clock.
  };
  using PendingKey = std::pair<int64_t, std::string>;  // (time, request id)

  // A classified turn as its lane remembers it, to answer a retry: about
  // 50 bytes where the request id and a TurnClassification took 120.
  struct RememberedTurn {
    uint64_t request_id_hash = 0;  // RequestIdHash().
    v1::Verdict verdict = v1::VERDICT_UNSPECIFIED;
    v1::ExpectedDrop expected_drop = v1::EXPECTED_DROP_UNSPECIFIED;
    int64_t expected_reuse_tokens = 0;
    int64_t missed_tokens = 0;
    std::shared_ptr<const v1::PromptCacheBreak> cache_break;  // Breaks only.

    static RememberedTurn Of(const std::string& request_id,
                             const v1::TurnClassification& classification);
    v1::TurnClassification Classification() const;
  };

  struct Lane {
    // The baseline: the last classified turn, as Baseline() keeps it.
    std::optional<Turn> last;
    LaneContext context;
    std::map<PendingKey, PendingTurn> pending;
    // Oldest first.
    std::vector<RememberedTurn> recent;
    int64_t last_active_us = 0;
    int pins = 0;  // Records tracked here whose commit has not ended.
    uint32_t incarnation = 0;  // Which holding of the lane this is (>= 1).
    std::list<const LaneKey*>::iterator lru_position;
  };

  Lane& Touch(const LaneKey& key, int64_t now_us);
  // Forgets the least recently used unpinned lanes until at most `lanes`
  // are held (or only pinned ones are left).
  void EvictDownTo(size_t lanes);
  void Forget(std::unordered_map<LaneKey, Lane, LaneKeyHash>::iterator it);
  static const RememberedTurn* Remembered(const Lane& lane,
                                          const std::string& request_id);
  static std::map<PendingKey, PendingTurn>::iterator FindPending(
      Lane& lane, const std::string& request_id);
  // Whether the turn can be classified at `now_us`: it has its usage, and
  // its snapshot or the grace window for it has passed.
  bool Ready(const PendingTurn& pending, int64_t now_us) const;
  // Classifies turns from the front of the lane while they are ready.
  void Drain(const LaneKey& key, Lane& lane, int64_t now_us,
             std::vector<ClassifiedTurn>& classified);
  // A snapshot that came after its turn was classified without it: becomes
  // the lane's baseline snapshot when that turn is still the baseline.
  void LateSnapshot(Lane& lane, std::shared_ptr<const v1::Snapshot> snapshot);
  void DropOldestUnpaired(Lane& lane);
  // `turn` as a lane keeps it for the next classification: its message
  // chain, the rest of its snapshot and its tools interned. A turn
  // without a snapshot that was no break keeps `previous`'s snapshot.
  Turn Baseline(const Turn& turn, const Turn* previous,
                const v1::TurnClassification& classification);

  const TrackerOptions options_;
  const ClassifierOptions classifier_options_;
  std::unordered_map<LaneKey, Lane, LaneKeyHash> lanes_;
  // The keys of lanes_ (which never move), most recently used first.
  std::list<const LaneKey*> lru_;
  uint32_t last_incarnation_ = 0;  // Of the lane held last.
  ToolListInterner tool_lists_;
  SnapshotInterner snapshots_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CORE_LANE_TRACKER_H_
