// libFuzzer target: the client's canonical JSON and its hash
// (client/include/cachewatch/client/canonical_json.h, hash.h), and the
// proxy's writer of it from simdjson's document
// (daemon/receiver/proxy/canonical_element.h).
//
// Input: the JSON text, as is.
//
// Invariants checked, beyond "no crash, no leak, no undefined behaviour":
//   - an error is InvalidArgument;
//   - canonicalisation is a fixed point: the canonical form is accepted and
//     is its own canonical form (unless it outgrew kMaxCanonicalJsonBytes:
//     "1e20" is 21 bytes in canonical form);
//   - HashJson fails exactly when CanonicalizeJson does, and otherwise is the
//     XXH3-64 of the canonical form, the same on every call;
//   - a text CanonicalizeJson accepts, the proxy's JsonDocument reads and
//     CanonicalElement writes byte for byte as CanonicalizeJson does.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/client/canonical_json.h"
#include "cachewatch/client/hash.h"
#include "daemon/receiver/proxy/canonical_element.h"
#include "daemon/receiver/proxy/json_document.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using cachewatch::client::CanonicalizeJson;
  using cachewatch::client::HashBytes;
  using cachewatch::client::HashJson;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const absl::StatusOr<std::string> canonical = CanonicalizeJson(text);
  const absl::StatusOr<uint64_t> hash = HashJson(text);
  FUZZ_CHECK(canonical.ok() == hash.ok());
  if (!canonical.ok()) {
    FUZZ_CHECK(canonical.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(hash.status() == canonical.status());
    return 0;
  }

  if (canonical->size() <= cachewatch::client::kMaxCanonicalJsonBytes) {
    const absl::StatusOr<std::string> again = CanonicalizeJson(*canonical);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(*again == *canonical);
  }

  const absl::StatusOr<cachewatch::JsonDocument> document =
      cachewatch::JsonDocument::Parse(
          text, cachewatch::client::kMaxCanonicalJsonDepth);
  FUZZ_CHECK(document.ok());
  const absl::StatusOr<std::string> from_document =
      cachewatch::CanonicalElement(document->root());
  FUZZ_CHECK(from_document.ok() && *from_document == *canonical);

  FUZZ_CHECK(*hash == HashBytes(*canonical));
  const absl::StatusOr<uint64_t> hash_again = HashJson(text);
  FUZZ_CHECK(hash_again.ok() && *hash_again == *hash);
  return 0;
}
