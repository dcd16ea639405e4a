// The client gate: who may record, and how fast. Checks a call's bearer
// token (when tokens are configured) and charges the caller's token bucket
// (when a rate limit is configured).
//
//  - Tokens come from a file, one per line (blank lines and lines starting
//    with '#' ignored). A call must carry "authorization: Bearer <token>";
//    tokens are compared in constant time. A missing or wrong token is
//    UNAUTHENTICATED.
//  - The rate limit is per client: the token when tokens are in use, else
//    the peer address. A client over its rate gets RESOURCE_EXHAUSTED. At
//    most 100,000 clients are tracked; the idlest are forgotten first.
//
// Thread-safe.
#ifndef CACHEWATCH_DAEMON_RECEIVER_GRPC_CLIENT_GATE_H_
#define CACHEWATCH_DAEMON_RECEIVER_GRPC_CLIENT_GATE_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cachewatch {

struct ClientGateOptions {
  // Accepted bearer tokens; empty: no authentication.
  std::vector<std::string> tokens;
  // Records per second per client, with a burst of the same size; 0: no
  // limit.
  double records_per_second = 0;
};

class ClientGate {
 public:
  explicit ClientGate(ClientGateOptions options);

  // Reads tokens from `path`. NotFound / InvalidArgument (no token in it).
  static absl::StatusOr<std::vector<std::string>> ReadTokenFile(
      const std::string& path);

  // Checks the "authorization" metadata value (empty when absent).
  // Returns the client's identity for Admit: the token, else `peer`.
  absl::StatusOr<std::string> Authenticate(const std::string& authorization,
                                           const std::string& peer) const;

  // Charges `records` to `client` at daemon time `now_us`.
  absl::Status Admit(const std::string& client, int records, int64_t now_us);

  bool authenticates() const { return !options_.tokens.empty(); }

 private:
  struct Bucket {
    double tokens = 0;
    int64_t updated_us = 0;
  };

  const ClientGateOptions options_;
  std::mutex mutex_;
  std::unordered_map<std::string, Bucket> buckets_;  // Guarded by mutex_.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_GRPC_CLIENT_GATE_H_
