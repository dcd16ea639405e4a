// libFuzzer target: NormalizeRawUsage (daemon/core/usage_normalizer.h).
//
// Input: the first byte is the provider's enum value, as is (0 is
// PROVIDER_UNSPECIFIED, 1..7 the known providers, the rest unknown ones); the
// remaining bytes are the raw usage JSON. An empty input is skipped.
//
// Invariants checked, beyond "no crash, no leak, no undefined behaviour":
//   - an error is InvalidArgument and its message starts "raw_usage_json: ";
//     "malformed JSON at byte N" has N in [1, size + 1], and is the answer
//     exactly when nlohmann's parser rejects the text;
//   - a returned usage passes ValidateNormalizedUsage (the header's promise)
//     and its PromptTotalTokens is in [0, 3 * kMaxTokenCount];
//   - the same input gives the same result twice;
//   - the result depends on the JSON value, not on its spelling: the value
//     written back compactly (nlohmann's dump) normalizes to the same counts,
//     or fails too.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"
#include "daemon/core/usage_normalizer.h"
#include "fuzz/fuzz_check.h"
#include "nlohmann/json.hpp"

namespace {

using cachewatch::kMaxRawUsageJsonBytes;
using cachewatch::kMaxTokenCount;
using cachewatch::v1::NormalizedUsage;

constexpr absl::string_view kMalformed =
    "raw_usage_json: malformed JSON at byte ";

bool SameCounts(const NormalizedUsage& a, const NormalizedUsage& b) {
  return a.uncached_input_tokens() == b.uncached_input_tokens() &&
         a.cache_read_tokens() == b.cache_read_tokens() &&
         a.cache_write_tokens() == b.cache_write_tokens() &&
         a.cache_write_5m_tokens() == b.cache_write_5m_tokens() &&
         a.cache_write_1h_tokens() == b.cache_write_1h_tokens() &&
         a.output_tokens() == b.output_tokens();
}

bool SameResult(const absl::StatusOr<NormalizedUsage>& a,
                const absl::StatusOr<NormalizedUsage>& b) {
  if (a.ok() != b.ok()) return false;
  return a.ok() ? SameCounts(*a, *b) : a.status() == b.status();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto provider = static_cast<cachewatch::v1::Provider>(data[0]);
  const std::string_view json(reinterpret_cast<const char*>(data) + 1,
                              size - 1);

  const absl::StatusOr<NormalizedUsage> result =
      cachewatch::NormalizeRawUsage(provider, json);
  FUZZ_CHECK(SameResult(result, cachewatch::NormalizeRawUsage(provider, json)));
  bool malformed = false;
  if (!result.ok()) {
    FUZZ_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
    const absl::string_view message = result.status().message();
    FUZZ_CHECK(absl::StartsWith(message, "raw_usage_json: "));
    if (absl::StartsWith(message, kMalformed)) {
      malformed = true;
      size_t byte = 0;
      FUZZ_CHECK(absl::SimpleAtoi(message.substr(kMalformed.size()), &byte));
      FUZZ_CHECK(byte >= 1 && byte <= json.size() + 1);
    }
  } else {
    FUZZ_CHECK(cachewatch::ValidateNormalizedUsage(*result).ok());
    const int64_t prompt_total = cachewatch::PromptTotalTokens(*result);
    FUZZ_CHECK(prompt_total >= 0 && prompt_total <= 3 * kMaxTokenCount);
  }

  // Spelling invariance: the same value written compactly.
  const nlohmann::json value =
      nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  const bool parsed = cachewatch::v1::Provider_IsValid(provider) &&
                      provider != cachewatch::v1::PROVIDER_UNSPECIFIED &&
                      json.size() <= kMaxRawUsageJsonBytes;
  if (parsed) FUZZ_CHECK(malformed == value.is_discarded());
  if (value.is_discarded()) return 0;
  const std::string compact = value.dump();
  if (compact.size() > kMaxRawUsageJsonBytes) return 0;
  const absl::StatusOr<NormalizedUsage> respelled =
      cachewatch::NormalizeRawUsage(provider, compact);
  FUZZ_CHECK(result.ok() == respelled.ok());
  if (result.ok()) FUZZ_CHECK(SameCounts(*result, *respelled));
  return 0;
}
