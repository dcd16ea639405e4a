// What the ingest validation fuzzers share: the daemon's clock reading and
// the two sets of limits each parsed record is validated with. For the fuzz
// targets only.
#ifndef CACHEWATCH_FUZZ_VALIDATION_FUZZ_LIMITS_H_
#define CACHEWATCH_FUZZ_VALIDATION_FUZZ_LIMITS_H_

#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/time_util.h>

#include <cstdint>

#include "daemon/pipeline/validation.h"

namespace cachewatch::fuzz {

// The daemon's "now": kT0 + 1 h of daemon/core/test_turns.h, the instant the
// unit tests (and so the seed records) use.
inline constexpr int64_t kNowUs = 1'790'003'600'000'000;

// The daemon's defaults, and limits small enough that short inputs reach
// every "more than" and "longer than" branch.
inline const ValidationLimits kDefaultLimits;
inline const ValidationLimits kSmallLimits = {
    .max_tools = 2,
    .max_message_chain_blocks = 3,
    .max_system_sections = 2,
    .max_breakpoints = 2,
    .max_name_bytes = 8,
    .max_id_bytes = 8,
};

// Whether `time` is set, a valid Timestamp (0001-01-01 to 9999-12-31) and
// within `limits` of kNowUs, as an accepted record's time must be.
inline bool TimeWithinLimits(const google::protobuf::Timestamp& time,
                             bool present, const ValidationLimits& limits) {
  if (!present || time.seconds() < -62'135'596'800 ||
      time.seconds() > 253'402'300'799 || time.nanos() < 0 ||
      time.nanos() > 999'999'999) {
    return false;
  }
  const int64_t time_us =
      google::protobuf::util::TimeUtil::TimestampToMicroseconds(time);
  return time_us >= limits.min_time_us &&
         time_us <= kNowUs + limits.max_future_skew_us;
}

// Silences protobuf's log (it reports every string field that is not UTF-8
// while the fuzzer feeds such bytes by the million). Call once.
inline bool SilenceProtobufLog() {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}

}  // namespace cachewatch::fuzz

#endif  // CACHEWATCH_FUZZ_VALIDATION_FUZZ_LIMITS_H_
