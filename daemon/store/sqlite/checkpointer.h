// Moves the WAL's pages into the database file on a thread of its own, so
// that no commit waits for it. SQLite's automatic checkpoint runs inside the
// COMMIT that takes the WAL past its threshold, on the committing thread:
// with group commit, every record of that batch and of the batches queued
// behind it waited for the checkpoint's writes and fsync (the tail of the
// ack latency, docs/PERFORMANCE.md).
//
// The write connection reports the WAL's size after each commit
// (Database::HandOffCheckpoints); once the WAL has grown by
// `threshold_pages` since the last checkpoint was asked for (from empty: once
// it holds that many), the checkpointer runs a PASSIVE checkpoint on its own
// connection, which never blocks writers or readers. Under a steady stream
// of commits a PASSIVE checkpoint never leaves the WAL empty (commits append
// while it runs), so the WAL keeps its size past the threshold; asking again
// after every such commit ran a checkpoint, with two fsyncs, per commit
// (~100 a second under 4 unary clients, docs/PERFORMANCE.md round 8a).
// Frames a checkpoint could not copy (a reader still on old pages, writers
// appending meanwhile) are copied by the next one, after `threshold_pages`
// more; the commit's own fallback (Database::HandOffCheckpoints) bounds the
// WAL and, by emptying it, lets SQLite restart it from its beginning.
//
// Thread-safe: WalGrew() may be called from any thread and never blocks on a
// checkpoint.
#ifndef CACHEWATCH_DAEMON_STORE_SQLITE_CHECKPOINTER_H_
#define CACHEWATCH_DAEMON_STORE_SQLITE_CHECKPOINTER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "daemon/store/sqlite/sqlite_handle.h"

namespace cachewatch {

struct CheckpointerStats {
  // Run on the checkpointer's connection. One that fails (an I/O error)
  // leaves the WAL for the next; the commits themselves report such errors.
  int64_t checkpoints = 0;
};

class Checkpointer {
 public:
  // Opens its own connection to the existing database at `path` and starts
  // its thread.
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Open(
      const std::string& path, int threshold_pages);

  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Stops the thread (after a checkpoint in progress) and closes.
  ~Checkpointer();

  // The WAL now holds `wal_pages` pages: asks for a checkpoint when it grew
  // by the threshold since the last one was asked for (fewer pages than then:
  // the WAL was restarted, and counts from empty). Returns whether it asked.
  bool WalGrew(int wal_pages);

  CheckpointerStats stats() const;

 private:
  Checkpointer(Database db, int threshold_pages);
  void Run();

  const int threshold_pages_;
  Database db_;  // Used by the thread only.

  mutable std::mutex mu_;
  std::condition_variable wanted_changed_;
  bool wanted_ = false;  // Guarded by mu_.
  // The WAL's pages when the last checkpoint was asked for.
  int asked_at_pages_ = 0;   // Guarded by mu_.
  bool closing_ = false;     // Guarded by mu_.
  CheckpointerStats stats_;  // Guarded by mu_.

  std::thread thread_;  // Last: starts once everything above exists.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_SQLITE_CHECKPOINTER_H_
