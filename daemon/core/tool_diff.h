// Diff of two ordered tool lists, as two consecutive turns of a lane sent
// them.
//
// A tool is identified by its name and, when a list carries the same name
// more than once, by which occurrence of that name it is. Tools present in
// both lists are compared by schema hash; their relative order is compared
// with a longest increasing subsequence, so the tools reported as reordered
// are the fewest that explain the new order.
//
// Pure function; thread-safe.
#ifndef CACHEWATCH_DAEMON_CORE_TOOL_DIFF_H_
#define CACHEWATCH_DAEMON_CORE_TOOL_DIFF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cachewatch/v1/snapshot.pb.h"
#include "google/protobuf/repeated_field.h"

namespace cachewatch {

using ToolList = google::protobuf::RepeatedPtrField<v1::ToolRef>;

struct ToolDiff {
  std::vector<std::string> added;    // In `after` only, in `after` order.
  std::vector<std::string> removed;  // In `before` only, in `before` order.
  // Tools kept by both lists whose relative order changed, in `after` order.
  std::vector<std::string> reordered;
  // Tools kept by both lists whose schema hash changed, in `after` order.
  std::vector<std::string> schema_changed;
  // First index where the lists differ (name or hash), -1 when equal.
  int32_t first_changed_index = -1;

  bool empty() const { return first_changed_index < 0; }
  // Every name above once, in the order reordered, schema_changed, added,
  // removed.
  std::vector<std::string> ChangedNames() const;
};

ToolDiff DiffTools(const ToolList& before, const ToolList& after);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CORE_TOOL_DIFF_H_
