// Stale lanes: a store shared by several daemons (PostgresStore,
// docs/FLEET.md) refuses a write whose lanes another daemon wrote since
// this daemon last read them (RecordStore::LoadLane): the daemon's cached
// lane state is then stale, and a turn classified against it may have been
// diffed against the wrong previous turn. Such a Write() fails whole with
// ABORTED carrying the lanes; the writer forgets them (the next record of
// each reads the lane from the store again) and the records are retried.
//
// Pure functions of values; thread-safe.
#ifndef CACHEWATCH_DAEMON_STORE_STALE_LANES_H_
#define CACHEWATCH_DAEMON_STORE_STALE_LANES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/turn.h"

namespace cachewatch {

inline constexpr char kStaleLanesPayload[] = "cachewatch/stale-lanes";

// ABORTED naming the first lane, with every lane in its payload.
inline absl::Status StaleLanesError(const std::vector<LaneKey>& lanes) {
  std::string payload;
  for (const LaneKey& key : lanes) {
    for (const std::string* field : {&key.agent, &key.session_id, &key.lane}) {
      payload += *field;
      payload.push_back('\0');
    }
  }
  const LaneKey& first = lanes.front();
  absl::Status status = absl::AbortedError(absl::StrCat(
      "lane ", first.ToString(),
      lanes.size() > 1 ? absl::StrCat(" and ", lanes.size() - 1, " more")
                       : std::string(),
      " written by another daemon since this one read it; retry"));
  status.SetPayload(kStaleLanesPayload, absl::Cord(payload));
  return status;
}

// The lanes a StaleLanesError carries; empty for any other status.
inline std::vector<LaneKey> StaleLanesOf(const absl::Status& status) {
  std::vector<LaneKey> lanes;
  if (!absl::IsAborted(status)) return lanes;
  const auto payload = status.GetPayload(kStaleLanesPayload);
  if (!payload.has_value()) return lanes;
  const std::string bytes(*payload);
  std::vector<std::string> fields;
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != '\0') continue;
    fields.push_back(bytes.substr(start, i - start));
    start = i + 1;
  }
  for (size_t i = 0; i + 2 < fields.size(); i += 3) {
    lanes.push_back({fields[i], fields[i + 1], fields[i + 2]});
  }
  return lanes;
}

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_STALE_LANES_H_
