// libFuzzer target: LaneTracker (daemon/core/lane_tracker.h) and, through it,
// the classifier, driven by an arbitrary sequence of snapshots, usages and
// expiries on a few lanes.
//
// Input: one byte choosing the pending cap per lane (odd: 4, so that the
// oldest unpaired snapshot is given up often; even: the default 64, never
// reached by the 8 request ids), then four bytes per operation (a shorter
// tail is ignored):
//   byte 0: the operation (bits 0-1: snapshot, usage, both, expiry) and the
//           lane (bits 2-7, modulo 3);
//   byte 1: the request id (modulo 8): retries and reuse are frequent;
//   byte 2: the client time of the turn, in units of 20 s (up to 85 min, so
//           TTL expiry, out-of-order turns and late usages all occur); the
//           daemon's clock advances by the same byte in seconds;
//   byte 3: the snapshot's shape, one bit each: tools 0 and 1 swapped, tool
//           2's schema changed, system prompt changed, model changed, cache
//           control disabled, history rewritten, expected drop (compaction,
//           or an aborted previous request with bit 7); for a usage, the
//           cache read / write split.
// Snapshots and usages are built valid, as ingest validation passes them.
//
// Invariants checked, beyond "no crash, no leak, no undefined behaviour":
//   - the tracker never holds more than its lane cap (2 of the 3 lanes);
//   - every classification handed out has a known verdict; released turns
//     are never pending; a break has a cache_break whose primary reason is
//     the first of its reasons and whose break id is the turn's;
//   - a usage whose turn was released gets that turn's classification as its
//     answer, even when the same call released more turns than the lane
//     remembers;
//   - a record retried at once is a duplicate (a snapshot: unless the
//     pending cap gave it up at once, so only with the default cap), and a
//     retried usage gets exactly the classification the original got —
//     both unless the same call released more turns after it than a lane
//     remembers (kRemembered; by design a lane recognizes retries of its
//     last few turns only, and the daemon answers older ones from the
//     store).

#include <google/protobuf/util/message_differencer.h>
#include <google/protobuf/util/time_util.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/lane_tracker.h"
#include "fuzz/fuzz_check.h"

