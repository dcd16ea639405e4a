// Reading a whole file (a TLS certificate or key, a token file, a
// transcript) with errors that name it.
//
// Thread-safe.
#ifndef CACHEWATCH_DAEMON_UTIL_FILE_H_
#define CACHEWATCH_DAEMON_UTIL_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace cachewatch {

// The contents of the file at `path`. NotFound when it does not exist,
// PermissionDenied when it cannot be read for lack of permission, otherwise
// Unavailable for any other failure to open or read it; each message names
// `path`. An empty file gives an empty string.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_UTIL_FILE_H_
