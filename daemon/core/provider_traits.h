// Per-provider cache rules the classifier needs: whether cache writes are
// reported, the minimum cacheable prompt, the noise floor of cache reads, the
// default TTL and the breakpoint lookback window.
//
// The values and their use are documented in docs/CLASSIFICATION.md ("When
// is a turn a break"). Pure functions of their arguments; thread-safe.
#ifndef CACHEWATCH_DAEMON_CORE_PROVIDER_TRAITS_H_
#define CACHEWATCH_DAEMON_CORE_PROVIDER_TRAITS_H_

#include <cstdint>
#include <string_view>

#include "cachewatch/v1/snapshot.pb.h"

namespace cachewatch {

struct ProviderTraits {
  // True where the provider caches up to explicit breakpoints and reports
  // cache writes (Anthropic, Bedrock, DashScope explicit): what a turn leaves
  // in the cache is read + write. False where caching is automatic over the
  // whole prefix (OpenAI, Gemini, DeepSeek, Kimi): the whole prompt.
  bool reports_cache_writes = false;
  // Prompts shorter than this are never cached (silent no-op).
  int64_t min_cacheable_tokens = 1024;
  // Cache reads move in steps of this size; a smaller miss is noise.
  int64_t noise_floor_tokens = 0;
  // TTL when neither the request nor the response says otherwise.
  uint32_t default_ttl_seconds = 300;
  // How many message blocks a breakpoint looks back for an earlier cache
  // entry, counting itself; 0 when the provider has no such limit.
  int32_t lookback_blocks = 0;
};

// The traits of `provider`, with the minimum cacheable length refined by
// `model` where the provider documents per-model minimums (Anthropic).
ProviderTraits TraitsFor(v1::Provider provider, std::string_view model);

// Lower-case short name ("anthropic", "openai", ...), "unspecified" for 0.
std::string_view ProviderName(v1::Provider provider);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CORE_PROVIDER_TRAITS_H_
