// FileLock: an exclusive advisory lock (flock(2)) on a file, so that one
// process at a time does something, e.g. one cachewatchd writes a SQLite
// database. The lock is held while the object lives and released when it is
// destroyed or its process ends, however it ends (a crash or SIGKILL
// leaves the file, not the lock). The file is created when missing (mode
// 0600) and holds the holder's pid, which the next process to try is told.
//
// Advisory: it excludes only those who take it. Locks of one file taken
// twice in one process exclude each other too (each has its own open file
// description).
//
// Thread-compatible: a FileLock is one owner's.
#ifndef CACHEWATCH_DAEMON_UTIL_FILE_LOCK_H_
#define CACHEWATCH_DAEMON_UTIL_FILE_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace cachewatch {

class FileLock {
 public:
  // Takes the lock of `path` without waiting. FailedPrecondition when
  // another holds it, naming `path` and the holder's pid when the file has
  // one; PermissionDenied or Unavailable when the file cannot be created or
  // opened (errno's message). Every message names `path`.
  static absl::StatusOr<FileLock> Acquire(const std::string& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  // Releases the lock; the file stays.
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}

  int fd_ = -1;  // -1 once moved from.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_UTIL_FILE_LOCK_H_
