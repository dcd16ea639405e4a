#include "tests/support/postgres_process.h"

#include <netinet/in.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "tests/support/spawn.h"

namespace cachewatch::testing {
namespace {

constexpr const char* kUser = "cachewatch-test";

bool RunningAsRoot() { return geteuid() == 0; }

// Creates the unprivileged user the server runs as when we are root.
bool EnsureUser(uid_t* uid, gid_t* gid) {
  passwd* pw = getpwnam(kUser);
  if (pw == nullptr) {
    const std::string command = std::string(
                                    "useradd --system --no-create-home --shell "
                                    "/usr/sbin/nologin ") +
                                kUser + " >/dev/null 2>&1";
    if (std::system(command.c_str()) != 0) {
      // Another test binary may have created it meanwhile.
      pw = getpwnam(kUser);
      if (pw == nullptr) {
        std::cerr << "postgres_process: cannot create user " << kUser << "\n";
        return false;
      }
    }
    pw = getpwnam(kUser);
    if (pw == nullptr) return false;
  }
  *uid = pw->pw_uid;
  *gid = pw->pw_gid;
  return true;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace

std::string PostgresProcess::BinDir() {
  const char* env = std::getenv("CACHEWATCH_PG_BINDIR");
  const std::string dir = env != nullptr ? env : "/usr/lib/postgresql/15/bin";
  for (const char* binary : {"initdb", "pg_ctl", "postgres", "psql"}) {
    if (access((dir + "/" + binary).c_str(), X_OK) != 0) return "";
  }
  return dir;
}

std::string PostgresProcess::SkipReason() {
  return "PostgreSQL 15 binaries not found in /usr/lib/postgresql/15/bin (or "
         "$CACHEWATCH_PG_BINDIR): install postgresql-15 "
         "(scripts/install-deps.sh)";
}

int PostgresProcess::Run(const std::string& binary,
                         const std::vector<std::string>& args,
                         std::string* output) const {
  std::vector<std::string> command;
  if (RunningAsRoot()) command = {"/usr/sbin/runuser", "-u", kUser, "--"};
  command.push_back(BinDir() + "/" + binary);
  command.insert(command.end(), args.begin(), args.end());
  int pipe_fds[2] = {-1, -1};
  if (output != nullptr && !MakePipe(pipe_fds)) return -1;
  SpawnOptions options;
  options.stdout_fd = output != nullptr ? pipe_fds[1] : kDevNullFd;
  options.working_directory = dir_;
  const pid_t pid = SpawnProcess(command, options);
  if (pid < 0) {
    if (output != nullptr) {
      close(pipe_fds[0]);
      close(pipe_fds[1]);
    }
    return -1;
  }
  if (output != nullptr) {
    close(pipe_fds[1]);
    char buffer[4096];
    ssize_t n;
    while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) {
      output->append(buffer, static_cast<size_t>(n));
    }
    close(pipe_fds[0]);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::unique_ptr<PostgresProcess> PostgresProcess::Start() {
  if (!Available()) {
    std::cerr << SkipReason() << "\n";
    return nullptr;
  }
  std::unique_ptr<PostgresProcess> server(new PostgresProcess());
  std::string pattern =
      (std::filesystem::temp_directory_path() / "cachewatch_pg.XXXXXX")
          .string();
  if (mkdtemp(pattern.data()) == nullptr) return nullptr;
  server->dir_ = pattern;
  if (RunningAsRoot()) {
    uid_t uid;
    gid_t gid;
    if (!EnsureUser(&uid, &gid) || chown(server->dir_.c_str(), uid, gid) != 0) {
      std::cerr << "postgres_process: cannot hand " << server->dir_ << " to "
                << kUser << "\n";
      return nullptr;
    }
  }
  if (server->Run("initdb", {"-D", server->dir_ + "/data", "-U", "postgres",
                             "--auth=trust", "--encoding=UTF8", "--locale=C",
                             "--no-sync"}) != 0) {
    std::cerr << "postgres_process: initdb failed\n";
    return nullptr;
  }
  server->port_ = FreePort();
  if (!server->Restart()) return nullptr;
  return server;
}

PostgresProcess::~PostgresProcess() {
  if (running_) Stop("immediate");
  if (!dir_.empty() && std::getenv("CACHEWATCH_KEEP_TMP") == nullptr) {
    std::error_code error;
    std::filesystem::remove_all(dir_, error);
  }
}

std::string PostgresProcess::Url(const std::string& database) const {
  return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" +
         database;
}

bool PostgresProcess::CreateDatabase(const std::string& database) {
  std::string output;
  return Run("psql",
             {"-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", Url("postgres"), "-c",
              "CREATE DATABASE \"" + database + "\""},
             &output) == 0;
}

std::string PostgresProcess::Psql(const std::string& database,
                                  const std::string& sql) {
  std::string output;
  if (Run("psql",
          {"-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", Url(database),
           "-c", sql},
          &output) != 0) {
    std::cerr << "psql failed: " << sql << "\n" << output << "\n";
    return "";
  }
  while (!output.empty() && output.back() == '\n') output.pop_back();
  return output;
}

bool PostgresProcess::Stop(const std::string& mode) {
  if (!running_) return true;
  running_ = false;
  return Run("pg_ctl", {"-D", dir_ + "/data", "-m", mode, "-w", "stop"}) == 0;
}

bool PostgresProcess::Restart() {
  std::string options =
      "-p " + std::to_string(port_) +
      " -c listen_addresses=127.0.0.1 -c unix_socket_directories=" + dir_ +
      " -c fsync=off -c full_page_writes=off -c max_connections=200"
      " -c shared_buffers=32MB";
  if (const char* extra = std::getenv("CACHEWATCH_PG_OPTIONS")) {
    options += std::string(" ") + extra;  // E.g. logging, for debugging.
  }
  if (Run("pg_ctl", {"-D", dir_ + "/data", "-l", dir_ + "/server.log", "-o",
                     options, "-w", "-t", "60", "start"}) != 0) {
    std::ifstream log(dir_ + "/server.log");
    std::cerr << "postgres_process: pg_ctl start failed:\n" << log.rdbuf();
    return false;
  }
  running_ = true;
  return true;
}

}  // namespace cachewatch::testing
