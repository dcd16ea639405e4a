#include "bench/records.h"

#include <algorithm>
#include <chrono>

namespace cachewatch::bench {
namespace {

constexpr char kModel[] = "claude-sonnet-4-5";

void SetNow(google::protobuf::Timestamp* timestamp) {
  const int64_t now_us =
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  timestamp->set_seconds(now_us / 1'000'000);
  timestamp->set_nanos(static_cast<int32_t>(now_us % 1'000'000) * 1000);
}

// A fixed pseudo-random 64-bit value for `seed` (splitmix64).
uint64_t Mix(uint64_t seed) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The fields a snapshot and the usage answering it share: the lane, the
// turn's request id and the provider and model; the time is now.
template <typename Record>
void SetTurn(const LaneId& lane, int64_t turn, Record& record,
             google::protobuf::Timestamp* time) {
  record.set_agent(lane.agent);
  record.set_session_id(lane.session_id);
  record.set_lane("main");
  record.set_request_id(RequestId(turn));
  SetNow(time);
  record.set_provider(v1::PROVIDER_ANTHROPIC);
  record.set_model(kModel);
}

}  // namespace

std::string RequestId(int64_t turn) {
  return "req_01HZX" + std::to_string(1'000'000 + turn);
}

v1::Snapshot MakeSnapshot(const LaneId& lane, int64_t turn, int tool_count) {
  v1::Snapshot snapshot;
  SetTurn(lane, turn, snapshot, snapshot.mutable_request_time());
  snapshot.set_system_hash(Mix(1));
  static constexpr const char* kSections[] = {"identity", "environment",
                                              "instructions"};
  for (int i = 0; i < 3; ++i) {
    v1::SystemSection* section = snapshot.add_system_sections();
    section->set_name(kSections[i]);
    section->set_hash(Mix(100 + i));
  }
  // Every 20th turn (from turn 20 on) one tool's schema changes.
  const int changed = turn > 0 && turn % 20 == 0 ? 7 : -1;
  for (int i = 0; i < tool_count; ++i) {
    v1::ToolRef* tool = snapshot.add_tools();
    tool->set_name("mcp__workspace__tool_" + std::to_string(100 + i));
    tool->set_schema_hash(Mix(1000 + i + (i == changed ? turn : 0)));
  }
  v1::CacheControl* cache = snapshot.mutable_cache_control();
  cache->set_enabled(true);
  cache->set_ttl_seconds(300);
  v1::Breakpoint* breakpoint = cache->add_breakpoints();
  breakpoint->set_segment(v1::PROMPT_SEGMENT_SYSTEM);
  breakpoint->set_index(2);
  breakpoint->set_ttl_seconds(300);
  breakpoint = cache->add_breakpoints();
  breakpoint->set_segment(v1::PROMPT_SEGMENT_MESSAGES);
  breakpoint->set_index(static_cast<uint32_t>(std::min<int64_t>(2 * turn, 63)));
  breakpoint->set_ttl_seconds(300);
  snapshot.set_options_hash(Mix(2));
  const int64_t blocks = std::min<int64_t>(2 * turn + 1, 64);
  for (int64_t i = 0; i < blocks; ++i)
    snapshot.add_message_chain(Mix(5000 + i));
  snapshot.set_tool_order_policy(v1::TOOL_ORDER_POLICY_LEXICOGRAPHIC);
  return snapshot;
}

v1::Usage MakeUsage(const LaneId& lane, int64_t turn) {
  const bool broke = turn > 0 && turn % 20 == 0;
  const int64_t prompt = 24'000 + 900 * std::min<int64_t>(turn, 64);
  const int64_t read = turn == 0 ? 0 : (broke ? 3'000 : prompt - 900);
  const int64_t write = prompt - read - 12;
  v1::Usage usage;
  SetTurn(lane, turn, usage, usage.mutable_response_time());
  v1::NormalizedUsage* normalized = usage.mutable_normalized();
  normalized->set_uncached_input_tokens(12);
  normalized->set_cache_read_tokens(read);
  normalized->set_cache_write_tokens(write);
  normalized->set_cache_write_5m_tokens(write);
  normalized->set_output_tokens(350);
  usage.set_raw_usage_json(
      "{\"input_tokens\":12,\"cache_creation_input_tokens\":" +
      std::to_string(write) +
      ",\"cache_read_input_tokens\":" + std::to_string(read) +
      ",\"cache_creation\":{\"ephemeral_5m_input_tokens\":" +
      std::to_string(write) +
      ",\"ephemeral_1h_input_tokens\":0},\"output_tokens\":350,"
      "\"service_tier\":\"standard\",\"server_tool_use\":"
      "{\"web_search_requests\":0}}");
  return usage;
}

}  // namespace cachewatch::bench
