// Test support: runs the cachewatch binary as a child process and collects
// its output.
//
// Not thread-safe; one test thread drives it.
#ifndef CACHEWATCH_CLI_TESTS_CLI_PROCESS_H_
#define CACHEWATCH_CLI_TESTS_CLI_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace cachewatch::cli::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed or timed out.
  std::string out;
  std::string err;
};

// Runs `binary` with `args` and waits at most `timeout` for it to exit.
ProcessResult RunProcess(
    const std::string& binary, const std::vector<std::string>& args,
    std::chrono::seconds timeout = std::chrono::seconds(20));

// A process left running while the test does other things (e.g. `tail`).
class BackgroundProcess {
 public:
  BackgroundProcess(const std::string& binary,
                    const std::vector<std::string>& args);
  ~BackgroundProcess();  // Kills the process if still running.

  // Reads stdout until it contains `text` or `timeout` passes; returns all
  // of stdout read so far.
  std::string WaitForOutput(const std::string& text,
                            std::chrono::seconds timeout);

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string out_;
};

}  // namespace cachewatch::cli::testing

#endif  // CACHEWATCH_CLI_TESTS_CLI_PROCESS_H_
