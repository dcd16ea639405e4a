#include "daemon/core/turn.h"

#include <xxhash.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cachewatch {

std::string LaneKey::ToString() const {
  return absl::StrCat(agent, "/", session_id, "/", lane);
}

size_t LaneKeyHash::operator()(const LaneKey& key) const {
  const std::string joined =
      absl::StrCat(key.agent, "\x1f", key.session_id, "\x1f", key.lane);
  return XXH3_64bits(joined.data(), joined.size());
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
