// A fresh directory under the system's temporary directory, removed with
// everything in it when the TempDir is destroyed: for tests and benchmarks.
// If the directory cannot be made, the process stops with a message naming
// the pattern (a test without its directory would only fail later, less
// clearly).
//
// Not thread-safe to destroy while another thread uses the directory.
#ifndef CACHEWATCH_DAEMON_UTIL_TEMP_DIR_H_
#define CACHEWATCH_DAEMON_UTIL_TEMP_DIR_H_

#include <string>

namespace cachewatch {

class TempDir {
 public:
  // `prefix` starts the directory's name.
  explicit TempDir(const std::string& prefix = "cachewatch-test");
  ~TempDir();

  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` inside the directory.
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_UTIL_TEMP_DIR_H_
