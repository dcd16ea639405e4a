#include "daemon/exporter/turn_exporter.h"

#include "absl/strings/str_cat.h"

namespace cachewatch {

absl::Status ExportFanOut::Export(const std::vector<ClassifiedTurn>& turns) {
  absl::Status first;
  int failed = 0;
  for (TurnExporter* exporter : exporters_) {
    absl::Status status = exporter->Export(turns);
    if (status.ok()) continue;
    if (++failed == 1) first = std::move(status);
  }
  if (failed <= 1) return first;
  return absl::Status(
      first.code(),
      absl::StrCat(failed, " exporters failed: ", first.message()));
}

}  // namespace cachewatch
