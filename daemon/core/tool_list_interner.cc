#include "daemon/core/tool_list_interner.h"

// For XXH3_state_t on the stack (streaming without an allocation).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>

namespace cachewatch {

uint64_t ToolListInterner::Hash(const ToolList& tools) {
  // Streamed: no string of the whole list is built.
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  for (const v1::ToolRef& tool : tools) {
    const uint64_t size = tool.name().size();
    const uint64_t schema_hash = tool.schema_hash();
    XXH3_64bits_update(&state, &size, sizeof(size));
    XXH3_64bits_update(&state, tool.name().data(), tool.name().size());
    XXH3_64bits_update(&state, &schema_hash, sizeof(schema_hash));
  }
  return XXH3_64bits_digest(&state);
}

bool ToolListInterner::Equal(const ToolList& a, const ToolList& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const v1::ToolRef& x, const v1::ToolRef& y) {
                      return x.schema_hash() == y.schema_hash() &&
                             x.name() == y.name();
                    });
}

std::shared_ptr<const ToolList> ToolListInterner::Intern(
    const ToolList& tools) {
  std::vector<std::weak_ptr<const ToolList>>& bucket = lists_[Hash(tools)];
  for (auto it = bucket.begin(); it != bucket.end();) {
    std::shared_ptr<const ToolList> list = it->lock();
    if (list == nullptr) {
      it = bucket.erase(it);
    } else if (Equal(*list, tools)) {
      return list;
    } else {
      ++it;
    }
  }
  auto list = std::make_shared<const ToolList>(tools);
  bucket.push_back(list);
  return list;
}

std::shared_ptr<const ToolList> ToolListInterner::Intern(
    const ToolList& tools, const std::shared_ptr<const ToolList>& known) {
  // What Intern(tools) would return: `known` is alive, so it is the list
  // its bucket holds for its content.
  if (known != nullptr && Equal(*known, tools)) return known;
  return Intern(tools);
}

void ToolListInterner::Sweep() {
  for (auto it = lists_.begin(); it != lists_.end();) {
    std::erase_if(it->second, [](const std::weak_ptr<const ToolList>& list) {
      return list.expired();
    });
    it = it->second.empty() ? lists_.erase(it) : std::next(it);
  }
}

size_t ToolListInterner::size() const {
  size_t lists = 0;
  for (const auto& [hash, bucket] : lists_) lists += bucket.size();
  return lists;
}

}  // namespace cachewatch
