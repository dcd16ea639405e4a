// RETURN_IF_ERROR for the store's own code (Debian's abseil has no status
// macros).
#ifndef CACHEWATCH_DAEMON_STORE_STATUS_MACROS_H_
#define CACHEWATCH_DAEMON_STORE_STATUS_MACROS_H_

#include "absl/status/status.h"

// Evaluates `expr`, an absl::Status, and returns it from the enclosing
// function unless it is OK.
#define CACHEWATCH_RETURN_IF_ERROR(expr)                \
  do {                                                  \
    if (absl::Status status_ = (expr); !status_.ok()) { \
      return status_;                                   \
    }                                                   \
  } while (false)

#endif  // CACHEWATCH_DAEMON_STORE_STATUS_MACROS_H_
