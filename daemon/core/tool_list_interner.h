// Interns tool lists: lists with the same tools (names and schema hashes) in
// the same order share one immutable copy, so that lanes of agents of one
// kind, which send identical lists, hold a pointer each instead of a copy
// each (the daemon's memory per idle lane, docs/PERFORMANCE.md).
//
// A list lives as long as some holder keeps its pointer; the interner holds
// only weak references, and Sweep() forgets the dead ones.
//
// Not thread-safe: callers serialize access (each lane tracker shard owns
// one).
#ifndef CACHEWATCH_DAEMON_CORE_TOOL_LIST_INTERNER_H_
#define CACHEWATCH_DAEMON_CORE_TOOL_LIST_INTERNER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "daemon/core/tool_diff.h"

namespace cachewatch {

class ToolListInterner {
 public:
  ToolListInterner() = default;
  ToolListInterner(const ToolListInterner&) = delete;
  ToolListInterner& operator=(const ToolListInterner&) = delete;

  // The shared copy of `tools`: the one already interned when an equal list
  // is alive, else a new copy.
  std::shared_ptr<const ToolList> Intern(const ToolList& tools);
  // The same, given a list this interner returned before (`known`, may be
  // null) that the caller expects `tools` to equal (a lane's previous
  // baseline): returned without hashing `tools` when equal.
  std::shared_ptr<const ToolList> Intern(
      const ToolList& tools, const std::shared_ptr<const ToolList>& known);

  // Forgets lists no holder keeps any more.
  void Sweep();

  // Distinct lists interned and still alive (as of the last Sweep()).
  size_t size() const;

 private:
  static uint64_t Hash(const ToolList& tools);
  static bool Equal(const ToolList& a, const ToolList& b);

  // Hash of the list -> the lists with that hash.
  std::unordered_map<uint64_t, std::vector<std::weak_ptr<const ToolList>>>
      lists_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CORE_TOOL_LIST_INTERNER_H_
