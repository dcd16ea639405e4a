// Snapshot messages reused across records, so that decoding a stream's
// snapshots does not allocate (and later free) every tool, string and
// section of each one anew: a cleared protobuf message keeps its repeated
// fields' elements and its strings' capacity, and the next parse into it
// reuses them (docs/PERFORMANCE.md, round 8b).
//
// Acquire() hands out a cleared Snapshot owned by the returned pointer and
// its copies; when the last copy goes, the message is cleared and kept for a
// later Acquire(), unless kMaxIdle are kept already or it is larger than a
// kept message may be (kMaxKeptTools tools), in which case it is deleted.
// The pointers may outlive the pool (they keep what they need alive).
//
// Thread-safe: Acquire() and the release of a pointer may run on any thread.
#ifndef CACHEWATCH_DAEMON_RECEIVER_GRPC_SNAPSHOT_POOL_H_
#define CACHEWATCH_DAEMON_RECEIVER_GRPC_SNAPSHOT_POOL_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "cachewatch/v1/snapshot.pb.h"

namespace cachewatch {

class SnapshotPool {
 public:
  // At most this many cleared messages are kept.
  static constexpr size_t kMaxIdle = 512;
  // A message that held more tools than this is not kept (it would keep
  // their memory).
  static constexpr int kMaxKeptTools = 128;

  SnapshotPool();
  SnapshotPool(const SnapshotPool&) = delete;
  SnapshotPool& operator=(const SnapshotPool&) = delete;

  // A cleared snapshot (see the file comment).
  std::shared_ptr<v1::Snapshot> Acquire();

  // Cleared messages kept now.
  size_t idle() const;

 private:
  struct Idle {
    mutable std::mutex mutex;
    std::vector<std::unique_ptr<v1::Snapshot>> messages;  // Guarded by mutex.
  };
  // Shared with every pointer handed out, which returns its message here.
  const std::shared_ptr<Idle> idle_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_GRPC_SNAPSHOT_POOL_H_
