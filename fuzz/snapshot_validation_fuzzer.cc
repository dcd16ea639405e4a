// libFuzzer target: ValidateSnapshot (daemon/pipeline/validation.h) on
// arbitrary cachewatch.v1.Snapshot messages.
//
// Input: a Snapshot in the binary wire format, as RecordSnapshot and the
// Record stream carry it. Bytes that do not parse are skipped (gRPC answers
// them before validation runs). A parsed snapshot is validated with the
// daemon's default limits and with small ones (validation_fuzz_limits.h).
//
// Invariants checked, beyond "no crash, no leak, no undefined behaviour":
//   - the result is OK or InvalidArgument with a message starting
//     "snapshot";
//   - the same snapshot gives the same result twice, and again after a
//     serialize / parse round trip;
//   - an accepted snapshot has every required field, within the limits.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "daemon/pipeline/validation.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/validation_fuzz_limits.h"

namespace {

using cachewatch::ValidationLimits;
using cachewatch::fuzz::kNowUs;
namespace v1 = cachewatch::v1;

bool Text(const std::string& value, bool required, size_t max_bytes) {
  return (!required || !value.empty()) && value.size() <= max_bytes;
}

// Whether `snapshot` has what an accepted one must have under `limits`.
bool Acceptable(const v1::Snapshot& snapshot, const ValidationLimits& limits) {
  bool ok =
      Text(snapshot.agent(), true, limits.max_name_bytes) &&
      Text(snapshot.session_id(), true, limits.max_id_bytes) &&
      Text(snapshot.lane(), false, limits.max_name_bytes) &&
      Text(snapshot.request_id(), true, limits.max_id_bytes) &&
      cachewatch::fuzz::TimeWithinLimits(snapshot.request_time(),
                                         snapshot.has_request_time(), limits) &&
      snapshot.provider() != v1::PROVIDER_UNSPECIFIED &&
      v1::Provider_IsValid(snapshot.provider()) &&
      Text(snapshot.model(), true, limits.max_name_bytes) &&
      snapshot.tools_size() <= limits.max_tools &&
      snapshot.system_sections_size() <= limits.max_system_sections &&
      snapshot.message_chain_size() <= limits.max_message_chain_blocks &&
      v1::ExpectedDrop_IsValid(snapshot.expected_drop()) &&
      v1::ToolOrderPolicy_IsValid(snapshot.tool_order_policy()) &&
      snapshot.cache_control().breakpoints_size() <= limits.max_breakpoints;
  for (const v1::ToolRef& tool : snapshot.tools()) {
    ok = ok && Text(tool.name(), true, limits.max_id_bytes);
  }
  for (const v1::SystemSection& section : snapshot.system_sections()) {
    ok = ok && Text(section.name(), true, limits.max_name_bytes);
  }
  for (const v1::Breakpoint& breakpoint :
       snapshot.cache_control().breakpoints()) {
    ok = ok && breakpoint.segment() != v1::PROMPT_SEGMENT_UNSPECIFIED &&
         v1::PromptSegment_IsValid(breakpoint.segment());
    if (breakpoint.segment() == v1::PROMPT_SEGMENT_MESSAGES &&
        snapshot.message_chain_size() > 0) {
      ok = ok && breakpoint.index() <
                     static_cast<uint32_t>(snapshot.message_chain_size());
    }
  }
  return ok;
}

void Check(const v1::Snapshot& snapshot, const ValidationLimits& limits) {
  const absl::Status status =
      cachewatch::ValidateSnapshot(snapshot, limits, kNowUs);
  FUZZ_CHECK(status == cachewatch::ValidateSnapshot(snapshot, limits, kNowUs));
  if (status.ok()) {
    FUZZ_CHECK(Acceptable(snapshot, limits));
  } else {
    FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(status.message(), "snapshot"));
  }

  std::string wire;
  FUZZ_CHECK(snapshot.SerializeToString(&wire));
  v1::Snapshot reparsed;
  FUZZ_CHECK(reparsed.ParseFromString(wire));
  FUZZ_CHECK(status == cachewatch::ValidateSnapshot(reparsed, limits, kNowUs));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  [[maybe_unused]] static const bool silenced =
      cachewatch::fuzz::SilenceProtobufLog();
  v1::Snapshot snapshot;
  if (!snapshot.ParseFromArray(data, static_cast<int>(size))) return 0;
  Check(snapshot, cachewatch::fuzz::kDefaultLimits);
  Check(snapshot, cachewatch::fuzz::kSmallLimits);
  return 0;
}
