#include "tests/support/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

extern char** environ;

namespace cachewatch::testing {
namespace {

// Adds to `actions` what makes `fd` the child's `target` descriptor.
int Redirect(posix_spawn_file_actions_t* actions, int fd, int target) {
  if (fd == kInheritFd) return 0;
  if (fd == kDevNullFd) {
    return posix_spawn_file_actions_addopen(actions, target, "/dev/null",
                                            O_WRONLY, 0);
  }
  return posix_spawn_file_actions_adddup2(actions, fd, target);
}

}  // namespace

pid_t SpawnProcess(const std::vector<std::string>& argv,
                   const SpawnOptions& options) {
  if (argv.empty()) {
    errno = EINVAL;
    return -1;
  }
  std::vector<char*> args;
  for (const std::string& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  int error = posix_spawn_file_actions_init(&actions);
  if (error != 0) {
    errno = error;
    return -1;
  }
  error = Redirect(&actions, options.stdout_fd, STDOUT_FILENO);
  if (error == 0) error = Redirect(&actions, options.stderr_fd, STDERR_FILENO);
  if (error == 0 && !options.working_directory.empty()) {
    error = posix_spawn_file_actions_addchdir_np(
        &actions, options.working_directory.c_str());
  }
  pid_t pid = -1;
  if (error == 0) {
    error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  }
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    errno = error;
    return -1;
  }
  return pid;
}

bool MakePipe(int fds[2]) { return pipe2(fds, O_CLOEXEC) == 0; }

}  // namespace cachewatch::testing
