#include "cli/tests/cli_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cachewatch::cli::testing {
namespace {

pid_t Spawn(const std::string& binary, const std::vector<std::string>& args,
            int out_fd, int err_fd) {
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
    for (const std::string& arg : args) {
      argv.push_back(const_cast<char*>(arg.c_str()));
    }
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return pid;
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
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) return {};
  const pid_t pid = Spawn(binary, args, out_pipe[1], err_pipe[1]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  ProcessResult result;
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
  if (pipe(out_pipe) != 0) return;
  const int null_fd = open("/dev/null", O_WRONLY);
  pid_ = Spawn(binary, args, out_pipe[1], null_fd);
  close(out_pipe[1]);
  close(null_fd);
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
