#include "cachewatch/client/hash.h"

#include <xxhash.h>

#include <string>

#include "cachewatch/client/canonical_json.h"
#include "daemon/util/status_macros.h"

namespace cachewatch::client {

uint64_t HashBytes(std::string_view bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

absl::StatusOr<uint64_t> HashJson(std::string_view json_text) {
  CACHEWATCH_ASSIGN_OR_RETURN(const std::string canonical,
                              CanonicalizeJson(json_text));
  return HashBytes(canonical);
}

}  // namespace cachewatch::client
