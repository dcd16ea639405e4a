// A turn of a lane: one model request (its snapshot) and its response (its
// usage), either of which may be missing, and the key of the lane it belongs
// to.
//
// Plain values; a Turn shares its snapshot immutably, so copies are cheap and
// may be read from several threads.
#ifndef CACHEWATCH_DAEMON_CORE_TURN_H_
#define CACHEWATCH_DAEMON_CORE_TURN_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"

namespace cachewatch {

// The cache lineage: (agent, session id, lane); lane defaults to "main".
// The two kinds of record a client sends about a turn.
enum class RecordKind { kSnapshot, kUsage };

struct LaneKey {
  std::string agent;
  std::string session_id;
  std::string lane;

  bool operator==(const LaneKey&) const = default;
  std::string ToString() const;  // "agent/session/lane"
};

struct LaneKeyHash {
  size_t operator()(const LaneKey& key) const;
};

// The lane key of a snapshot or usage, with the lane defaulted to "main".
template <typename Record>
LaneKey LaneKeyOf(const Record& record) {
  return {record.agent(), record.session_id(),
          record.lane().empty() ? std::string("main") : record.lane()};
}

struct Turn {
  std::string request_id;
  std::shared_ptr<const v1::Snapshot> snapshot;  // Null when never received.
  // The snapshot's tools when `snapshot` holds none of its own: a lane's
  // baseline keeps its tools in a list shared by every lane that sent the
  // same one (LaneTracker). Null: the tools are the snapshot's.
  std::shared_ptr<const google::protobuf::RepeatedPtrField<v1::ToolRef>> tools;
  // The snapshot's message chain when `snapshot` holds none of its own: a
  // lane's baseline shares the rest of its snapshot with other lanes
  // (SnapshotInterner) and keeps only its chain. Empty: the chain is the
  // snapshot's.
  std::vector<uint64_t> message_chain;
  std::optional<v1::NormalizedUsage> usage;  // Empty until received.
  std::optional<v1::ProviderCacheDiagnostics> provider_diagnostics;
  v1::Provider provider = v1::PROVIDER_UNSPECIFIED;
  std::string model;
  // Client time of the request in microseconds since the epoch: the
  // snapshot's request time, else the usage's response time.
  int64_t request_time_us = 0;
};

// The tools of a turn's snapshot, which must not be null: `tools` when set,
// else the snapshot's own.
const google::protobuf::RepeatedPtrField<v1::ToolRef>& ToolsOf(
    const Turn& turn);

// The message chain of a turn's snapshot, which must not be null:
// `message_chain` when set, else the snapshot's own.
absl::Span<const uint64_t> MessageChainOf(const Turn& turn);

// The hex break id of a turn: XXH3-64 of the lane key and request id.
std::string BreakIdFor(const LaneKey& key, std::string_view request_id);

// XXH3-64 of a request id, as a lane remembers its recent turns.
uint64_t RequestIdHash(std::string_view request_id);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CORE_TURN_H_
