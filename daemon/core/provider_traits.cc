#include "daemon/core/provider_traits.h"

#include <array>
#include <string>

#include "daemon/util/enum_name.h"

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

}  // namespace

ProviderTraits TraitsFor(v1::Provider provider, std::string_view model) {
  ProviderTraits traits;
  switch (provider) {
    case v1::PROVIDER_ANTHROPIC:
    case v1::PROVIDER_BEDROCK:
      traits.reports_cache_writes = true;
      traits.min_cacheable_tokens = AnthropicMinimum(model);
      traits.lookback_blocks = 20;
      break;
    case v1::PROVIDER_DASHSCOPE:
      traits.reports_cache_writes = true;
      traits.min_cacheable_tokens = 1024;
      traits.lookback_blocks = 20;
      break;
    case v1::PROVIDER_OPENAI:
      traits.min_cacheable_tokens = 1024;
      traits.noise_floor_tokens = 128;
      break;
    case v1::PROVIDER_GEMINI:
      traits.min_cacheable_tokens = 1024;
      break;
    case v1::PROVIDER_DEEPSEEK:
      traits.min_cacheable_tokens = 64;
      traits.noise_floor_tokens = 64;
      break;
    case v1::PROVIDER_KIMI:
      traits.min_cacheable_tokens = 256;
      traits.noise_floor_tokens = 256;
      break;
    default:
      break;
  }
  return traits;
}

std::string_view ProviderName(v1::Provider provider) {
  // EnumText of each value, made once; the views stay valid.
  static const std::array<std::string, v1::Provider_ARRAYSIZE> kNames = [] {
    std::array<std::string, v1::Provider_ARRAYSIZE> names;
    for (int value = 0; value < v1::Provider_ARRAYSIZE; ++value) {
      names[value] = EnumText(static_cast<v1::Provider>(value), "unspecified");
    }
    return names;
  }();
  if (provider < 0 || provider >= v1::Provider_ARRAYSIZE) return kNames[0];
  return kNames[provider];
}

}  // namespace cachewatch
