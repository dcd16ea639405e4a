#include "cli/tests/cli_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tests/support/spawn.h"

namespace cachewatch::cli::testing {
namespace {

// `binary` with `args`, its output to `out_fd` and its errors to `err_fd`.
pid_t Spawn(const std::string& binary, const std::vector<std::string>& args,
            int out_fd, int err_fd) {
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  cachewatch::testing::SpawnOptions options;
  options.stdout_fd = out_fd;
  options.stderr_fd = err_fd;
  return cachewatch::testing::SpawnProcess(argv, options);
}

// Appends what `fd` has to `out`; false at end of file.
bool Drain(int fd, std::string& out) {
  char buffer[4096];
  const ssize_t n = read(fd, buffer, sizeof(buffer));
  if (n <= 0) return false;
  out.append(buffer, n);
  return true;
}

}  // namespace

ProcessResult RunProcess(const std::string& binary,
                         const std::vector<std::string>& args,
                         std::chrono::seconds timeout) {
  int out_pipe[2];
  int err_pipe[2];
  if (!cachewatch::testing::MakePipe(out_pipe)) return {};
  if (!cachewatch::testing::MakePipe(err_pipe)) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return {};
  }
  const pid_t pid = Spawn(binary, args, out_pipe[1], err_pipe[1]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  ProcessResult result;
  if (pid < 0) {
    result.err = "cannot start " + binary + ": " + std::strerror(errno);
    close(out_pipe[0]);
    close(err_pipe[0]);
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0 && std::chrono::steady_clock::now() < deadline) {
    if (poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP))) {
        if (!Drain(fds[i].fd, i == 0 ? result.out : result.err)) {
          close(fds[i].fd);
          fds[i].fd = -1;
          --open_fds;
        }
      }
    }
  }
  for (const pollfd& fd : fds) {
    if (fd.fd >= 0) close(fd.fd);
  }
  if (open_fds > 0) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (open_fds == 0 && WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  return result;
}

BackgroundProcess::BackgroundProcess(const std::string& binary,
                                     const std::vector<std::string>& args) {
  int out_pipe[2];
  if (!cachewatch::testing::MakePipe(out_pipe)) return;
  pid_ = Spawn(binary, args, out_pipe[1], cachewatch::testing::kDevNullFd);
  close(out_pipe[1]);
  if (pid_ < 0) {
    close(out_pipe[0]);
    return;
  }
  out_fd_ = out_pipe[0];
}

BackgroundProcess::~BackgroundProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

std::string BackgroundProcess::WaitForOutput(const std::string& text,
                                             std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out_.find(text) == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    pollfd fd = {out_fd_, POLLIN, 0};
    if (poll(&fd, 1, 100) > 0 && !Drain(out_fd_, out_)) break;
  }
  return out_;
}

}  // namespace cachewatch::cli::testing
