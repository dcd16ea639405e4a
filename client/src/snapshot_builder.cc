#include "cachewatch/client/snapshot_builder.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "cachewatch/client/canonical_json.h"
#include "cachewatch/client/hash.h"
#include "utf8.h"

namespace cachewatch::client {
namespace {

// Fills each breakpoint's blocks_after, where the caller left it unset, from
// the length of its segment: the snapshot's tools, the message blocks, the
// named system sections (when there are any).
void SetBlocksAfter(v1::Snapshot& snapshot, size_t message_blocks) {
  for (v1::Breakpoint& breakpoint :
       *snapshot.mutable_cache_control()->mutable_breakpoints()) {
    if (breakpoint.has_blocks_after()) continue;
    size_t length = 0;
    switch (breakpoint.segment()) {
      case v1::PROMPT_SEGMENT_TOOLS:
        length = snapshot.tools_size();
        break;
      case v1::PROMPT_SEGMENT_SYSTEM:
        length = snapshot.system_sections_size();
        break;
      case v1::PROMPT_SEGMENT_MESSAGES:
        length = message_blocks;
        break;
      default:
        break;
    }
    if (breakpoint.index() < length) {
      breakpoint.set_blocks_after(length - 1 - breakpoint.index());
    }
  }
}

constexpr size_t kMaxAgentBytes = 128;
constexpr size_t kMaxSessionIdBytes = 256;

// Checks a text field: valid UTF-8, present if `required`, at most
// `max_bytes` long when max_bytes > 0.
absl::Status CheckText(absl::string_view field, std::string_view value,
                       bool required, size_t max_bytes = 0) {
  if (required && value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  }
  if (max_bytes > 0 && value.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " is ", value.size(), " bytes, more than ", max_bytes));
  }
  if (!internal::IsValidUtf8(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is not valid UTF-8"));
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const SnapshotBuilderOptions& options,
                          const ModelRequest& request) {
  for (absl::Status s : {
           CheckText("agent", options.agent, true, kMaxAgentBytes),
           CheckText("session_id", options.session_id, true,
                     kMaxSessionIdBytes),
           CheckText("lane", options.lane, false),
           CheckText("request_id", request.request_id, true),
           CheckText("model", request.model, true),
       }) {
    if (!s.ok()) return s;
  }
  if (request.provider == v1::PROVIDER_UNSPECIFIED) {
    return absl::InvalidArgumentError("provider is required");
  }
  for (size_t i = 0; i < request.system_sections.size(); ++i) {
    const SystemSectionText& section = request.system_sections[i];
    const std::string field = absl::StrCat("system section #", i);
    if (absl::Status s =
            CheckText(absl::StrCat(field, " name"), section.name, true);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            CheckText(absl::StrCat(field, " text"), section.text, false);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

void SetTimestamp(std::chrono::system_clock::time_point time,
                  google::protobuf::Timestamp* timestamp) {
  const auto since_epoch = time.time_since_epoch();
  const auto seconds = std::chrono::floor<std::chrono::seconds>(since_epoch);
  timestamp->set_seconds(seconds.count());
  timestamp->set_nanos(
      static_cast<int32_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                               since_epoch - seconds)
                               .count()));
}

}  // namespace

SnapshotBuilder::SnapshotBuilder(SnapshotBuilderOptions options)
    : options_(std::move(options)) {}

absl::StatusOr<std::vector<size_t>> SnapshotBuilder::Order(
    absl::Span<const Tool> tools, std::vector<OrderKey>* keys) const {
  const auto same_key = [](const OrderKey& key, const Tool& tool) {
    return key.name == tool.name && key.display_name == tool.display_name &&
           key.should_defer == tool.should_defer &&
           key.always_load == tool.always_load && key.revealed == tool.revealed;
  };
  if (std::equal(order_keys_.begin(), order_keys_.end(), tools.begin(),
                 tools.end(), same_key)) {
    return order_;
  }
  keys->reserve(tools.size());
  for (const Tool& tool : tools) {
    keys->push_back({tool.name, tool.display_name, tool.should_defer,
                     tool.always_load, tool.revealed});
  }
  return options_.tool_order.Apply(tools);
}

absl::StatusOr<v1::Snapshot> SnapshotBuilder::Build(
    const ModelRequest& request) {
  if (absl::Status s = CheckRequest(options_, request); !s.ok()) return s;

  const uint64_t system_hash = HashBytes(request.system_prompt);
  if (system_hash != system_hash_) {
    if (absl::Status s =
            CheckText("system_prompt", request.system_prompt, false);
        !s.ok()) {
      return s;
    }
  }
  std::vector<OrderKey> order_keys;
  absl::StatusOr<std::vector<size_t>> order = Order(request.tools, &order_keys);
  if (!order.ok()) return order.status();
  v1::Snapshot snapshot;
  absl::flat_hash_map<uint64_t, uint64_t> schema_hashes;
  uint64_t canonicalized = 0;
  for (const size_t index : *order) {
    const Tool& tool = request.tools[index];
    const uint64_t text_hash = HashBytes(tool.definition);
    uint64_t schema_hash;
    if (const auto known = schema_hashes_.find(text_hash);
        known != schema_hashes_.end()) {
      schema_hash = known->second;
    } else if (const auto seen = schema_hashes.find(text_hash);
               seen != schema_hashes.end()) {
      schema_hash = seen->second;  // The same definition twice in one request.
    } else {
      absl::StatusOr<uint64_t> hash = HashJson(tool.definition);
      if (!hash.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tool \"", tool.name, "\" definition: ", hash.status().message()));
      }
      schema_hash = *hash;
      ++canonicalized;
    }
    schema_hashes.emplace(text_hash, schema_hash);
    v1::ToolRef* ref = snapshot.add_tools();
    ref->set_name(tool.name);
    ref->set_schema_hash(schema_hash);
  }

