// The usage normalizer of each provider's API, the functions the provider
// table (provider_table.h) names: each reads the provider's raw usage JSON,
// already parsed into an object, and returns the canonical counts, or
// INVALID_ARGUMENT naming the field that is missing or wrong.
//
// Called through NormalizeRawUsage (usage_normalizer.h), which bounds the
// input and parses it. Pure functions of their argument; thread-safe.
#ifndef CACHEWATCH_DAEMON_CORE_PROVIDER_USAGE_H_
#define CACHEWATCH_DAEMON_CORE_PROVIDER_USAGE_H_

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "cachewatch/v1/usage.pb.h"

namespace cachewatch {

using UsageNormalizer =
    absl::StatusOr<v1::NormalizedUsage> (*)(const nlohmann::json& root);

absl::StatusOr<v1::NormalizedUsage> NormalizeAnthropic(
    const nlohmann::json& root);
absl::StatusOr<v1::NormalizedUsage> NormalizeBedrock(
    const nlohmann::json& root);
absl::StatusOr<v1::NormalizedUsage> NormalizeOpenAi(const nlohmann::json& root);
absl::StatusOr<v1::NormalizedUsage> NormalizeGemini(const nlohmann::json& root);
absl::StatusOr<v1::NormalizedUsage> NormalizeDashScope(
    const nlohmann::json& root);
absl::StatusOr<v1::NormalizedUsage> NormalizeDeepSeek(
    const nlohmann::json& root);
absl::StatusOr<v1::NormalizedUsage> NormalizeKimi(const nlohmann::json& root);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CORE_PROVIDER_USAGE_H_
