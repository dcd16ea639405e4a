// Test support: starts a child process from a test that has threads
// running (gRPC's, a store's writers, a daemon's log reader).
//
// A plain fork() copies only the calling thread; a lock another thread held
// at that moment (malloc's, ASan's allocator's) stays held in the child
// forever, so a child that allocates before execv can hang, and the test
// with it. SpawnProcess uses posix_spawn, which runs nothing of ours in the
// child, and the descriptors it makes are close-on-exec, so that a child
// started by another thread never inherits them.
//
// Thread-safe.
#ifndef CACHEWATCH_TESTS_SUPPORT_SPAWN_H_
#define CACHEWATCH_TESTS_SUPPORT_SPAWN_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace cachewatch::testing {

// Where a child's standard output or error goes: where the parent's goes
// (kInheritFd), to /dev/null (kDevNullFd), or to a descriptor of the
// parent's (>= 0, e.g. the write end of a pipe from MakePipe).
inline constexpr int kInheritFd = -1;
inline constexpr int kDevNullFd = -2;

struct SpawnOptions {
  int stdout_fd = kInheritFd;
  int stderr_fd = kInheritFd;
  std::string working_directory;  // Empty: the parent's.
};

// Starts argv[0], a path, with `argv` and the parent's environment. The
// child's pid, or -1 (with errno set) when it could not be started, e.g.
// argv[0] is not an executable.
pid_t SpawnProcess(const std::vector<std::string>& argv,
                   const SpawnOptions& options = {});

// pipe() with both ends close-on-exec; false (errno set) on failure.
bool MakePipe(int fds[2]);

}  // namespace cachewatch::testing

#endif  // CACHEWATCH_TESTS_SUPPORT_SPAWN_H_
