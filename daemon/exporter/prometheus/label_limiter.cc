#include "daemon/exporter/prometheus/label_limiter.h"

namespace cachewatch {

std::string LabelLimiter::Limit(std::string_view value, bool* overflowed) {
  std::string reported(value.empty() ? kUnknown : value);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!admitted_.contains(reported)) {
    if (admitted_.size() >= max_values_) {
      *overflowed = true;
      return std::string(kOther);
    }
    admitted_.insert(reported);
  }
  *overflowed = false;
  return reported;
}

}  // namespace cachewatch
