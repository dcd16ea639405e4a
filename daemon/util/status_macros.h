// RETURN_IF_ERROR and ASSIGN_OR_RETURN for every module of the project
// (Debian's abseil has no status macros).
#ifndef CACHEWATCH_DAEMON_UTIL_STATUS_MACROS_H_
#define CACHEWATCH_DAEMON_UTIL_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr`, an absl::Status, and returns it from the enclosing
// function unless it is OK.
#define CACHEWATCH_RETURN_IF_ERROR(expr)                \
  do {                                                  \
    if (absl::Status status_ = (expr); !status_.ok()) { \
      return status_;                                   \
    }                                                   \
  } while (false)

#define CACHEWATCH_STATUS_MACROS_CONCAT_INNER_(a, b) a##b
#define CACHEWATCH_STATUS_MACROS_CONCAT_(a, b) \
  CACHEWATCH_STATUS_MACROS_CONCAT_INNER_(a, b)

// Evaluates `expr`, an absl::StatusOr<T>; returns its status from the
// enclosing function unless it is OK, else moves its value into `lhs` (a
// declaration, `auto x` or `const T x`, or an existing variable). One use per
// line.
#define CACHEWATCH_ASSIGN_OR_RETURN(lhs, expr) \
  CACHEWATCH_ASSIGN_OR_RETURN_IMPL_(           \
      CACHEWATCH_STATUS_MACROS_CONCAT_(status_or_value_, __LINE__), lhs, expr)

#define CACHEWATCH_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                      \
  if (!statusor.ok()) return std::move(statusor).status();     \
  lhs = *std::move(statusor)

#endif  // CACHEWATCH_DAEMON_UTIL_STATUS_MACROS_H_
