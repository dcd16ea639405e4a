// The hashes a snapshot carries. Every hash is XXH3-64 with seed 0, and the
// same input bytes give the same hash in every client language:
//   - a prompt (the whole system prompt, or one named section): the UTF-8
//     bytes of its text, as is;
//   - a JSON value (a tool definition, the cache-keying request options): its
//     canonical JSON (canonical_json.h);
//   - the message chain: see message_chain.h.
//
// Thread-safe: these are pure functions.

#ifndef CACHEWATCH_CLIENT_HASH_H_
#define CACHEWATCH_CLIENT_HASH_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace cachewatch::client {

// XXH3-64 (seed 0) of `bytes`.
uint64_t HashBytes(std::string_view bytes);

// XXH3-64 of the canonical form of the JSON text `json_text`. Fails as
// CanonicalizeJson does.
absl::StatusOr<uint64_t> HashJson(std::string_view json_text);

}  // namespace cachewatch::client

#endif  // CACHEWATCH_CLIENT_HASH_H_
