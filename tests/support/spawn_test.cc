// SpawnProcess: the child's output and errors go where asked, it runs in the
// directory asked, it inherits none of the parent's close-on-exec pipes,
// and children are started and reaped while other threads allocate.
#include "tests/support/spawn.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace cachewatch::testing {
namespace {

// Reads `fd` to its end and closes it.
std::string ReadAll(int fd) {
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) {
    out.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// The exit code of `pid`, -1 when it did not exit normally.
int Wait(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs `script` in /bin/sh with `options`, its output read through a pipe.
struct ShellRun {
  int exit_code = -1;
  std::string out;
};
ShellRun RunShell(const std::string& script, SpawnOptions options = {}) {
  int out[2];
  EXPECT_TRUE(MakePipe(out));
  options.stdout_fd = out[1];
  const pid_t pid = SpawnProcess({"/bin/sh", "-c", script}, options);
  close(out[1]);
  EXPECT_GT(pid, 0);
  ShellRun run;
  run.out = ReadAll(out[0]);
  if (pid > 0) run.exit_code = Wait(pid);
  return run;
}

TEST(SpawnTest, OutputAndErrorsGoWhereAsked) {
  int err[2];
  ASSERT_TRUE(MakePipe(err));
  SpawnOptions options;
  options.stderr_fd = err[1];
  const ShellRun run = RunShell("echo out; echo err >&2; exit 3", options);
  close(err[1]);
  EXPECT_EQ(run.out, "out\n");
  EXPECT_EQ(ReadAll(err[0]), "err\n");
  EXPECT_EQ(run.exit_code, 3);
}

TEST(SpawnTest, DevNullSwallowsTheOutput) {
  int err[2];
  ASSERT_TRUE(MakePipe(err));
  SpawnOptions options;
  options.stdout_fd = kDevNullFd;
  options.stderr_fd = err[1];
  const pid_t pid = SpawnProcess(
      {"/bin/sh", "-c",
       "echo hidden; out=$(readlink /proc/$$/fd/1); echo $out >&2"},
      options);
  close(err[1]);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(ReadAll(err[0]), "/dev/null\n");
  EXPECT_EQ(Wait(pid), 0);
}

TEST(SpawnTest, RunsInTheWorkingDirectoryAsked) {
  const std::filesystem::path dir =
      std::filesystem::canonical(std::filesystem::temp_directory_path());
  SpawnOptions options;
  options.working_directory = dir.string();
  EXPECT_EQ(RunShell("pwd -P", options).out, dir.string() + "\n");
}

TEST(SpawnTest, TheParentsPipesAreNotInherited) {
  int other[2];
  ASSERT_TRUE(MakePipe(other));
  const ShellRun run = RunShell(
      "for fd in " + std::to_string(other[0]) + " " + std::to_string(other[1]) +
      "; do [ -e /proc/self/fd/$fd ] && echo $fd; done; true");
  close(other[0]);
  close(other[1]);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.exit_code, 0);
}

TEST(SpawnTest, AMissingBinaryIsAnError) {
  errno = 0;
  EXPECT_EQ(SpawnProcess({"/nonexistent/cachewatch-binary"}), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(SpawnProcess({}), -1);
  EXPECT_EQ(errno, EINVAL);
}

// The situation the old fork() + allocate pattern was exposed in. It is not
// a reproduction of that hang (the old pattern did not hang here in 2,000
// forks under ASan): it checks that every child started meanwhile runs and
// reports its own output.
TEST(SpawnTest, ChildrenStartWhileOtherThreadsAllocate) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> allocators;
  for (int t = 0; t < 3; ++t) {
    allocators.emplace_back([&stop] {
      while (!stop.load()) {
        std::vector<std::unique_ptr<std::string>> strings;
        for (int i = 0; i < 64; ++i) {
          strings.push_back(std::make_unique<std::string>(100 + i, 'x'));
        }
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(RunShell("echo " + std::to_string(i)).out,
              std::to_string(i) + "\n");
  }
  stop = true;
  for (std::thread& thread : allocators) thread.join();
}

}  // namespace
}  // namespace cachewatch::testing
