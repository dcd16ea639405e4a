#include "daemon/receiver/grpc/client_gate.h"

#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace cachewatch {
namespace {

constexpr size_t kMaxTrackedClients = 100000;
constexpr char kBearer[] = "Bearer ";

// Compares without an early exit, so the time taken does not reveal how
// much of a token was right.
bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  const size_t length = std::max(a.size(), b.size());
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < length; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0;
    const unsigned char y = i < b.size() ? b[i] : 0;
    difference |= x ^ y;
  }
  return difference == 0;
}

}  // namespace

ClientGate::ClientGate(ClientGateOptions options)
    : options_(std::move(options)) {}

absl::StatusOr<std::vector<std::string>> ClientGate::ReadTokenFile(
    const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat("token file ", path, ": cannot be read"));
  }
  std::vector<std::string> tokens;
  for (std::string line; std::getline(file, line);) {
    const std::string token(absl::StripAsciiWhitespace(line));
    if (!token.empty() && token[0] != '#') tokens.push_back(token);
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path, ": no token in it"));
  }
  return tokens;
}

absl::StatusOr<std::string> ClientGate::Authenticate(
    const std::string& authorization, const std::string& peer) const {
  if (options_.tokens.empty()) return peer;
  if (authorization.rfind(kBearer, 0) != 0) {
    return absl::UnauthenticatedError(
        "authorization: a bearer token is required");
  }
  const std::string presented = authorization.substr(sizeof(kBearer) - 1);
  bool known = false;
  for (const std::string& token : options_.tokens) {
    known |= ConstantTimeEquals(presented, token);
  }
  if (!known) return absl::UnauthenticatedError("authorization: unknown token");
  return presented;
}

absl::Status ClientGate::Admit(const std::string& client, int records,
                               int64_t now_us) {
  if (options_.records_per_second <= 0) return absl::OkStatus();
  const double burst = std::max(1.0, options_.records_per_second);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = buckets_.find(client);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxTrackedClients) {
      auto idlest = std::min_element(
          buckets_.begin(), buckets_.end(), [](const auto& a, const auto& b) {
            return a.second.updated_us < b.second.updated_us;
          });
      buckets_.erase(idlest);
    }
    it = buckets_.emplace(client, Bucket{burst, now_us}).first;
  }
  Bucket& bucket = it->second;
  bucket.tokens = std::min(
      burst, bucket.tokens +
                 options_.records_per_second *
                     static_cast<double>(now_us - bucket.updated_us) / 1e6);
  bucket.updated_us = now_us;
  if (bucket.tokens < records) {
    return absl::ResourceExhaustedError(
        absl::StrCat("rate limit: more than ", options_.records_per_second,
                     " records per second from this client"));
  }
  bucket.tokens -= records;
  return absl::OkStatus();
}

}  // namespace cachewatch
