#include "cachewatch/client/tool_order.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "utf8.h"

namespace cachewatch::client {
namespace {

bool Visible(const Tool& tool, DeferredTools deferred) {
  return deferred == DeferredTools::kInclude || !tool.should_defer ||
         tool.always_load || tool.revealed;
}

}  // namespace

absl::StatusOr<ToolOrder> ToolOrder::Explicit(
    std::vector<std::string> entries) {
  ToolOrder order;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& entry = entries[i];
    if (!internal::IsValidUtf8(entry)) {
      return absl::InvalidArgumentError(
          absl::StrCat("toolOrder entry #", i, " is not valid UTF-8"));
    }
    if (!order.positions_.emplace(entry, i).second) {
      return absl::InvalidArgumentError(
          entry == kToolOrderRest
              ? absl::StrCat("toolOrder has more than one \"", kToolOrderRest,
                             "\" rest entry (#", order.positions_[entry],
                             " and #", i, ")")
              : absl::StrCat("toolOrder lists \"", entry, "\" twice (#",
                             order.positions_[entry], " and #", i, ")"));
    }
  }
  if (!order.positions_.contains(kToolOrderRest)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "toolOrder has no \"", kToolOrderRest,
        "\" rest entry to place the unlisted tools; add it exactly once"));
  }
  order.entries_ = std::move(entries);
  return order;
}

absl::StatusOr<std::vector<size_t>> ToolOrder::Apply(
    absl::Span<const Tool> tools, DeferredTools deferred) const {
  for (size_t i = 0; i < tools.size(); ++i) {
    const Tool& tool = tools[i];
    if (tool.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tool #", i, " has no name"));
    }
    if (!internal::IsValidUtf8(tool.name) ||
        !internal::IsValidUtf8(tool.display_name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tool #", i, ": name or display name is not valid UTF-8"));
    }
    if (tool.name == kToolOrderRest) {
      return absl::InvalidArgumentError(
          absl::StrCat("tool #", i, " is named \"", kToolOrderRest,
                       "\", which is reserved for the toolOrder rest entry"));
    }
  }
  if (is_explicit()) {
    absl::flat_hash_set<absl::string_view> names;
    for (const Tool& tool : tools) names.insert(tool.name);
    for (const std::string& entry : entries_) {
      if (entry != kToolOrderRest && !names.contains(entry)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "toolOrder entry \"", entry, "\" names no registered tool"));
      }
    }
  }

  // Sort by (position in toolOrder, name, display name).
  const size_t rest = is_explicit() ? positions_.at(kToolOrderRest) : 0;
  struct Key {
    size_t position;
    size_t index;
  };
  std::vector<Key> keys;
  for (size_t i = 0; i < tools.size(); ++i) {
    if (!Visible(tools[i], deferred)) continue;
    const auto listed = positions_.find(tools[i].name);
    keys.push_back({listed == positions_.end() ? rest : listed->second, i});
  }
  std::stable_sort(keys.begin(), keys.end(), [&](const Key& a, const Key& b) {
    if (a.position != b.position) return a.position < b.position;
    const Tool& x = tools[a.index];
    const Tool& y = tools[b.index];
    if (int c = internal::CompareUtf16(x.name, y.name); c != 0) return c < 0;
    return internal::CompareUtf16(x.display_name, y.display_name) < 0;
  });
  std::vector<size_t> order;
  order.reserve(keys.size());
  for (const Key& key : keys) order.push_back(key.index);
  return order;
}

}  // namespace cachewatch::client
