// Moves the WAL's pages into the database file on a thread of its own, so
// that commits wait for as little of it as can be, and restarts the WAL
// often enough to bound it.
//
// SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL
// past its threshold, on the committing thread: with group commit, every
// record of that batch and of the batches queued behind it waited for the
// checkpoint's writes and fsyncs (the tail of the ack latency,
// docs/PERFORMANCE.md).
//
// The write connection reports the WAL's size after each commit
// (Database::HandOffCheckpoints, AfterCommit() here); once the WAL has grown
// by `threshold_pages` since the last checkpoint was asked for (from empty:
// once it holds that many), the checkpointer runs a PASSIVE checkpoint on its
// own connection, which never blocks writers or readers, and then flushes
// the database file. Asking again after every commit past the threshold ran
// a checkpoint, with two fsyncs, per commit (~100 a second under 4 unary
// clients, docs/PERFORMANCE.md round 8a).
//
// Under a steady stream of commits a PASSIVE checkpoint never empties the
// WAL (commits append while it runs), and SQLite starts the WAL again from
// its beginning only once a checkpoint has copied all of it. Only a commit
// can do that while commits go on: no other commit runs beside it. So when a
// commit finds the WAL at `restart_pages` or more, and the checkpointer's
// run just before left at most `tail_pages` of it uncopied, that commit
// checkpoints the tail itself: its waits are those of the few pages appended
// since, not of the whole WAL (docs/PERFORMANCE.md round 19). A commit that
// finds `fallback_pages` or more (the checkpointer falling behind) checkpoints
// whatever is left, so the WAL cannot grow without bound.
//
// A commit is told kTail or kFallback only while no run is under way, and no
// run starts before that commit's next call: a run beside the commit's
// checkpoint would make it copy nothing (a third of the tails did, and under
// steady commits nearly every fallback, the WAL growing on past it). So
// after a run, the next run waits for the commit that is to see its figures
// (at most 100 ms), and a commit that checkpoints cancels a run asked for.
//
// Thread-safe: AfterCommit() never blocks on a checkpoint. It is called by
// the one writing connection after each of its commits, so the promise above
// holds until that connection's next call.
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

struct CheckpointerOptions {
  // WAL growth, in pages, that asks for a run (SQLite's automatic checkpoint
  // threshold; ~4 MiB).
  int threshold_pages = 1000;
  // From this many pages (~20 MiB), a commit after a run that left at most
  // `tail_pages` uncopied checkpoints them itself.
  int restart_pages = 5000;
  int tail_pages = 256;
  // From this many pages (~40 MiB), a commit checkpoints whatever is left.
  int fallback_pages = 10000;
};

struct CheckpointerStats {
  // Run on the checkpointer's connection. One that fails (an I/O error)
  // leaves the WAL for the next; the commits themselves report such errors.
  int64_t checkpoints = 0;
  // Run by commits told kTail or kFallback, and of those, the ones that
  // found another checkpoint running and copied nothing.
  int64_t commit_checkpoints = 0;
  int64_t busy_commit_checkpoints = 0;
  // Times a commit found the WAL started again from its beginning.
  int64_t wal_restarts = 0;
};

// What a commit is to do about the WAL it leaves.
enum class CommitCheckpoint {
  kNone,
  kAskedCheckpointer,  // The checkpointer was asked to run.
  kTail,               // Checkpoint the small tail here, so the WAL restarts.
  kFallback,           // Checkpoint here: the WAL reached fallback_pages.
};

class Checkpointer {
 public:
  // Opens its own connection to the existing database at `path` and starts
  // its thread.
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Open(
      const std::string& path, const CheckpointerOptions& options);

  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Stops the thread (after a checkpoint in progress) and closes.
  ~Checkpointer();

  // A commit left `wal_pages` pages in the WAL: asks for a checkpoint when
  // the WAL grew by the threshold since the last one was asked for (fewer
  // pages than then: the WAL was restarted, and counts from empty), or says
  // that the commit is to checkpoint itself (see above).
  CommitCheckpoint AfterCommit(int wal_pages);

  // The commit told kTail or kFallback checkpointed; `busy`: that checkpoint
  // found another running and copied nothing.
  void CommitCheckpointed(bool busy);

  CheckpointerStats stats() const;

 private:
  Checkpointer(Database db, const CheckpointerOptions& options);
  void Run();

  const CheckpointerOptions options_;
  Database db_;  // Used by the thread only.

  mutable std::mutex mu_;
  std::condition_variable wanted_changed_;
  bool wanted_ = false;  // Guarded by mu_.
  // The WAL's pages when the last checkpoint was asked for, and after the
  // last commit.
  int asked_at_pages_ = 0;     // Guarded by mu_.
  int last_commit_pages_ = 0;  // Guarded by mu_.
  // The last run's result, until the next commit has seen it or the next
  // run starts.
  bool ran_ = false;                     // Guarded by mu_.
  bool running_ = false;                 // Guarded by mu_.
  Database::CheckpointResult last_run_;  // Guarded by mu_.
  bool closing_ = false;                 // Guarded by mu_.
  CheckpointerStats stats_;              // Guarded by mu_.

  std::thread thread_;  // Last: starts once everything above exists.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_SQLITE_CHECKPOINTER_H_
