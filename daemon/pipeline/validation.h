// Validation of incoming records: every field an agent sends is checked
// before anything reaches the tracker or the store, and bad input is answered
// with InvalidArgument naming the field.
//
// Pure functions of their arguments (the daemon's clock is passed in);
// thread-safe.
#ifndef CACHEWATCH_DAEMON_PIPELINE_VALIDATION_H_
#define CACHEWATCH_DAEMON_PIPELINE_VALIDATION_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/service.pb.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"

namespace cachewatch {

struct ValidationLimits {
  // Most tools a snapshot may list. Default 2,000.
  int max_tools = 2000;
  // Most message-chain blocks. Default 100,000.
  int max_message_chain_blocks = 100000;
  // Most system sections. Default 256.
  int max_system_sections = 256;
  // Most cache breakpoints. Default 64.
  int max_breakpoints = 64;
  // Longest agent, lane and model names, in bytes. Default 128.
  size_t max_name_bytes = 128;
  // Longest session id, request id and tool name, in bytes. Default 256.
  size_t max_id_bytes = 256;
  // Longest provider cache-miss reason, in bytes. Default 256.
  size_t max_reason_bytes = 256;
  // Longest TTL a cache layout or breakpoint may ask for. Default 7 days
  // (providers offer at most 24 hours today).
  uint32_t max_ttl_seconds = 7 * 86400;
  // Longest ListBreaks page token and ExplainBreak break id, in bytes.
  // Default 512 and 64 (the daemon's are 40 and 16).
  size_t max_page_token_bytes = 512;
  size_t max_break_id_bytes = 64;
  // Timestamps earlier than this (2020-01-01) are absurd.
  int64_t min_time_us = 1'577'836'800'000'000;
  // ... and so are timestamps further ahead of the daemon's clock than this.
  // Default 1 day.
  int64_t max_future_skew_us = 86'400'000'000;
};

// Checks a snapshot. Returns OK or InvalidArgument whose message starts with
// the offending field's path (e.g. "snapshot.tools[3].name: empty").
absl::Status ValidateSnapshot(const v1::Snapshot& snapshot,
                              const ValidationLimits& limits, int64_t now_us);

// Checks a usage and returns its normalized counts: the client's normalized
// fields when present, else the normalized raw usage JSON. Errors as above.
absl::StatusOr<v1::NormalizedUsage> ValidateUsage(
    const v1::Usage& usage, const ValidationLimits& limits, int64_t now_us);

// Checks the filters of the query RPCs: every string within the limits
// above (agent, lane and model names; session ids; page tokens; break ids),
// enums known, timestamps in range. Errors as above,
// e.g. "list_breaks.agent: longer than 128 bytes".
absl::Status ValidateListBreaksRequest(const v1::ListBreaksRequest& request,
                                       const ValidationLimits& limits);
absl::Status ValidateExplainBreakRequest(const v1::ExplainBreakRequest& request,
                                         const ValidationLimits& limits);
absl::Status ValidateWatchBreaksRequest(const v1::WatchBreaksRequest& request,
                                        const ValidationLimits& limits);
absl::Status ValidateLaneTimelineRequest(
    const v1::GetLaneTimelineRequest& request, const ValidationLimits& limits);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_PIPELINE_VALIDATION_H_
