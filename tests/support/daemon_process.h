// Test support: runs the real cachewatchd binary as a child process on
// loopback ports it picks itself (port 0), with its database in a fresh
// temporary directory, and learns the ports from its "listening" log line.
// The binary is the one built with the tests, or $CACHEWATCHD when set (e.g.
// an uninstrumented daemon driven by a sanitizer build's tests).
//
// Not thread-safe; one test thread drives it.
#ifndef CACHEWATCH_TESTS_SUPPORT_DAEMON_PROCESS_H_
#define CACHEWATCH_TESTS_SUPPORT_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cachewatch/v1/service.grpc.pb.h"
#include "daemon/util/temp_dir.h"

namespace cachewatch::testing {

using ::cachewatch::TempDir;  // daemon/util/temp_dir.h

class DaemonProcess {
 public:
  // Starts cachewatchd with `db_path` and the extra flags; waits until it
  // serves (fails the test and returns false otherwise).
  DaemonProcess() = default;
  ~DaemonProcess();
  bool Start(const std::string& db_path,
             const std::vector<std::string>& extra_flags = {});
  // Starts cachewatchd as Start() does, expecting it to exit without serving
  // (a bad flag, a database in use); waits for that and returns its exit
  // status, its logs in Logs(). Fails the test and returns -1 when it is
  // killed by a signal or still runs after 30 s (it is then killed).
  int StartExpectingExit(const std::string& db_path,
                         const std::vector<std::string>& extra_flags = {});
  // SIGTERM and wait; returns the exit status (-1 if it did not exit).
  int Stop();
  // SIGKILL and wait.
  void Kill();
  // SIGSTOP, and waits until every thread of the daemon has stopped: kill()
  // returns before that, and until a thread of it next enters the kernel the
  // others go on serving. Returns false (and fails the test) otherwise.
  bool Suspend();

  pid_t pid() const { return pid_; }
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& metrics_address() const { return metrics_address_; }
  std::string Logs();
  std::unique_ptr<v1::CacheWatch::Stub> NewStub() const;

 private:
  // Starts the binary with its stderr read into logs_; false (the test
  // failed) when it cannot.
  bool Spawn(const std::string& db_path,
             const std::vector<std::string>& extra_flags);

  pid_t pid_ = -1;
  int stderr_fd_ = -1;
  std::thread log_reader_;
  std::mutex logs_mutex_;
  std::string logs_;  // Guarded by logs_mutex_.
  std::string grpc_address_;
  std::string metrics_address_;
};

// GET http://address/path over a plain socket; returns the body, or "" on
// failure.
std::string HttpGet(const std::string& address, const std::string& path);

// A "Vm..." field of /proc/<pid>/status in KiB, e.g. "VmHWM" (peak resident
// set) or "VmRSS"; -1 when the process or the field does not exist.
int64_t ProcessStatusKiB(pid_t pid, const std::string& field);

// The value of the first sample line of `metrics_text` whose name and labels
// contain every fragment, e.g. {"cachewatch_breaks_total{",
// "reason=\"tools_order_changed\""}; -1 when none matches.
double MetricValue(const std::string& metrics_text,
                   const std::vector<std::string>& fragments);

}  // namespace cachewatch::testing

#endif  // CACHEWATCH_TESTS_SUPPORT_DAEMON_PROCESS_H_