  uint64_t options_hash = 0;
  if (!request.options_json.empty()) {
    absl::StatusOr<uint64_t> hash = HashJson(request.options_json);
    if (!hash.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("options_json: ", hash.status().message()));
    }
    options_hash = *hash;
  }

  // The last step that can fail: it commits the chain on success only.
  absl::StatusOr<size_t> reused = chain_.Update(request.message_blocks);
  if (!reused.ok()) return reused.status();

  schema_hashes_ = std::move(schema_hashes);
  if (!order_keys.empty() || request.tools.empty()) {
    order_keys_ = std::move(order_keys);
    order_ = *order;
  }
  system_hash_ = system_hash;
  stats_.tool_definitions_canonicalized += canonicalized;
  stats_.message_blocks_canonicalized +=
      request.message_blocks.size() - *reused;

  snapshot.set_agent(options_.agent);
  snapshot.set_session_id(options_.session_id);
  snapshot.set_lane(options_.lane);
  snapshot.set_request_id(std::string(request.request_id));
  SetTimestamp(request.time.value_or(std::chrono::system_clock::now()),
               snapshot.mutable_request_time());
  snapshot.set_provider(request.provider);
  snapshot.set_model(std::string(request.model));
  snapshot.set_system_hash(system_hash);
  for (const SystemSectionText& section : request.system_sections) {
    v1::SystemSection* out = snapshot.add_system_sections();
    out->set_name(std::string(section.name));
    out->set_hash(HashBytes(section.text));
  }
  if (request.cache_control.has_value()) {
    *snapshot.mutable_cache_control() = *request.cache_control;
    SetBlocksAfter(snapshot, request.message_blocks.size());
  }
  snapshot.set_options_hash(options_hash);
  snapshot.mutable_message_chain()->Add(chain_.hashes().begin(),
                                        chain_.hashes().end());
  snapshot.set_expected_drop(request.expected_drop);
  snapshot.set_tool_order_policy(options_.tool_order.is_explicit()
                                     ? v1::TOOL_ORDER_POLICY_EXPLICIT
                                     : v1::TOOL_ORDER_POLICY_LEXICOGRAPHIC);
  return snapshot;
}

}  // namespace cachewatch::client
