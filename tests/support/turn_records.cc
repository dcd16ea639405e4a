#include "tests/support/turn_records.h"

#include <google/protobuf/util/time_util.h>

#include <cstdint>

namespace cachewatch::testing {
namespace {

using google::protobuf::util::TimeUtil;

// Turn 0's request time: five minutes before the test process started.
const int64_t kStartUs =
    TimeUtil::TimestampToMicroseconds(TimeUtil::GetCurrentTime()) -
    300LL * 1'000'000;

// The fields a snapshot and the usage answering it share.
template <typename Record>
void SetTurn(const std::string& agent, const std::string& session, int turn,
             Record& record) {
  record.set_agent(agent);
  record.set_session_id(session);
  record.set_request_id(session + "-" + std::to_string(turn));
  record.set_provider(v1::PROVIDER_ANTHROPIC);
}

}  // namespace

v1::Snapshot TurnSnapshot(const std::string& agent, const std::string& session,
                          int turn) {
  v1::Snapshot snapshot;
  SetTurn(agent, session, turn, snapshot);
  *snapshot.mutable_request_time() =
      TimeUtil::MicrosecondsToTimestamp(kStartUs + turn * 1'000'000LL);
  snapshot.set_model("claude-sonnet-4-5");
  snapshot.set_system_hash(1);
  for (const char* name : {"Bash", "Read", "Write"}) {
    v1::ToolRef* tool = snapshot.add_tools();
    tool->set_name(name);
    tool->set_schema_hash(name[0]);
  }
  return snapshot;
}

v1::Usage TurnUsage(const std::string& agent, const std::string& session,
                    int turn) {
  v1::Usage usage;
  SetTurn(agent, session, turn, usage);
  *usage.mutable_response_time() =
      TimeUtil::MicrosecondsToTimestamp(kStartUs + turn * 1'000'000LL + 500);
  usage.mutable_normalized()->set_cache_read_tokens(turn == 0 ? 0 : 20000);
  usage.mutable_normalized()->set_cache_write_tokens(turn == 0 ? 20000 : 100);
  return usage;
}

}  // namespace cachewatch::testing
