#include "daemon/core/turn.h"

#include <xxhash.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cachewatch {

std::string LaneKey::ToString() const {
  return absl::StrCat(agent, "/", session_id, "/", lane);
}

size_t LaneKeyHash::operator()(const LaneKey& key) const {
  // XXH3 of "agent\x1fsession_id\x1flane", joined in a buffer on the stack
  // when it fits (every record's shard and lane lookup hashes its key: the
  // joined string's allocation was ~1.5 % of a Record stream's samples).
  const size_t size =
      key.agent.size() + key.session_id.size() + key.lane.size() + 2;
  char buffer[256];
  if (size > sizeof(buffer)) {
    const std::string joined =
        absl::StrCat(key.agent, "\x1f", key.session_id, "\x1f", key.lane);
    return XXH3_64bits(joined.data(), joined.size());
  }
  char* out = buffer;
  std::memcpy(out, key.agent.data(), key.agent.size());
  out += key.agent.size();
  *out++ = '\x1f';
  std::memcpy(out, key.session_id.data(), key.session_id.size());
  out += key.session_id.size();
  *out++ = '\x1f';
  std::memcpy(out, key.lane.data(), key.lane.size());
  return XXH3_64bits(buffer, size);
}

const google::protobuf::RepeatedPtrField<v1::ToolRef>& ToolsOf(
    const Turn& turn) {
  return turn.tools != nullptr ? *turn.tools : turn.snapshot->tools();
}

absl::Span<const uint64_t> MessageChainOf(const Turn& turn) {
  if (!turn.message_chain.empty()) return turn.message_chain;
  const auto& chain = turn.snapshot->message_chain();
  return absl::MakeConstSpan(chain.data(), static_cast<size_t>(chain.size()));
}

std::string BreakIdFor(const LaneKey& key, std::string_view request_id) {
  const std::string joined =
      absl::StrCat(key.agent, "\x1f", key.session_id, "\x1f", key.lane, "\x1f",
                   std::string(request_id));
  return absl::StrFormat("%016x", XXH3_64bits(joined.data(), joined.size()));
}

uint64_t RequestIdHash(std::string_view request_id) {
  return XXH3_64bits(request_id.data(), request_id.size());
}

}  // namespace cachewatch
