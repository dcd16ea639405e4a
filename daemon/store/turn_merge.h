// TurnMerger: a batch's records (record.h) grouped per turn, so that a store
// writes each turn's row once per batch instead of once per record.
//
// A turn is (agent, session id, lane column, request id): an empty lane is
// lane "main". Every record of a turn that changes nothing is left out: a
// snapshot or usage after the turn's first one (a retry), a classification
// after a final one, a pending classification after any. What is left is
// merged into MergedTurns that hold at most one record of each kind; a store
// applies a merged turn's records in the canonical order (snapshot, usage,
// classification), the merged turns in the order of turns().
//
// Two orders:
// - kCanonical: one merged turn per turn, holding its first snapshot, its
//   first usage and its first final classification, else its first pending
//   one. Applied in the canonical order whatever the batch's order.
// - kAsWritten: the merged turns give the same row as applying every record
//   one after the other in the batch's order (the SQLite store's upserts):
//   a record joins its turn's last merged turn only where the canonical
//   order keeps its effect — a usage after no classification, a
//   classification after none, a final verdict replacing a pending one
//   whose expected drop it repeats (or that has none) —, else it starts the
//   turn's next merged turn. The batches the ingest pipeline writes
//   (snapshot, usage, classification) give one merged turn per turn.
//
// Not thread-safe; one merger per batch. The records added must outlive
// the merger (merged turns point into them).
#ifndef CACHEWATCH_DAEMON_STORE_TURN_MERGE_H_
#define CACHEWATCH_DAEMON_STORE_TURN_MERGE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/core/turn.h"
#include "daemon/store/record.h"

namespace cachewatch {

// A turn's records to apply together; null: none of that kind.
struct MergedTurn {
  const LaneKey* key = nullptr;
  const std::string* request_id = nullptr;
  const SnapshotWrite* snapshot = nullptr;
  const UsageWrite* usage = nullptr;
  const ClassificationWrite* classification = nullptr;
};

class TurnMerger {
 public:
  enum class Order { kCanonical, kAsWritten };

  explicit TurnMerger(Order order) : order_(order) {}

  // Adds the batch's next record. Returns the index in turns() of the
  // merged turn that holds it now, or nullopt when the record changes
  // nothing (see the header comment).
  std::optional<size_t> Add(const StoreWrite& write);
  std::optional<size_t> Add(const SnapshotWrite& write);
  std::optional<size_t> Add(const UsageWrite& write);
  std::optional<size_t> Add(const ClassificationWrite& write);

  // In the order they are to be applied: a turn's merged turns in order,
  // turns in the order of their first record.
  const std::vector<MergedTurn>& turns() const { return turns_; }

 private:
  // What a turn's records so far hold.
  struct TurnState {
    size_t last = 0;  // Its last merged turn, in turns_.
    bool snapshot = false;
    bool usage = false;
    bool classification = false;
    bool final_verdict = false;
  };

  // The turn's state; `added` says whether the turn is new (no merged turn
  // yet: the caller starts one).
  TurnState& StateOf(const LaneKey& key, const std::string& request_id,
                     bool& added);
  // Starts the turn's next merged turn; returns its index.
  size_t Start(TurnState& state, const LaneKey& key,
               const std::string& request_id);

  const Order order_;
  std::vector<MergedTurn> turns_;
  std::unordered_map<std::string, TurnState> states_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_TURN_MERGE_H_
