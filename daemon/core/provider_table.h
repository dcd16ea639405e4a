// The one table of the providers the daemon knows: each row joins a
// v1::Provider value to its short name (metric labels, stored columns, the
// --ttl flag), its cache rules (provider_traits.h) and its usage normalizer
// (provider_usage.h). Adding a provider is one row here, its normalizer and
// their tests; TraitsFor, ProviderName, NormalizeRawUsage and the config read
// the table.
//
// Constant data; thread-safe.
#ifndef CACHEWATCH_DAEMON_CORE_PROVIDER_TABLE_H_
#define CACHEWATCH_DAEMON_CORE_PROVIDER_TABLE_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "cachewatch/v1/snapshot.pb.h"
#include "daemon/core/provider_traits.h"
#include "daemon/core/provider_usage.h"

namespace cachewatch {

struct ProviderRow {
  v1::Provider provider;
  // Lower case, the enum value's name without "PROVIDER_".
  std::string_view name;
  // The cache rules whatever the model.
  ProviderTraits traits;
  // Refines traits.min_cacheable_tokens by model id where the provider
  // documents per-model minimums; nullptr where it does not.
  int64_t (*min_cacheable_tokens_for_model)(std::string_view model);
  UsageNormalizer normalize;
};

// Every row, in enum order.
std::span<const ProviderRow> ProviderRows();

// The row of `provider`; nullptr for PROVIDER_UNSPECIFIED and values without
// a row.
const ProviderRow* FindProvider(v1::Provider provider);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CORE_PROVIDER_TABLE_H_
