#include "tests/support/daemon_process.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/spawn.h"

#ifndef CACHEWATCHD_PATH
#error "CACHEWATCHD_PATH must name the cachewatchd binary"
#endif

namespace cachewatch::testing {

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) Kill();
  if (log_reader_.joinable()) log_reader_.join();
}

bool DaemonProcess::Spawn(const std::string& db_path,
                          const std::vector<std::string>& extra_flags) {
  int pipe_fds[2];
  if (!MakePipe(pipe_fds)) return false;
  if (log_reader_.joinable()) log_reader_.join();
  {
    std::lock_guard<std::mutex> lock(logs_mutex_);
    logs_.clear();
  }
  const char* binary = std::getenv("CACHEWATCHD");
  std::vector<std::string> args = {
      binary != nullptr && *binary != '\0' ? binary : CACHEWATCHD_PATH,
      "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0",
      "--db-path=" + db_path};
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());
  SpawnOptions options;
  options.stderr_fd = pipe_fds[1];
  pid_ = SpawnProcess(args, options);
  if (pid_ < 0) {
    ADD_FAILURE() << "cannot start " << args[0] << ": " << std::strerror(errno);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return false;
  }
  close(pipe_fds[1]);
  stderr_fd_ = pipe_fds[0];
  log_reader_ = std::thread([this] {
    char buffer[4096];
    for (ssize_t n; (n = read(stderr_fd_, buffer, sizeof(buffer))) > 0;) {
      std::lock_guard<std::mutex> lock(logs_mutex_);
      logs_.append(buffer, n);
    }
  });
  return true;
}

bool DaemonProcess::Start(const std::string& db_path,
                          const std::vector<std::string>& extra_flags) {
  if (!Spawn(db_path, extra_flags)) return false;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::istringstream lines(Logs());
    for (std::string line; std::getline(lines, line);) {
      const nlohmann::json entry = nlohmann::json::parse(line, nullptr, false);
      if (entry.is_object() && entry.value("msg", "") == "listening") {
        grpc_address_ = entry.value("grpc", "");
        metrics_address_ = entry.value("metrics", "");
        return true;
      }
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      ADD_FAILURE() << "cachewatchd exited at start:\n" << Logs();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "cachewatchd did not start:\n" << Logs();
  return false;
}

int DaemonProcess::StartExpectingExit(
    const std::string& db_path, const std::vector<std::string>& extra_flags) {
  if (!Spawn(db_path, extra_flags)) return -1;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      if (log_reader_.joinable()) log_reader_.join();
      close(stderr_fd_);
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      ADD_FAILURE() << "cachewatchd was killed by signal " << WTERMSIG(status)
                    << ":\n"
                    << Logs();
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "cachewatchd did not exit:\n" << Logs();
  Kill();
  return -1;
}

int DaemonProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  if (log_reader_.joinable()) log_reader_.join();
  close(stderr_fd_);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool DaemonProcess::Suspend() {
  if (pid_ <= 0) {
    ADD_FAILURE() << "cannot stop cachewatchd: it is not running";
    return false;
  }
  int status = 0;
  if (kill(pid_, SIGSTOP) != 0 || waitpid(pid_, &status, WUNTRACED) != pid_) {
    ADD_FAILURE() << "cannot stop cachewatchd " << pid_ << ": "
                  << std::strerror(errno);
    return false;
  }
  if (!WIFSTOPPED(status)) {
    // errno says nothing here: the daemon ended before the signal reached it.
    if (WIFEXITED(status)) {
      ADD_FAILURE() << "cachewatchd " << pid_ << " exited with status "
                    << WEXITSTATUS(status) << " instead of stopping";
    } else {
      ADD_FAILURE() << "cachewatchd " << pid_ << " was killed by signal "
                    << WTERMSIG(status) << " instead of stopping";
    }
    return false;
  }
  return true;
}

void DaemonProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  if (log_reader_.joinable()) log_reader_.join();
  close(stderr_fd_);
}

std::string DaemonProcess::Logs() {
  std::lock_guard<std::mutex> lock(logs_mutex_);
  return logs_;
}

std::unique_ptr<v1::CacheWatch::Stub> DaemonProcess::NewStub() const {
  return v1::CacheWatch::NewStub(
      grpc::CreateChannel(grpc_address_, grpc::InsecureChannelCredentials()));
}

std::string HttpGet(const std::string& address, const std::string& path) {
  const size_t colon = address.rfind(':');
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(std::stoi(address.substr(colon + 1)));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &target.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + address +
                              "\r\nConnection: close\r\n\r\n";
  if (write(fd, request.data(), request.size()) < 0) {
    close(fd);
    return "";
  }
  std::string response;
  char buffer[8192];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) {
    response.append(buffer, n);
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

double MetricValue(const std::string& metrics_text,
                   const std::vector<std::string>& fragments) {
  std::istringstream lines(metrics_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    bool all = true;
    for (const std::string& fragment : fragments) {
      all = all && line.find(fragment) != std::string::npos;
    }
    if (all) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

int64_t ProcessStatusKiB(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with(field + ":")) {
      return std::stoll(line.substr(field.size() + 1));
    }
  }
  return -1;
}

}  // namespace cachewatch::testing
