// Bounds the cardinality of one metric label: the first `max_values` distinct
// values are admitted and reported as they are; every later new value is
// reported as "other". An empty value is reported as "unknown", which counts
// as a value like any other. Admission is permanent, so a value is reported
// the same way for the life of the limiter, and at most max_values + 1
// distinct values ("other" included) are ever reported.
//
// Thread-safe: Limit() may be called from any number of threads.
#ifndef CACHEWATCH_DAEMON_EXPORTER_PROMETHEUS_LABEL_LIMITER_H_
#define CACHEWATCH_DAEMON_EXPORTER_PROMETHEUS_LABEL_LIMITER_H_

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_set.h"

namespace cachewatch {

class LabelLimiter {
 public:
  // Reported in place of values beyond the cap.
  static constexpr std::string_view kOther = "other";
  // Reported in place of an empty value.
  static constexpr std::string_view kUnknown = "unknown";

  explicit LabelLimiter(size_t max_values) : max_values_(max_values) {}

  LabelLimiter(const LabelLimiter&) = delete;
  LabelLimiter& operator=(const LabelLimiter&) = delete;

  // Returns the value to report for `value` and sets `*overflowed` to whether
  // it was replaced by kOther.
  std::string Limit(std::string_view value, bool* overflowed);

 private:
  const size_t max_values_;
  std::mutex mutex_;
  absl::flat_hash_set<std::string> admitted_;  // Guarded by mutex_.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_EXPORTER_PROMETHEUS_LABEL_LIMITER_H_
