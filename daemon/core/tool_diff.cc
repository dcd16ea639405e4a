#include "daemon/core/tool_diff.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace cachewatch {
namespace {

// A tool's identity within one list: its name and which occurrence of that
// name it is (0 for the first).
struct ToolKey {
  std::string_view name;
  int occurrence;
  bool operator==(const ToolKey&) const = default;
};

struct ToolKeyHash {
  size_t operator()(const ToolKey& key) const {
    return std::hash<std::string_view>()(key.name) * 31 + key.occurrence;
  }
};

std::vector<ToolKey> KeysOf(const ToolList& tools) {
  std::unordered_map<std::string_view, int> seen;
  std::vector<ToolKey> keys;
  keys.reserve(tools.size());
  for (const v1::ToolRef& tool : tools) {
    keys.push_back({tool.name(), seen[tool.name()]++});
  }
  return keys;
}

int32_t FirstChangedIndex(const ToolList& before, const ToolList& after) {
  const int common = std::min(before.size(), after.size());
  for (int i = 0; i < common; ++i) {
    if (before[i].name() != after[i].name() ||
        before[i].schema_hash() != after[i].schema_hash()) {
      return i;
    }
  }
  return before.size() == after.size() ? -1 : common;
}

// Returns which positions of `sequence` lie on one longest strictly
// increasing subsequence.
std::vector<bool> OnLongestIncreasingRun(const std::vector<int>& sequence) {
  std::vector<int> tail_index;  // tail_index[k]: end of best run of k+1.
  std::vector<int> parent(sequence.size(), -1);
  for (size_t i = 0; i < sequence.size(); ++i) {
    auto it = std::lower_bound(
        tail_index.begin(), tail_index.end(), sequence[i],
        [&](int index, int value) { return sequence[index] < value; });
    if (it != tail_index.begin()) parent[i] = *(it - 1);
    if (it == tail_index.end()) {
      tail_index.push_back(static_cast<int>(i));
    } else {
      *it = static_cast<int>(i);
    }
  }
  std::vector<bool> on_run(sequence.size(), false);
  for (int i = tail_index.empty() ? -1 : tail_index.back(); i >= 0;
       i = parent[i]) {
    on_run[i] = true;
  }
  return on_run;
}

void AppendOnce(const std::vector<std::string>& names,
                std::unordered_set<std::string>& seen,
                std::vector<std::string>& out) {
  for (const std::string& name : names) {
    if (seen.insert(name).second) out.push_back(name);
  }
}

}  // namespace

std::vector<std::string> ToolDiff::ChangedNames() const {
  std::unordered_set<std::string> seen;
  std::vector<std::string> names;
  AppendOnce(reordered, seen, names);
  AppendOnce(schema_changed, seen, names);
  AppendOnce(added, seen, names);
  AppendOnce(removed, seen, names);
  return names;
}

ToolDiff DiffTools(const ToolList& before, const ToolList& after) {
  ToolDiff diff;
  diff.first_changed_index = FirstChangedIndex(before, after);
  if (diff.empty()) return diff;

  const std::vector<ToolKey> before_keys = KeysOf(before);
  const std::vector<ToolKey> after_keys = KeysOf(after);
  std::unordered_map<ToolKey, int, ToolKeyHash> before_index;
  for (size_t i = 0; i < before_keys.size(); ++i) {
    before_index.emplace(before_keys[i], static_cast<int>(i));
  }

  // Tools kept by both lists, in `after` order, as their `before` index.
  std::vector<int> kept_before_index;
  std::vector<int> kept_after_index;
  std::unordered_set<int> kept;
  for (size_t i = 0; i < after_keys.size(); ++i) {
    auto it = before_index.find(after_keys[i]);
    if (it == before_index.end()) {
      diff.added.push_back(after[i].name());
      continue;
    }
    kept.insert(it->second);
    kept_before_index.push_back(it->second);
    kept_after_index.push_back(static_cast<int>(i));
    if (before[it->second].schema_hash() != after[i].schema_hash()) {
      diff.schema_changed.push_back(after[i].name());
    }
  }
  for (size_t i = 0; i < before_keys.size(); ++i) {
    if (!kept.contains(static_cast<int>(i))) {
      diff.removed.push_back(before[i].name());
    }
  }
  const std::vector<bool> in_order = OnLongestIncreasingRun(kept_before_index);
  for (size_t k = 0; k < in_order.size(); ++k) {
    if (!in_order[k])
      diff.reordered.push_back(after[kept_after_index[k]].name());
  }
  return diff;
}

}  // namespace cachewatch
