#include "daemon/core/provider_traits.h"

#include "daemon/core/provider_table.h"

namespace cachewatch {

ProviderTraits TraitsFor(v1::Provider provider, std::string_view model) {
  const ProviderRow* row = FindProvider(provider);
  if (row == nullptr) return ProviderTraits();
  ProviderTraits traits = row->traits;
  if (row->min_cacheable_tokens_for_model != nullptr) {
    traits.min_cacheable_tokens = row->min_cacheable_tokens_for_model(model);
  }
  return traits;
}

std::string_view ProviderName(v1::Provider provider) {
  const ProviderRow* row = FindProvider(provider);
  return row == nullptr ? "unspecified" : row->name;
}

}  // namespace cachewatch
