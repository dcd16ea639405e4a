#include "daemon/exporter/prometheus/exposer.h"

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cachewatch {

absl::StatusOr<std::unique_ptr<prometheus::Exposer>> StartExposer(
    const std::string& address,
    std::shared_ptr<prometheus::Registry> registry) {
  if (address.empty()) {
    return absl::InvalidArgumentError("metrics address is empty");
  }
  if (registry == nullptr) {
    return absl::InvalidArgumentError("metrics registry is null");
  }
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  exposer->RegisterCollectable(registry);
  return exposer;
}

}  // namespace cachewatch
