#include "cachewatch/client/fleet_reporter.h"

#include <xxhash.h>

#include <algorithm>
#include <set>
#include <utility>

namespace cachewatch::client {

std::string LaneKeyOf(const std::string& agent, const std::string& session_id,
                      const std::string& lane) {
  return agent + "\n" + session_id + "\n" + (lane.empty() ? "main" : lane);
}

std::vector<std::string> RendezvousOrder(
    const std::string& lane_key, const std::vector<std::string>& addresses) {
  std::vector<std::pair<uint64_t, std::string>> scored;
  for (const std::string& address : addresses) {
    const std::string bytes = address + "\n" + lane_key;
    scored.emplace_back(XXH3_64bits(bytes.data(), bytes.size()), address);
  }
  std::sort(scored.begin(), scored.end(),
            [](const auto& a, const auto& b) { return a > b; });
  std::vector<std::string> order;
  for (auto& [score, address] : scored) order.push_back(std::move(address));
  return order;
}

FleetReporter::FleetReporter(FleetReporterOptions options) {
  std::set<std::string> seen;
  for (const std::string& address : options.addresses) {
    if (!seen.insert(address).second) continue;
    addresses_.push_back(address);
    ReporterOptions reporter = options.reporter;
    reporter.address = address;
    reporters_.emplace(address, std::make_unique<Reporter>(reporter));
  }
  if (addresses_.empty()) {
    // No daemon given: the Reporter's default, so that reports still work.
    addresses_.push_back(options.reporter.address);
    reporters_.emplace(addresses_.back(),
                       std::make_unique<Reporter>(options.reporter));
  }
}

std::string FleetReporter::AddressFor(const std::string& agent,
                                      const std::string& session_id,
                                      const std::string& lane) const {
  const std::vector<std::string> order =
      RendezvousOrder(LaneKeyOf(agent, session_id, lane), addresses_);
  for (const std::string& address : order) {
    if (reporters_.at(address)->Healthy()) return address;
  }
  return order.front();  // All failing: the lane's own daemon keeps it.
}

bool FleetReporter::ReportSnapshot(v1::Snapshot snapshot) {
  const std::string address =
      AddressFor(snapshot.agent(), snapshot.session_id(), snapshot.lane());
  return reporters_.at(address)->ReportSnapshot(std::move(snapshot));
}

bool FleetReporter::ReportUsage(v1::Usage usage) {
  const std::string address =
      AddressFor(usage.agent(), usage.session_id(), usage.lane());
  return reporters_.at(address)->ReportUsage(std::move(usage));
}

bool FleetReporter::Flush(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool all = true;
  for (auto& [address, reporter] : reporters_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    all = reporter->Flush(std::max(left, std::chrono::milliseconds(0))) && all;
  }
  return all;
}

std::map<std::string, ReporterStats> FleetReporter::stats() const {
  std::map<std::string, ReporterStats> out;
  for (const auto& [address, reporter] : reporters_) {
    out[address] = reporter->stats();
  }
  return out;
}

}  // namespace cachewatch::client
