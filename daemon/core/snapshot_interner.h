// Interns the part of a lane's baseline snapshot that lanes of one kind of
// agent share: the provider, model, system prompt (hash and sections), the
// cache_control layout, the request options hash, the expected drop and the
// tool-order policy. Snapshots with equal such parts share one immutable
// copy, so that an idle lane holds a pointer to it instead of a protobuf of
// its own (the daemon's memory per idle lane, docs/PERFORMANCE.md). The
// per-lane rest of a baseline (its message chain) is kept by the lane (Turn).
//
// A copy lives as long as some holder keeps its pointer; the interner holds
// only weak references, and Sweep() forgets the dead ones.
//
// Not thread-safe: callers serialize access (each lane tracker shard owns
// one).
#ifndef CACHEWATCH_DAEMON_CORE_SNAPSHOT_INTERNER_H_
#define CACHEWATCH_DAEMON_CORE_SNAPSHOT_INTERNER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>

#include "cachewatch/v1/snapshot.pb.h"

namespace cachewatch {

class SnapshotInterner {
 public:
  SnapshotInterner() = default;
  SnapshotInterner(const SnapshotInterner&) = delete;
  SnapshotInterner& operator=(const SnapshotInterner&) = delete;

  // The shared copy of `snapshot`'s shared part (the fields listed above;
  // no lane key, request id, request time, tools or message chain): the one
  // already interned when an equal part is alive, else a new copy.
  std::shared_ptr<const v1::Snapshot> Intern(const v1::Snapshot& snapshot);
  // The same, given a copy this interner returned before (`known`, may be
  // null) whose part the caller expects `snapshot`'s to equal (a lane's
  // previous baseline): returned without copying or serializing the part
  // when equal.
  std::shared_ptr<const v1::Snapshot> Intern(
      const v1::Snapshot& snapshot,
      const std::shared_ptr<const v1::Snapshot>& known);

  // Forgets copies no holder keeps any more.
  void Sweep();

  // Distinct copies interned and still alive (as of the last Sweep()).
  size_t size() const { return parts_.size(); }

 private:
  // The shared part's deterministic serialization -> its copy.
  std::unordered_map<std::string, std::weak_ptr<const v1::Snapshot>> parts_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CORE_SNAPSHOT_INTERNER_H_
