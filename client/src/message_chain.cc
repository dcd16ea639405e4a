#include "cachewatch/client/message_chain.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cachewatch/client/canonical_json.h"
#include "cachewatch/client/hash.h"

namespace cachewatch::client {

uint64_t ChainHash(uint64_t previous, std::string_view canonical_block) {
  std::string input(8 + canonical_block.size(), '\0');
  for (int i = 0; i < 8; ++i) {
    input[i] = static_cast<char>((previous >> (8 * i)) & 0xFF);
  }
  input.replace(8, canonical_block.size(), canonical_block);
  return HashBytes(input);
}

absl::StatusOr<size_t> MessageChain::Update(
    absl::Span<const std::string> blocks) {
  std::vector<uint64_t> text_hashes;
  text_hashes.reserve(blocks.size());
  for (const std::string& block : blocks) {
    text_hashes.push_back(HashBytes(block));
  }
  size_t reused = 0;
  while (reused < blocks.size() && reused < text_hashes_.size() &&
         text_hashes[reused] == text_hashes_[reused]) {
    ++reused;
  }
  std::vector<uint64_t> tail;  // The chain from block `reused` on.
  tail.reserve(blocks.size() - reused);
  uint64_t previous = reused == 0 ? 0 : chain_[reused - 1];
  for (size_t i = reused; i < blocks.size(); ++i) {
    absl::StatusOr<std::string> canonical = CanonicalizeJson(blocks[i]);
    if (!canonical.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "message block ", i, ": ", canonical.status().message()));
    }
    previous = ChainHash(previous, *canonical);
    tail.push_back(previous);
  }
  text_hashes_ = std::move(text_hashes);
  chain_.resize(reused);
  chain_.insert(chain_.end(), tail.begin(), tail.end());
  return reused;
}

}  // namespace cachewatch::client
