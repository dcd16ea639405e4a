// libFuzzer target: ValidateUsage (daemon/pipeline/validation.h) on arbitrary
// cachewatch.v1.Usage messages, and through it the raw usage normalizer.
//
// Input: a Usage in the binary wire format, as RecordUsage and the Record
// stream carry it. Bytes that do not parse are skipped (gRPC answers them
// before validation runs). A parsed usage is validated with the daemon's
// default limits and with small ones (validation_fuzz_limits.h).
//
// Invariants checked, beyond "no crash, no leak, no undefined behaviour":
//   - an error is InvalidArgument with a message starting "usage";
//   - the same usage gives the same result twice, and again after a
//     serialize / parse round trip;
//   - an accepted usage has its required fields, within the limits, and the
//     counts returned pass ValidateNormalizedUsage and are the client's
//     normalized counts when sent, else NormalizeRawUsage's.

#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "cachewatch/v1/usage.pb.h"
#include "daemon/core/usage_normalizer.h"
#include "daemon/pipeline/validation.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/validation_fuzz_limits.h"

namespace {

using cachewatch::ValidationLimits;
using cachewatch::fuzz::kNowUs;
using google::protobuf::util::MessageDifferencer;
namespace v1 = cachewatch::v1;

bool Text(const std::string& value, bool required, size_t max_bytes) {
  return (!required || !value.empty()) && value.size() <= max_bytes;
}

bool SameResult(const absl::StatusOr<v1::NormalizedUsage>& a,
                const absl::StatusOr<v1::NormalizedUsage>& b) {
  if (a.ok() != b.ok()) return false;
  return a.ok() ? MessageDifferencer::Equals(*a, *b) : a.status() == b.status();
}

// Whether `usage`, accepted under `limits` with `normalized` as its counts,
// is what the header promises.
bool Acceptable(const v1::Usage& usage, const ValidationLimits& limits,
                const v1::NormalizedUsage& normalized) {
  if (!(Text(usage.agent(), true, limits.max_name_bytes) &&
        Text(usage.session_id(), true, limits.max_id_bytes) &&
        Text(usage.lane(), false, limits.max_name_bytes) &&
        Text(usage.request_id(), true, limits.max_id_bytes) &&
        cachewatch::fuzz::TimeWithinLimits(usage.response_time(),
                                           usage.has_response_time(), limits) &&
        usage.provider() != v1::PROVIDER_UNSPECIFIED &&
        v1::Provider_IsValid(usage.provider()) &&
        Text(usage.model(), false, limits.max_name_bytes) &&
        cachewatch::ValidateNormalizedUsage(normalized).ok())) {
    return false;
  }
  if (usage.has_normalized()) {
    return MessageDifferencer::Equals(normalized, usage.normalized());
  }
  const absl::StatusOr<v1::NormalizedUsage> raw =
      cachewatch::NormalizeRawUsage(usage.provider(), usage.raw_usage_json());
  return raw.ok() && MessageDifferencer::Equals(normalized, *raw);
}

void Check(const v1::Usage& usage, const ValidationLimits& limits) {
  const absl::StatusOr<v1::NormalizedUsage> result =
      cachewatch::ValidateUsage(usage, limits, kNowUs);
  FUZZ_CHECK(
      SameResult(result, cachewatch::ValidateUsage(usage, limits, kNowUs)));
  if (result.ok()) {
    FUZZ_CHECK(Acceptable(usage, limits, *result));
  } else {
    FUZZ_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(result.status().message(), "usage"));
  }

  std::string wire;
  FUZZ_CHECK(usage.SerializeToString(&wire));
  v1::Usage reparsed;
  FUZZ_CHECK(reparsed.ParseFromString(wire));
  FUZZ_CHECK(
      SameResult(result, cachewatch::ValidateUsage(reparsed, limits, kNowUs)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  [[maybe_unused]] static const bool silenced =
      cachewatch::fuzz::SilenceProtobufLog();
  v1::Usage usage;
  if (!usage.ParseFromArray(data, static_cast<int>(size))) return 0;
  Check(usage, cachewatch::fuzz::kDefaultLimits);
  Check(usage, cachewatch::fuzz::kSmallLimits);
  return 0;
}
