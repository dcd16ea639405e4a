#include "cli/transcript.h"

#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/time_util.h>
#include <xxhash.h>

#include <filesystem>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/usage_normalizer.h"
#include "daemon/util/status_macros.h"

namespace cachewatch::cli {
namespace {

constexpr size_t kMaxProblemsKept = 20;

}  // namespace

void ReadTally::Problem(std::string_view path, int64_t line,
                        std::string_view what) {
  if (first_problems.size() < kMaxProblemsKept) {
    first_problems.push_back(
        absl::StrCat(std::string(path), ":", line, ": ", std::string(what)));
  }
}

TranscriptContext::TranscriptContext(std::string path, ReadTally& tally,
                                     SeenRequests& seen, TurnSink sink)
    : path(std::move(path)),
      file_session_id(std::filesystem::path(this->path).stem().string()),
      tally(tally),
      seen(seen),
      sink(std::move(sink)) {}

void TranscriptContext::CorruptLine(int64_t number) {
  ++tally.corrupt_lines;
  tally.Problem(path, number, "not a JSON object (truncated or corrupt)");
}

bool TranscriptContext::EmitTurn(absl::StatusOr<TranscriptTurn> turn,
                                 int64_t number, std::string_view agent,
                                 std::string_view unreadable) {
  if (turn.ok()) {
    ++tally.requests;
    sink(*std::move(turn));
    return true;
  }
  if (absl::IsFailedPrecondition(turn.status())) {
    tally.Skip(
        absl::StrCat(std::string(agent), ": request with no prompt tokens"));
  } else {
    tally.Skip(absl::StrCat(std::string(agent), ": ", std::string(unreadable)));
    tally.Problem(path, number, std::string(turn.status().message()));
  }
  return false;
}

absl::StatusOr<TranscriptTurn> MakeTurn(RequestFields fields) {
  CACHEWATCH_ASSIGN_OR_RETURN(
      v1::NormalizedUsage normalized,
      NormalizeRawUsage(fields.provider, fields.raw_usage_json));
  if (PromptTotalTokens(normalized) == 0) {
    return absl::FailedPreconditionError("usage counts no prompt token");
  }
  using google::protobuf::util::TimeUtil;
  TranscriptTurn turn;
  v1::Snapshot& snapshot = turn.snapshot;
  snapshot.set_agent(fields.agent);
  snapshot.set_session_id(fields.session_id);
  snapshot.set_lane(fields.lane);
  snapshot.set_request_id(fields.request_id);
  *snapshot.mutable_request_time() =
      TimeUtil::MicrosecondsToTimestamp(fields.time_us);
  snapshot.set_provider(fields.provider);
  snapshot.set_model(fields.model);
  snapshot.mutable_message_chain()->Add(fields.message_chain.begin(),
                                        fields.message_chain.end());
  snapshot.set_expected_drop(fields.expected_drop);
  v1::Usage& usage = turn.usage;
  usage.set_agent(std::move(fields.agent));
  usage.set_session_id(std::move(fields.session_id));
  usage.set_lane(std::move(fields.lane));
  usage.set_request_id(std::move(fields.request_id));
  *usage.mutable_response_time() =
      TimeUtil::MicrosecondsToTimestamp(fields.time_us);
  usage.set_provider(fields.provider);
  usage.set_model(std::move(fields.model));
  *usage.mutable_normalized() = std::move(normalized);
  usage.set_raw_usage_json(std::move(fields.raw_usage_json));
  return turn;
}

bool SeenRequests::Insert(std::string_view agent, std::string_view identity) {
  const uint64_t seed = XXH3_64bits(agent.data(), agent.size());
  return hashes_
      .insert(XXH3_64bits_withSeed(identity.data(), identity.size(), seed))
      .second;
}

uint64_t ChainStep(uint64_t running, std::string_view message) {
  return XXH3_64bits_withSeed(message.data(), message.size(), running);
}

bool ParseTimestampMicros(std::string_view text, int64_t* micros) {
  google::protobuf::Timestamp timestamp;
  if (!google::protobuf::util::TimeUtil::FromString(std::string(text),
                                                    &timestamp)) {
    return false;
  }
  *micros =
      google::protobuf::util::TimeUtil::TimestampToMicroseconds(timestamp);
  return true;
}

}  // namespace cachewatch::cli