namespace {

namespace v1 = cachewatch::v1;
using cachewatch::ClassifiedTurn;
using cachewatch::LaneTracker;
using cachewatch::RecordOutcome;
using cachewatch::UsageResult;
using google::protobuf::util::MessageDifferencer;
using google::protobuf::util::TimeUtil;

constexpr int64_t kSecondUs = 1'000'000;
constexpr int64_t kT0 = 1'790'000'000 * kSecondUs;
constexpr size_t kMaxLanes = 2;
constexpr size_t kRemembered = 2;  // Classified request ids per lane.
const char* const kLanes[] = {"main", "subagent-a", "subagent-b"};

struct Op {
  int kind;  // 0 snapshot, 1 usage, 2 both, 3 expiry.
  int lane;
  std::string request_id;
  int64_t time_us;
  uint8_t shape;
};

v1::Snapshot MakeSnapshot(const Op& op) {
  v1::Snapshot snapshot;
  snapshot.set_agent("agent");
  snapshot.set_session_id("s1");
  snapshot.set_lane(kLanes[op.lane]);
  snapshot.set_request_id(op.request_id);
  *snapshot.mutable_request_time() =
      TimeUtil::MicrosecondsToTimestamp(op.time_us);
  snapshot.set_provider(v1::PROVIDER_ANTHROPIC);
  snapshot.set_model(op.shape & 8 ? "claude-opus-4-1" : "claude-sonnet-4-5");
  snapshot.set_system_hash(op.shape & 4 ? 43 : 42);
  const char* const names[] = {"Read", "Write", "Bash"};
  for (int i = 0; i < 3; ++i) {
    v1::ToolRef* tool = snapshot.add_tools();
    tool->set_name(names[i]);
    tool->set_schema_hash(i == 2 && (op.shape & 2) ? 99 : i + 1);
  }
  if (op.shape & 1) snapshot.mutable_tools()->SwapElements(0, 1);
  v1::CacheControl* control = snapshot.mutable_cache_control();
  control->set_enabled((op.shape & 16) == 0);
  // A history that grows with time, rewritten at its start by bit 5.
  const int blocks =
      1 + static_cast<int>((op.time_us - kT0) / (60 * kSecondUs));
  for (int block = 0; block < blocks && block < 64; ++block) {
    snapshot.add_message_chain((op.shape & 32) && block == 0 ? 7 : block + 1);
  }
  v1::Breakpoint* breakpoint = control->add_breakpoints();
  breakpoint->set_segment(v1::PROMPT_SEGMENT_MESSAGES);
  breakpoint->set_index(
      static_cast<uint32_t>(snapshot.message_chain_size() - 1));
  if (op.shape & 64) {
    snapshot.set_expected_drop(op.shape & 128
                                   ? v1::EXPECTED_DROP_ABORTED_PREVIOUS
                                   : v1::EXPECTED_DROP_COMPACTION);
  }
  return snapshot;
}

v1::Usage MakeUsage(const Op& op) {
  v1::Usage usage;
  usage.set_agent("agent");
  usage.set_session_id("s1");
  usage.set_lane(kLanes[op.lane]);
  usage.set_request_id(op.request_id);
  *usage.mutable_response_time() =
      TimeUtil::MicrosecondsToTimestamp(op.time_us + 2 * kSecondUs);
  usage.set_provider(v1::PROVIDER_ANTHROPIC);
  v1::NormalizedUsage* normalized = usage.mutable_normalized();
  const int64_t reads[] = {0, 5000, 20000, 20000};
  normalized->set_cache_read_tokens(reads[op.shape & 3]);
  normalized->set_cache_write_tokens(op.shape & 4 ? 20000 : 0);
  normalized->set_uncached_input_tokens(op.shape & 8 ? 900 : 10);
  normalized->set_output_tokens(100);
  return usage;
}

void CheckClassification(const v1::TurnClassification& classification,
                         const std::string& request_id) {
  FUZZ_CHECK(v1::Verdict_IsValid(classification.verdict()));
  FUZZ_CHECK(classification.verdict() != v1::VERDICT_UNSPECIFIED);
  if (classification.verdict() == v1::VERDICT_BREAK) {
    FUZZ_CHECK(classification.has_cache_break());
    const v1::PromptCacheBreak& event = classification.cache_break();
    FUZZ_CHECK(event.reasons_size() > 0);
    FUZZ_CHECK(event.primary_reason() == event.reasons(0));
    FUZZ_CHECK(event.request_id() == request_id);
    FUZZ_CHECK(!event.break_id().empty());
  }
}

void CheckReleased(const std::vector<ClassifiedTurn>& released) {
  for (const ClassifiedTurn& turn : released) {
    FUZZ_CHECK(turn.classification.verdict() != v1::VERDICT_PENDING);
    CheckClassification(turn.classification, turn.turn.request_id);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cachewatch::TrackerOptions options;
  options.max_lanes = kMaxLanes;
  if (size == 0) return 0;
  const bool small_pending_cap = (data[0] & 1) != 0;
  options.max_pending_per_lane = small_pending_cap ? 4 : 64;
  options.remembered_request_ids = kRemembered;
  options.pending_timeout_us = 600 * kSecondUs;
  LaneTracker tracker(options, cachewatch::ClassifierOptions());
  int64_t now_us = kT0;
  for (size_t at = 1; at + 4 <= size; at += 4) {
    const Op op{data[at] & 3, (data[at] >> 2) % 3,
                absl::StrCat("r", data[at + 1] % 8),
                kT0 + data[at + 2] * 20 * kSecondUs, data[at + 3]};
    now_us += data[at + 2] * kSecondUs;
    if (op.kind == 3) {
      CheckReleased(tracker.Expire(now_us));
      FUZZ_CHECK(tracker.lane_count() <= kMaxLanes);
      continue;
    }
    if (op.kind != 1) {
      auto snapshot = std::make_shared<const v1::Snapshot>(MakeSnapshot(op));
      const std::vector<ClassifiedTurn> released =
          tracker.AddSnapshot(snapshot, now_us).classified;
      CheckReleased(released);
      // Released before the lane's last kRemembered: forgotten already (the
      // daemon answers such a retry from the store).
      bool forgotten = false;
      for (size_t i = 0; i < released.size(); ++i) {
        if (released[i].turn.request_id == op.request_id) {
          forgotten = released.size() - i > kRemembered;
        }
      }
      const RecordOutcome retried =
          tracker.AddSnapshot(snapshot, now_us).outcome;
      FUZZ_CHECK(small_pending_cap || forgotten ||
                 retried == RecordOutcome::kDuplicate);
    }
    if (op.kind != 0) {
      const v1::Usage usage = MakeUsage(op);
      const UsageResult result =
          tracker.AddUsage(usage, usage.normalized(), now_us);
      CheckReleased(result.classified);
      FUZZ_CHECK(v1::Verdict_IsValid(result.classification.verdict()));
      bool remembered = true;
      for (size_t i = 0; i < result.classified.size(); ++i) {
        const ClassifiedTurn& turn = result.classified[i];
        // The usage's answer is its turn's classification once released.
        if (turn.turn.request_id == op.request_id) {
          FUZZ_CHECK(MessageDifferencer::Equals(turn.classification,
                                                result.classification));
          // Released before the lane's last kRemembered: forgotten already.
          remembered = result.classified.size() - i <= kRemembered;
        }
      }
      if (result.classification.verdict() != v1::VERDICT_PENDING) {
        CheckClassification(result.classification, op.request_id);
      }
      if (remembered) {
        const UsageResult retry =
            tracker.AddUsage(usage, usage.normalized(), now_us);
        FUZZ_CHECK(retry.outcome == RecordOutcome::kDuplicate);
        FUZZ_CHECK(retry.classified.empty());
        if (result.classification.verdict() != v1::VERDICT_PENDING) {
          FUZZ_CHECK(MessageDifferencer::Equals(retry.classification,
                                                result.classification));
        }
      }
    }
    FUZZ_CHECK(tracker.lane_count() <= kMaxLanes);
  }
  return 0;
}
