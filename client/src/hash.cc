#include "cachewatch/client/hash.h"

#include <xxhash.h>

#include <string>

#include "cachewatch/client/canonical_json.h"

namespace cachewatch::client {

uint64_t HashBytes(std::string_view bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

absl::StatusOr<uint64_t> HashJson(std::string_view json_text) {
  absl::StatusOr<std::string> canonical = CanonicalizeJson(json_text);
  if (!canonical.ok()) return canonical.status();
  return HashBytes(*canonical);
}

}  // namespace cachewatch::client
