// Turns a provider's raw usage object into cachewatch's canonical token counts
// (docs/CLASSIFICATION.md, "Usage normalization": the fields read per
// provider and their semantics).
//
// Canonical form: uncached_input_tokens are the prompt tokens neither read
// from nor written to the cache, so that
//   prompt_total = uncached_input + cache_read + cache_write
// whatever the provider's own "input" total includes.
//
// All functions are pure functions of their arguments; thread-safe. Errors are
// returned as values, never thrown.
#ifndef CACHEWATCH_DAEMON_CORE_USAGE_NORMALIZER_H_
#define CACHEWATCH_DAEMON_CORE_USAGE_NORMALIZER_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"

namespace cachewatch {

// The largest raw usage JSON accepted, in bytes (Usage.raw_usage_json).
inline constexpr size_t kMaxRawUsageJsonBytes = 64 * 1024;
// The largest token count accepted in any field.
inline constexpr int64_t kMaxTokenCount = 1'000'000'000'000;

// Parses `raw_json`, the provider's usage object verbatim, and returns the
// canonical counts. The object may also be the whole response around it
// ("usage", or for Gemini "usageMetadata" / "usage_metadata"). The shape is
// detected where a provider has several (OpenAI Chat Completions / Responses,
// Gemini camelCase / snake_case, Kimi OpenAI- / Anthropic-compatible).
//
// Returns InvalidArgument, with a message starting "raw_usage_json: " and
// naming the offending field, when: the provider is unspecified or unknown;
// the input exceeds kMaxRawUsageJsonBytes; it is malformed JSON ("malformed
// JSON at byte N", N counted from 1) or not an object; a required field is
// missing; a count is not an integer, is negative or exceeds kMaxTokenCount;
// or the counts contradict each other (an inclusive total smaller than its
// cached part, a TTL split larger than the write total). A returned usage
// always passes ValidateNormalizedUsage.
absl::StatusOr<v1::NormalizedUsage> NormalizeRawUsage(
    v1::Provider provider, std::string_view raw_json);

// Checks an already-normalized usage (e.g. one a client sent): every count is
// in [0, kMaxTokenCount] and cache_write_5m + cache_write_1h <= cache_write.
// Returns OK, or InvalidArgument naming the first offending field.
absl::Status ValidateNormalizedUsage(const v1::NormalizedUsage& usage);

// uncached_input + cache_read + cache_write. `usage` must have passed
// ValidateNormalizedUsage (or come from NormalizeRawUsage), which rules out
// overflow.
int64_t PromptTotalTokens(const v1::NormalizedUsage& usage);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CORE_USAGE_NORMALIZER_H_
