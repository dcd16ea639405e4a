// The message chain: for each content block of a request's messages, in
// order, the running hash of all blocks up to and including it. Two requests
// share a cacheable message prefix exactly as far as their chains agree.
//
// The contract, the same in every client language (tests/vectors/
// message_chain.json):
//
//   chain[i] = XXH3-64(LE64(chain[i-1]) || CanonicalJson(block[i])), seed 0
//
// where chain[-1] = 0, LE64(h) is h as 8 bytes, least significant first, ||
// is concatenation, and CanonicalJson is canonical_json.h (RFC 8785). A block
// is one JSON value of the agent's choosing per content block, in prompt
// order; the provider's content-block object with the message's role added
// (e.g. {"role":"user","type":"text","text":"..."}) makes role changes count.

#ifndef CACHEWATCH_CLIENT_MESSAGE_CHAIN_H_
#define CACHEWATCH_CLIENT_MESSAGE_CHAIN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace cachewatch::client {

// One step of the chain: XXH3-64 of LE64(previous) || canonical_block, where
// `canonical_block` is already canonical JSON. Thread-safe.
uint64_t ChainHash(uint64_t previous, std::string_view canonical_block);

// The chain of a conversation that grows turn by turn. It remembers the
// blocks it has hashed (by an XXH3-64 of each block's text as given), so a
// turn that appends N blocks canonicalizes and chains only those N; a block
// already seen costs one XXH3 pass over its text. When the history given
// differs from the remembered one (compaction, truncation, an edited block),
// the chain is recomputed from the first differing block.
//
// Not thread-safe: one per conversation, used by one thread at a time.
class MessageChain {
 public:
  MessageChain() = default;

  // Makes the chain that of `blocks`, each a JSON text. Returns the number
  // of leading blocks whose hashes were reused (the index of the first block
  // hashed anew; blocks.size() if none was). If a block is not canonicalizable
  // JSON, returns absl::InvalidArgumentError naming its index and leaves the
  // chain unchanged.
  absl::StatusOr<size_t> Update(absl::Span<const std::string> blocks);

  // The chain of the last successful Update, one hash per block.
  const std::vector<uint64_t>& hashes() const { return chain_; }

 private:
  std::vector<uint64_t> text_hashes_;  // XXH3-64 of each block's text.
  std::vector<uint64_t> chain_;
};

}  // namespace cachewatch::client

#endif  // CACHEWATCH_CLIENT_MESSAGE_CHAIN_H_
