#include "daemon/core/provider_table.h"

#include <array>

namespace cachewatch {
namespace {

struct ModelMinimum {
  std::string_view model_fragment;
  int64_t min_tokens;
};

// Anthropic's per-model minimum cacheable prefix. More specific fragments
// first: the first fragment contained in the model id wins.
constexpr std::array<ModelMinimum, 16> kAnthropicMinimums = {{
    {"opus-5", 512},
    {"fable-5", 512},
    {"mythos-5", 512},
    {"opus-4-8", 1024},
    {"opus-4-7", 2048},
    {"opus-4-6", 4096},
    {"opus-4-5", 4096},
    {"opus-4-1", 1024},
    {"opus-4", 1024},
    {"sonnet-5", 1024},
    {"sonnet-4-6", 1024},
    {"sonnet-4-5", 1024},
    {"sonnet-4", 1024},
    {"haiku-4-5", 4096},
    {"3-5-haiku", 2048},
    {"haiku-3-5", 2048},
}};

int64_t AnthropicMinimum(std::string_view model) {
  for (const ModelMinimum& entry : kAnthropicMinimums) {
    if (model.find(entry.model_fragment) != std::string_view::npos) {
      return entry.min_tokens;
    }
  }
  return 1024;
}

// Explicit breakpoints, cache writes reported, a 20-block lookback.
constexpr ProviderTraits kBreakpointCaching = {.reports_cache_writes = true,
                                               .lookback_blocks = 20};

const std::array<ProviderRow, 7> kProviders = {{
    {v1::PROVIDER_ANTHROPIC, "anthropic", kBreakpointCaching, AnthropicMinimum,
     NormalizeAnthropic},
    {v1::PROVIDER_BEDROCK, "bedrock", kBreakpointCaching, AnthropicMinimum,
     NormalizeBedrock},
    {v1::PROVIDER_OPENAI,
     "openai",
     {.min_cacheable_tokens = 1024, .noise_floor_tokens = 128},
     nullptr,
     NormalizeOpenAi},
    {v1::PROVIDER_GEMINI,
     "gemini",
     {.min_cacheable_tokens = 1024},
     nullptr,
     NormalizeGemini},
    {v1::PROVIDER_DASHSCOPE,
     "dashscope",
     {.reports_cache_writes = true,
      .min_cacheable_tokens = 1024,
      .lookback_blocks = 20},
     nullptr,
     NormalizeDashScope},
    {v1::PROVIDER_DEEPSEEK,
     "deepseek",
     {.min_cacheable_tokens = 64, .noise_floor_tokens = 64},
     nullptr,
     NormalizeDeepSeek},
    {v1::PROVIDER_KIMI,
     "kimi",
     {.min_cacheable_tokens = 256, .noise_floor_tokens = 256},
     nullptr,
     NormalizeKimi},
}};

}  // namespace

std::span<const ProviderRow> ProviderRows() { return kProviders; }

const ProviderRow* FindProvider(v1::Provider provider) {
  for (const ProviderRow& row : kProviders) {
    if (row.provider == provider) return &row;
  }
  return nullptr;
}

}  // namespace cachewatch
