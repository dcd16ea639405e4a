#include "daemon/util/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cachewatch {
namespace {

absl::Status ReadError(const std::string& path, int error) {
  const std::string message =
      absl::StrCat("cannot read ", path, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::UnavailableError(message);
  }
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ReadError(path, errno);
  std::string text;
  std::array<char, 65536> buffer;
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;  // E.g. EISDIR for a directory.
      ::close(fd);
      return ReadError(path, error);
    }
    text.append(buffer.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace cachewatch
