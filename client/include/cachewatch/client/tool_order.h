// The tool-order policy: the order in which an agent sends its tools, made
// independent of the order in which they were registered (MCP discovery,
// deferred reveals and reconnects register in racy order; a reordered tool
// list breaks the provider's prompt cache).
//
// Visibility comes first. With DeferredTools::kHide (what a model request
// carries) a tool with should_defer is left out unless it has always_load or
// was revealed; with DeferredTools::kInclude every tool takes part.
//
// Then the order, one of:
//   - lexicographic (the default): by name compared as UTF-16 code units,
//     JavaScript's `<` on strings, never locale-dependent; display_name
//     breaks ties between tools with the same name, and tools equal in both
//     keep their relative input order. No tool is ever dropped.
//   - explicit: a toolOrder list of names with exactly one kToolOrderRest
//     entry. A listed tool takes its listed position (a listed tool that is
//     hidden takes none; tools sharing a listed name are ordered as above);
//     every other tool goes where the rest entry stands, in lexicographic
//     order among themselves.
//
// Errors (absl::InvalidArgumentError, naming the offending tool or entry):
//   - from ToolOrder::Explicit, reading the list front to back: a second rest
//     entry, a name listed twice, and at the end no rest entry (an empty
//     list has none); an entry that is not valid UTF-8;
//   - from Apply, before anything is sorted: first, in input order, a tool
//     with no name, a name that is not valid UTF-8, or the rest entry's name
//     (hidden tools included); then, in list order, a listed name that no
//     given tool has (a hidden deferred tool counts: it may be listed).
// These checks run on every Apply because the tool set changes at any time;
// an agent should treat them as configuration errors.
//
// Thread-safe: a ToolOrder is immutable once made.

#ifndef CACHEWATCH_CLIENT_TOOL_ORDER_H_
#define CACHEWATCH_CLIENT_TOOL_ORDER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace cachewatch::client {

// The rest entry of an explicit toolOrder: where the unlisted tools go. No
// tool may have this name.
inline constexpr char kToolOrderRest[] = "<unlisted-tools>";

// One tool as the agent registered it.
struct Tool {
  // Required. The name the provider sees (the declaration's "name").
  std::string name{};
  // Optional. Breaks ties between tools with the same name. Default: "".
  std::string display_name{};
  // The whole tool definition as JSON text, as sent to the provider; its
  // canonical form is hashed into the snapshot. Not used for ordering.
  std::string definition{};
  // Whether the tool is deferred: not sent until revealed. Default: false.
  bool should_defer = false;
  // Whether the tool is sent even when deferred. Default: false.
  bool always_load = false;
  // Whether a deferred tool has been revealed (e.g. by a tool search) and is
  // now sent. Default: false.
  bool revealed = false;
};

// Whether deferred tools that are neither revealed nor always_load take part.
enum class DeferredTools {
  kHide,     // Left out, as from a model request.
  kInclude,  // Included and ordered with the others.
};

class ToolOrder {
 public:
  // The lexicographic policy.
  ToolOrder() = default;

  // The explicit policy for the toolOrder list `entries`; fails if the list
  // is malformed (see the file comment).
  static absl::StatusOr<ToolOrder> Explicit(std::vector<std::string> entries);

  // Whether this is an explicit policy.
  bool is_explicit() const { return !entries_.empty(); }

  // Returns the indices into `tools` of the tools to send, in order.
  absl::StatusOr<std::vector<size_t>> Apply(
      absl::Span<const Tool> tools,
      DeferredTools deferred = DeferredTools::kHide) const;

 private:
  std::vector<std::string> entries_;  // Empty for the lexicographic policy.
  // Each entry's position in entries_, the rest entry's under its name.
  absl::flat_hash_map<std::string, size_t> positions_;
};

}  // namespace cachewatch::client

#endif  // CACHEWATCH_CLIENT_TOOL_ORDER_H_
