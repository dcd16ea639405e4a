// SnapshotBuilder: turns what an agent is about to send to a model into the
// cachewatch.v1.Snapshot it reports before the request. Only names, hashes
// and counts go into the snapshot, never prompt text (hash.h says what each
// hash covers).
//
// Typical use, one builder per agent loop:
//
//   cachewatch::client::SnapshotBuilder builder(
//       {.agent = "my-agent", .session_id = session_id});
//   absl::StatusOr<cachewatch::v1::Snapshot> snapshot = builder.Build({
//       .request_id = request_id,
//       .provider = cachewatch::v1::PROVIDER_ANTHROPIC,
//       .model = "claude-sonnet-4-5",
//       .system_prompt = system_prompt,
//       .tools = tools,
//       .message_blocks = blocks,
//   });
//
// The builder remembers across turns what it has hashed: a tool definition
// whose text is unchanged costs one XXH3 pass instead of a canonicalization,
// and so does each message block already seen; a history that grew by N
// blocks canonicalizes and chains only those N (message_chain.h). Tools with
// the same names (and deferral flags) as on the last turn keep the last
// turn's order without sorting again, and a system prompt with the same
// XXH3 as the last turn's is not validated again. The tools are
// ordered by the builder's ToolOrder; send them to the provider in the same
// order (ToolOrder::Apply gives it).
//
// Build returns absl::InvalidArgumentError, and changes nothing it
// remembers, when a required field is missing or too long, a text is not
// valid UTF-8, the tool-order policy rejects the tools (tool_order.h), or a
// tool definition, the options or a message block is not canonicalizable
// JSON (canonical_json.h); the message names the culprit.
//
// Not thread-safe: use one builder per agent loop, from one thread at a time.

#ifndef CACHEWATCH_CLIENT_SNAPSHOT_BUILDER_H_
#define CACHEWATCH_CLIENT_SNAPSHOT_BUILDER_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cachewatch/client/message_chain.h"
#include "cachewatch/client/tool_order.h"
#include "cachewatch/v1/snapshot.pb.h"

namespace cachewatch::client {

// The identity of the agent loop a builder serves; fixed for its lifetime.
struct SnapshotBuilderOptions {
  // Required. The agent's name, at most 128 bytes.
  std::string agent{};
  // Required. The session id, at most 256 bytes.
  std::string session_id{};
  // Optional. The cache lineage ("main" when empty, a subagent's name,
  // "compaction"). Default: "".
  std::string lane{};
  // How tools are ordered. Default: lexicographic.
  ToolOrder tool_order{};
};

// A named part of the system prompt.
struct SystemSectionText {
  std::string_view name{};  // Required; stable across turns.
  std::string_view text{};
};

// What the agent is about to send. Views and spans are not owned and need
// only live through the Build call.
struct ModelRequest {
  // Required. Unique within the lane; pairs the snapshot with its usage.
  std::string_view request_id{};
  // When the request is sent. Default: now.
  std::optional<std::chrono::system_clock::time_point> time{};
  // Required. The provider whose cache rules apply.
  v1::Provider provider = v1::PROVIDER_UNSPECIFIED;
  // Required. The model id as sent.
  std::string_view model{};
  // The whole system prompt, as UTF-8 text.
  std::string_view system_prompt{};
  // Optional. The system prompt's named sections, in prompt order.
  absl::Span<const SystemSectionText> system_sections{};
  // Every registered tool, in any order; the builder filters deferred tools
  // and orders the rest (tool_order.h).
  absl::Span<const Tool> tools{};
  // Optional. The content blocks of the messages, in order, each a JSON text
  // (message_chain.h). Empty: no chain is reported.
  absl::Span<const std::string> message_blocks{};
  // Optional. The other cache-keying request options (betas, thinking,
  // effort, tool_choice, ...) as one JSON text. Empty: not reported.
  std::string_view options_json{};
  // Optional. The request's cache_control layout. Breakpoint indexes are
  // into the snapshot's tools (in the builder's order), the message blocks,
  // or the system sections; the builder fills each breakpoint's
  // blocks_after (left unset when the index is past its segment, or for a
  // system breakpoint when no sections are named).
  std::optional<v1::CacheControl> cache_control{};
  // Optional. Set when the agent knowingly resets its cache on this turn.
  v1::ExpectedDrop expected_drop = v1::EXPECTED_DROP_UNSPECIFIED;
};

class SnapshotBuilder {
 public:
  // What the builder had to compute rather than reuse, since it was made.
  struct Stats {
    uint64_t tool_definitions_canonicalized = 0;
    uint64_t message_blocks_canonicalized = 0;
  };

  explicit SnapshotBuilder(SnapshotBuilderOptions options);

  // Move-only: what a builder remembers belongs to one agent loop.
  SnapshotBuilder(const SnapshotBuilder&) = delete;
  SnapshotBuilder& operator=(const SnapshotBuilder&) = delete;
  SnapshotBuilder(SnapshotBuilder&&) = default;
  SnapshotBuilder& operator=(SnapshotBuilder&&) = default;

  // Returns the snapshot of `request`.
  absl::StatusOr<v1::Snapshot> Build(const ModelRequest& request);

  const Stats& stats() const { return stats_; }

 private:
  // What of a tool decides its place in the order.
  struct OrderKey {
    std::string name;
    std::string display_name;
    bool should_defer;
    bool always_load;
    bool revealed;
    bool operator==(const OrderKey&) const = default;
  };

  // The order of `tools`: the last successful Build's when the tools' order
  // keys are unchanged, else ToolOrder::Apply's. Sets *keys to the keys of
  // `tools` when it had to order them afresh.
  absl::StatusOr<std::vector<size_t>> Order(absl::Span<const Tool> tools,
                                            std::vector<OrderKey>* keys) const;

  SnapshotBuilderOptions options_;
  // The order keys of the last successful Build's tools, and their order.
  std::vector<OrderKey> order_keys_;
  std::vector<size_t> order_;
  // XXH3-64 of the last successful Build's (valid) system prompt.
  std::optional<uint64_t> system_hash_;
  // XXH3-64 of a tool definition's text → its schema hash, for the tools of
  // the last successful Build.
  absl::flat_hash_map<uint64_t, uint64_t> schema_hashes_;
  MessageChain chain_;
  Stats stats_;
};

}  // namespace cachewatch::client

#endif  // CACHEWATCH_CLIENT_SNAPSHOT_BUILDER_H_
