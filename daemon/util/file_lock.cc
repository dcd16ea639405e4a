#include "daemon/util/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/util/file.h"

namespace cachewatch {
namespace {

absl::Status OpenError(const std::string& path, int error) {
  const std::string message = absl::StrCat("cannot open the lock file ", path,
                                           ": ", std::strerror(error));
  if (error == EACCES || error == EPERM || error == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  return absl::UnavailableError(message);
}

// The pid the holder wrote, or 0 when the file has none (yet).
int64_t HolderPid(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  int64_t pid = 0;
  if (!text.ok() ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid)) {
    return 0;
  }
  return pid;
}

}  // namespace

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return OpenError(path, errno);
  FileLock lock(fd);  // Closes `fd` on every return below but the last.
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    if (errno != EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrCat("cannot lock ", path, ": ", std::strerror(errno)));
    }
    const int64_t pid = HolderPid(path);
    return absl::FailedPreconditionError(
        pid > 0 ? absl::StrCat(path, " is locked by process ", pid)
                : absl::StrCat(path, " is locked by another process"));
  }
  // The pid is for the message above only; failing to write it costs that.
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] const ssize_t written =
        ::pwrite(fd, pid.data(), pid.size(), 0);
  }
  return lock;
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // Releases the lock.
}

}  // namespace cachewatch
