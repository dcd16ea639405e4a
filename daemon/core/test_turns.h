// Test helpers: realistic snapshots and usages built in a line or two.
// For tests only.
#ifndef CACHEWATCH_DAEMON_CORE_TEST_TURNS_H_
#define CACHEWATCH_DAEMON_CORE_TEST_TURNS_H_

#include <google/protobuf/util/time_util.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"
#include "daemon/core/turn.h"

namespace cachewatch::testing {

inline constexpr int64_t kSecond = 1'000'000;
inline constexpr int64_t kT0 = 1'790'000'000 * kSecond;  // A fixed instant.

inline v1::ToolRef Tool(std::string name, uint64_t schema_hash) {
  v1::ToolRef tool;
  tool.set_name(std::move(name));
  tool.set_schema_hash(schema_hash);
  return tool;
}

// A snapshot of lane agent/s1/main at kT0 + seconds, Anthropic, with tools
// Read, Write, Bash and system hash 42.
inline v1::Snapshot BaseSnapshot(std::string request_id, double seconds) {
  v1::Snapshot snapshot;
  snapshot.set_agent("agent");
  snapshot.set_session_id("s1");
  snapshot.set_request_id(std::move(request_id));
  *snapshot.mutable_request_time() =
      google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(
          kT0 + static_cast<int64_t>(seconds * kSecond));
  snapshot.set_provider(v1::PROVIDER_ANTHROPIC);
  snapshot.set_model("claude-sonnet-4-5");
  snapshot.set_system_hash(42);
  for (auto [name, hash] : {std::pair{"Read", 1}, {"Write", 2}, {"Bash", 3}}) {
    *snapshot.add_tools() = Tool(name, hash);
  }
  snapshot.mutable_cache_control()->set_enabled(true);
  return snapshot;
}

inline v1::NormalizedUsage Usage(int64_t read, int64_t write,
                                 int64_t uncached) {
  v1::NormalizedUsage usage;
  usage.set_cache_read_tokens(read);
  usage.set_cache_write_tokens(write);
  usage.set_uncached_input_tokens(uncached);
  usage.set_output_tokens(100);
  return usage;
}

inline v1::Usage UsageRecord(const std::string& request_id, double seconds,
                             const v1::NormalizedUsage& normalized) {
  v1::Usage usage;
  usage.set_agent("agent");
  usage.set_session_id("s1");
  usage.set_request_id(request_id);
  *usage.mutable_response_time() =
      google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(
          kT0 + static_cast<int64_t>(seconds * kSecond));
  usage.set_provider(v1::PROVIDER_ANTHROPIC);
  *usage.mutable_normalized() = normalized;
  return usage;
}

inline Turn MakeTurn(const v1::Snapshot& snapshot,
                     const v1::NormalizedUsage& usage) {
  Turn turn;
  turn.request_id = snapshot.request_id();
  turn.snapshot = std::make_shared<const v1::Snapshot>(snapshot);
  turn.usage = usage;
  turn.provider = snapshot.provider();
  turn.model = snapshot.model();
  turn.request_time_us =
      google::protobuf::util::TimeUtil::TimestampToMicroseconds(
          snapshot.request_time());
  return turn;
}

}  // namespace cachewatch::testing

#endif  // CACHEWATCH_DAEMON_CORE_TEST_TURNS_H_
