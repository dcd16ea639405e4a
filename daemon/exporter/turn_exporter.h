// TurnExporter: an output of the ingest pipeline. After a batch of records
// is durable in the store, the pipeline hands the turns it classified to its
// exporter (the Prometheus turn metrics, the live break stream, ...): best
// effort, after the commit, never before, and never able to fail or hold up
// an ingest.
//
// The contract every exporter keeps: Export() does not block — it updates
// memory or hands the turns to a bounded buffer of its own and returns (the
// break stream cuts off a subscriber that falls behind; the metrics are
// counters). An exporter whose work may block (network, disk) runs behind an
// AsyncTurnExporter (async_turn_exporter.h), which gives it a thread and a
// bounded queue. A non-OK status (the exporter dropped the turns) is counted
// by the caller and otherwise ignored.
//
// ExportFanOut hands every batch to each of several exporters in turn.
//
// Thread-safety: Export() may be called concurrently from any number of
// threads.
#ifndef CACHEWATCH_DAEMON_EXPORTER_TURN_EXPORTER_H_
#define CACHEWATCH_DAEMON_EXPORTER_TURN_EXPORTER_H_

#include <vector>

#include "absl/status/status.h"
#include "daemon/core/lane_tracker.h"

namespace cachewatch {

class TurnExporter {
 public:
  virtual ~TurnExporter() = default;

  // Exports turns whose classification is durable. Must not block.
  virtual absl::Status Export(const std::vector<ClassifiedTurn>& turns) = 0;
};

class ExportFanOut final : public TurnExporter {
 public:
  // The exporters must outlive the fan-out.
  explicit ExportFanOut(std::vector<TurnExporter*> exporters)
      : exporters_(std::move(exporters)) {}

  // Exports to every exporter, whatever the others answer; the first
  // failure is returned (with how many exporters failed), else OK.
  absl::Status Export(const std::vector<ClassifiedTurn>& turns) override;

 private:
  const std::vector<TurnExporter*> exporters_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_EXPORTER_TURN_EXPORTER_H_
