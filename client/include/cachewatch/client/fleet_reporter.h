// FleetReporter: reports to several daemons that share one store
// (docs/FLEET.md), keeping each lane on one daemon.
//
//   cachewatch::client::FleetReporter reporter(
//       {.addresses = {"cw-1:50051", "cw-2:50051", "cw-3:50051"}});
//   reporter.ReportSnapshot(*std::move(snapshot));
//
// A lane's daemon is the first healthy one in the lane's rendezvous order
// (RendezvousOrder: highest XXH3-64 of address + lane key first), so that
// adding or removing a daemon moves only the lanes that were on it. One
// Reporter per daemon does the streaming (reporter.h); a daemon whose
// stream broke (with records outstanding or not) or that answered
// UNAVAILABLE is skipped (Reporter::Healthy) until it acknowledges again,
// or, idle, until its channel is READY again: its lanes then come back to
// it. Records already queued for a failing daemon stay queued for it and
// are sent when it returns (the daemons are idempotent per request id).
//
// Thread-safe, as Reporter.
#ifndef CACHEWATCH_CLIENT_FLEET_REPORTER_H_
#define CACHEWATCH_CLIENT_FLEET_REPORTER_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cachewatch/client/reporter.h"

namespace cachewatch::client {

struct FleetReporterOptions {
  // The daemons' gRPC addresses; duplicates are ignored. At least one.
  std::vector<std::string> addresses;
  // Everything but `address`, for each daemon's Reporter.
  ReporterOptions reporter;
};

// The lane key as the daemon reads it: agent, session id, lane ("main"
// when empty), separated by newlines.
std::string LaneKeyOf(const std::string& agent, const std::string& session_id,
                      const std::string& lane);

// `addresses` in the lane's rendezvous order, best first.
std::vector<std::string> RendezvousOrder(
    const std::string& lane_key, const std::vector<std::string>& addresses);

class FleetReporter {
 public:
  explicit FleetReporter(FleetReporterOptions options);

  // As Reporter's, on the lane's daemon.
  bool ReportSnapshot(v1::Snapshot snapshot);
  bool ReportUsage(v1::Usage usage);

  // Where the lane's records go now.
  std::string AddressFor(const std::string& agent,
                         const std::string& session_id,
                         const std::string& lane) const;

  // True once every daemon's reporter flushed within `timeout`.
  bool Flush(std::chrono::milliseconds timeout);

  // Per address.
  std::map<std::string, ReporterStats> stats() const;

 private:
  std::vector<std::string> addresses_;
  std::map<std::string, std::unique_ptr<Reporter>> reporters_;
};

}  // namespace cachewatch::client

#endif  // CACHEWATCH_CLIENT_FLEET_REPORTER_H_
