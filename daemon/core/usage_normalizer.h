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
#include <optional>
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

// The longest provider miss reason kept, in bytes; longer ones are cut (at a
// UTF-8 character boundary).
inline constexpr size_t kMaxProviderMissReasonBytes = 64;

// The provider's own cache diagnostics in `raw_json` when it is the response
// around the usage (or an object holding the response's diagnostic fields
// beside "usage"):
//   Anthropic:  "diagnostics": {"cache_miss_reason": {"type": "tools_changed",
//               "cache_missed_input_tokens": N}}  (null: no divergence found
//               or still running -- nothing to report);
//   OpenAI Responses: "prompt_cache_diagnostics": {"type": "cache_miss",
//               "reason": "input_changed", "cache_missed_tokens": N}, or a
//               "type" of cache_hit / comparison_response_not_found /
//               unavailable, which is then the reason.
// The reason is kept verbatim (unknown vocabulary too), cut to
// kMaxProviderMissReasonBytes; a missed-token count that is not an integer in
// [0, kMaxTokenCount] is left out. Returns nullopt when there are none, or
// when `raw_json` is not a JSON object of at most kMaxRawUsageJsonBytes:
// never an error (the usage itself is validated by NormalizeRawUsage).
std::optional<v1::ProviderCacheDiagnostics> ParseProviderDiagnostics(
    std::string_view raw_json);

// `diagnostics` bounded as ParseProviderDiagnostics bounds what it parses
// (e.g. when a client sent them in the explicit field); nullopt when the
// reason is empty.
std::optional<v1::ProviderCacheDiagnostics> BoundedDiagnostics(
    v1::ProviderCacheDiagnostics diagnostics);

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
