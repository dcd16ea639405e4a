#include "daemon/core/classifier.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "daemon/core/provider_traits.h"
#include "daemon/core/tool_diff.h"
#include "daemon/core/usage_normalizer.h"
#include "daemon/util/enum_name.h"

namespace cachewatch {
namespace {

using google::protobuf::util::TimeUtil;

int64_t CachedAfter(const Turn& turn, const ProviderTraits& traits) {
  const v1::NormalizedUsage& usage = *turn.usage;
  return traits.reports_cache_writes
             ? usage.cache_read_tokens() + usage.cache_write_tokens()
             : PromptTotalTokens(usage);
}

// Where a breakpoint sits in its segment, as the cache sees it: on the
// segment's last block ("at the end", whatever the segment's length), else at
// its index. Breakpoints in messages advance every turn by design; only the
// layout of the tools and system breakpoints keys the cache.
struct BreakpointPlace {
  v1::PromptSegment segment;
  bool at_end;
  uint32_t index;  // 0 when at_end.
  uint32_t ttl_seconds;

  bool operator==(const BreakpointPlace&) const = default;
};

std::vector<BreakpointPlace> PrefixBreakpoints(const v1::CacheControl& control,
                                               int tool_count) {
  std::vector<BreakpointPlace> prefix;
  for (const v1::Breakpoint& breakpoint : control.breakpoints()) {
    if (breakpoint.segment() == v1::PROMPT_SEGMENT_MESSAGES) continue;
    bool at_end = false;
    if (breakpoint.has_blocks_after()) {
      at_end = breakpoint.blocks_after() == 0;
    } else if (breakpoint.segment() == v1::PROMPT_SEGMENT_TOOLS) {
      at_end = tool_count > 0 &&
               static_cast<int64_t>(breakpoint.index()) == tool_count - 1;
    }
    prefix.push_back({breakpoint.segment(), at_end,
                      at_end ? 0 : breakpoint.index(),
                      breakpoint.ttl_seconds()});
  }
  return prefix;
}

bool SameCacheControl(const Turn& previous, const Turn& current) {
  const v1::CacheControl& a = previous.snapshot->cache_control();
  const v1::CacheControl& b = current.snapshot->cache_control();
  if (a.enabled() != b.enabled() || a.automatic() != b.automatic() ||
      a.ttl_seconds() != b.ttl_seconds()) {
    return false;
  }
  return PrefixBreakpoints(a, ToolsOf(previous).size()) ==
         PrefixBreakpoints(b, ToolsOf(current).size());
}

// Sections whose hash changed, that appeared or that disappeared.
std::vector<std::string> ChangedSections(const v1::Snapshot& before,
                                         const v1::Snapshot& after) {
  std::map<std::string, uint64_t> before_hash;
  for (const v1::SystemSection& section : before.system_sections()) {
    before_hash.emplace(section.name(), section.hash());
  }
  std::vector<std::string> changed;
  for (const v1::SystemSection& section : after.system_sections()) {
    auto it = before_hash.find(section.name());
    if (it == before_hash.end() || it->second != section.hash()) {
      changed.push_back(section.name());
    }
    if (it != before_hash.end()) before_hash.erase(it);
  }
  for (const auto& [name, hash] : before_hash) changed.push_back(name);
  return changed;
}

// The index of the last message breakpoint, or the last block when the
// request has no explicit message breakpoint (automatic caching).
int32_t LastMessageBreakpoint(const Turn& turn) {
  int32_t last = -1;
  for (const v1::Breakpoint& breakpoint :
       turn.snapshot->cache_control().breakpoints()) {
    if (breakpoint.segment() == v1::PROMPT_SEGMENT_MESSAGES) {
      last = std::max(last, static_cast<int32_t>(breakpoint.index()));
    }
  }
  return last >= 0 ? last
                   : static_cast<int32_t>(MessageChainOf(turn).size()) - 1;
}

// First block where the chains differ; the current chain's end when it is
// a strict prefix of the previous one (history truncated); -1 otherwise.
int32_t FirstChangedBlock(absl::Span<const uint64_t> before,
                          absl::Span<const uint64_t> after) {
  const size_t common = std::min(before.size(), after.size());
  for (size_t i = 0; i < common; ++i) {
    if (before[i] != after[i]) return static_cast<int32_t>(i);
  }
  return after.size() < before.size() ? static_cast<int32_t>(common) : -1;
}

struct TtlChoice {
  uint32_t seconds;
  v1::TtlSource source;
};

TtlChoice ChooseTtl(const Turn& previous, const ProviderTraits& traits,
                    v1::Provider provider, const LaneContext& context,
                    const ClassifierOptions& options) {
  if (previous.snapshot != nullptr) {
    uint32_t asked = previous.snapshot->cache_control().ttl_seconds();
    for (const v1::Breakpoint& breakpoint :
         previous.snapshot->cache_control().breakpoints()) {
      asked = std::max(asked, breakpoint.ttl_seconds());
    }
    if (asked > 0) return {asked, v1::TTL_SOURCE_CACHE_CONTROL};
  }
  if (context.observed_ttl_seconds > 0) {
    return {context.observed_ttl_seconds, v1::TTL_SOURCE_RESPONSE_WRITE_SPLIT};
  }
  auto configured = options.default_ttl_seconds.find(provider);
  return {configured != options.default_ttl_seconds.end()
              ? configured->second
              : traits.default_ttl_seconds,
          v1::TTL_SOURCE_PROVIDER_DEFAULT};
}

void AddReason(v1::Reason reason, v1::PromptCacheBreak& event) {
  event.add_reasons(reason);
}

template <typename Names>
void CopyNames(const Names& names,
               google::protobuf::RepeatedPtrField<std::string>* out) {
  out->Add(names.begin(), names.end());
}

// Structural reasons, in prompt-prefix order.
void AddStructuralReasons(const Turn& previous, const Turn& current,
                          const ProviderTraits& traits,
                          v1::PromptCacheBreak& event) {
  const v1::Snapshot& before = *previous.snapshot;
  const v1::Snapshot& after = *current.snapshot;
  if (before.model() != after.model()) {
    AddReason(v1::REASON_MODEL_CHANGED, event);
  }
  if (!SameCacheControl(previous, current)) {
    AddReason(v1::REASON_CACHE_CONTROL_CHANGED, event);
  }
  if (before.options_hash() != after.options_hash()) {
    AddReason(v1::REASON_REQUEST_OPTIONS_CHANGED, event);
  }
  const ToolDiff tools = DiffTools(ToolsOf(previous), ToolsOf(current));
  if (!tools.reordered.empty())
    AddReason(v1::REASON_TOOLS_ORDER_CHANGED, event);
  if (!tools.schema_changed.empty()) {
    AddReason(v1::REASON_TOOLS_SCHEMA_CHANGED, event);
  }
  if (!tools.added.empty()) AddReason(v1::REASON_TOOLS_ADDED, event);
  if (!tools.removed.empty()) AddReason(v1::REASON_TOOLS_REMOVED, event);
  CopyNames(tools.ChangedNames(), event.mutable_changed_tool_names());
  CopyNames(tools.added, event.mutable_added_tool_names());
  CopyNames(tools.removed, event.mutable_removed_tool_names());
  CopyNames(tools.reordered, event.mutable_reordered_tool_names());
  CopyNames(tools.schema_changed, event.mutable_schema_changed_tool_names());
  event.set_first_changed_tool_index(tools.first_changed_index);

  const std::vector<std::string> sections = ChangedSections(before, after);
  if (before.system_hash() != after.system_hash() || !sections.empty()) {
    AddReason(v1::REASON_SYSTEM_CHANGED, event);
  }
  CopyNames(sections, event.mutable_changed_system_sections());

  event.set_first_changed_message_block(-1);
  const absl::Span<const uint64_t> before_chain = MessageChainOf(previous);
  const absl::Span<const uint64_t> after_chain = MessageChainOf(current);
  if (before_chain.empty() || after_chain.empty()) return;
  const int32_t first_changed = FirstChangedBlock(before_chain, after_chain);
  event.set_first_changed_message_block(first_changed);
  if (first_changed >= 0) {
    AddReason(v1::REASON_MESSAGES_CHANGED, event);
    return;
  }
  const int32_t last_write = LastMessageBreakpoint(previous);
  const int32_t breakpoint = LastMessageBreakpoint(current);
  event.set_blocks_since_last_write(std::max(0, breakpoint - last_write));
  if (event.reasons_size() == 0 && traits.lookback_blocks > 0 &&
      breakpoint - last_write >= traits.lookback_blocks) {
    AddReason(v1::REASON_BREAKPOINT_LOOKBACK_EXCEEDED, event);
  }
}

void SetCost(const ClassifierOptions& options, const Turn& current,
             const ProviderTraits& traits, v1::PromptCacheBreak& event) {
  auto price = options.prices.find(current.model);
  if (price == options.prices.end()) return;
  // Missed tokens were written to the cache (where writes are billed) or
  // paid as plain input, instead of being read.
  double paid = price->second.input;
  if (traits.reports_cache_writes && current.usage->cache_write_tokens() > 0) {
    paid = event.ttl_seconds() >= 3600 ? price->second.cache_write_1h
                                       : price->second.cache_write_5m;
  }
  event.set_has_estimated_cost(true);
  event.set_estimated_extra_cost_usd(
      static_cast<double>(event.missed_tokens()) *
      (paid - price->second.cache_read) / 1e6);
}

// Our reasons consistent with a provider's word, in Anthropic's
// cache_miss_reason vocabulary and OpenAI Responses' prompt_cache_diagnostics
// one (outcomes and miss reasons). Known words with no consistent reason
// (a cache hit) disagree with every break; unknown words are not compared.
const std::vector<v1::Reason>* ConsistentReasons(
    const std::string& provider_reason) {
  static const auto* const kConsistent = [] {
    const std::vector<v1::Reason> tools = {
        v1::REASON_TOOLS_ORDER_CHANGED, v1::REASON_TOOLS_SCHEMA_CHANGED,
        v1::REASON_TOOLS_ADDED, v1::REASON_TOOLS_REMOVED};
    const std::vector<v1::Reason> options = {
        v1::REASON_REQUEST_OPTIONS_CHANGED};
    const std::vector<v1::Reason> not_found = {
        v1::REASON_MESSAGES_CHANGED, v1::REASON_BREAKPOINT_LOOKBACK_EXCEEDED,
        v1::REASON_TTL_EXPIRED, v1::REASON_LIKELY_PROVIDER_EVICTION};
    return new std::map<std::string, std::vector<v1::Reason>>{
        // Both.
        {"model_changed", {v1::REASON_MODEL_CHANGED}},
        {"tools_changed", tools},
        {"unavailable",
         {v1::REASON_CACHE_CONTROL_CHANGED, v1::REASON_REQUEST_OPTIONS_CHANGED,
          v1::REASON_LIKELY_PROVIDER_EVICTION}},
        // Anthropic.
        {"system_changed", {v1::REASON_SYSTEM_CHANGED}},
        {"messages_changed",
         {v1::REASON_MESSAGES_CHANGED, v1::REASON_REQUEST_OPTIONS_CHANGED}},
        {"previous_message_not_found", not_found},
        // OpenAI Responses.
        {"comparison_response_not_found", not_found},
        {"cache_hit", {}},
        {"input_changed",
         {v1::REASON_MESSAGES_CHANGED, v1::REASON_SYSTEM_CHANGED}},
        {"context_compacted", {v1::REASON_MESSAGES_CHANGED}},
        {"prompt_cache_key_changed",
         {v1::REASON_REQUEST_OPTIONS_CHANGED,
          v1::REASON_CACHE_CONTROL_CHANGED}},
        {"text_format_changed", options},
        {"reasoning_effort_changed", options},
        {"verbosity_changed", options},
        {"service_tier_changed", options},
    };
  }();
  auto it = kConsistent->find(absl::AsciiStrToLower(provider_reason));
  return it == kConsistent->end() ? nullptr : &it->second;
}

v1::PromptCacheBreak NewBreak(const LaneKey& key, const Turn& previous,
                              const Turn& current) {
  v1::PromptCacheBreak event;
  event.set_break_id(BreakIdFor(key, current.request_id));
  event.set_agent(key.agent);
  event.set_session_id(key.session_id);
  event.set_lane(key.lane);
  event.set_provider(current.provider);
  event.set_previous_request_id(previous.request_id);
  event.set_request_id(current.request_id);
  event.set_previous_model(previous.model);
  event.set_model(current.model);
  *event.mutable_previous_request_time() =
      TimeUtil::MicrosecondsToTimestamp(previous.request_time_us);
  *event.mutable_request_time() =
      TimeUtil::MicrosecondsToTimestamp(current.request_time_us);
  event.set_first_changed_tool_index(-1);
  event.set_first_changed_message_block(-1);
  return event;
}

}  // namespace

uint32_t TtlFromWriteSplit(const v1::NormalizedUsage& usage) {
  if (usage.cache_write_1h_tokens() > 0) return 3600;
  if (usage.cache_write_5m_tokens() > 0) return 300;
  return 0;
}

v1::ProviderAgreement AgreementWith(const std::string& provider_reason,
                                    v1::Reason reason) {
  const std::vector<v1::Reason>* consistent =
      ConsistentReasons(provider_reason);
  if (consistent == nullptr) return v1::PROVIDER_AGREEMENT_UNSPECIFIED;
  return std::find(consistent->begin(), consistent->end(), reason) !=
                 consistent->end()
             ? v1::PROVIDER_AGREEMENT_AGREE
             : v1::PROVIDER_AGREEMENT_DISAGREE;
}

std::string ReasonName(v1::Reason reason) {
  return EnumText(reason, "unspecified");
}

v1::TurnClassification Classify(const LaneKey& key, const Turn* previous,
                                const Turn& current, const LaneContext& context,
                                const ClassifierOptions& options) {
  v1::TurnClassification result;
  const v1::ExpectedDrop hint = current.snapshot != nullptr
                                    ? current.snapshot->expected_drop()
                                    : v1::EXPECTED_DROP_UNSPECIFIED;
  const ProviderTraits traits = TraitsFor(current.provider, current.model);
  const int64_t prompt_total = PromptTotalTokens(*current.usage);
  if (hint != v1::EXPECTED_DROP_UNSPECIFIED) {
    result.set_verdict(v1::VERDICT_EXPECTED_DROP);
    result.set_expected_drop(hint);
    return result;
  }
  if (previous == nullptr || !previous->usage.has_value()) {
    result.set_verdict(v1::VERDICT_COLD_START);
    return result;
  }
  if (prompt_total < traits.min_cacheable_tokens) {
    result.set_verdict(v1::VERDICT_BELOW_MIN_CACHEABLE);
    return result;
  }
  const int64_t expected =
      std::min(CachedAfter(*previous, traits), prompt_total);
  const int64_t read = current.usage->cache_read_tokens();
  const int64_t missed = std::max<int64_t>(0, expected - read);
  result.set_expected_reuse_tokens(expected);
  result.set_missed_tokens(missed);
  const int64_t threshold =
      std::max(options.min_missed_tokens, traits.noise_floor_tokens);
  if (missed < threshold ||
      static_cast<double>(missed) <
          static_cast<double>(expected) * options.min_missed_ratio) {
    result.set_verdict(v1::VERDICT_OK);
    return result;
  }

  result.set_verdict(v1::VERDICT_BREAK);
  v1::PromptCacheBreak& event = *result.mutable_cache_break();
  event = NewBreak(key, *previous, current);
  event.set_previous_cache_read_tokens(previous->usage->cache_read_tokens());
  event.set_current_cache_read_tokens(read);
  event.set_expected_reuse_tokens(expected);
  event.set_missed_tokens(missed);
  event.set_prompt_total_tokens(prompt_total);
  event.set_cache_write_tokens(current.usage->cache_write_tokens());
  const double gap_seconds =
      static_cast<double>(current.request_time_us - previous->request_time_us) /
      1e6;
  event.set_gap_seconds(gap_seconds);
  const TtlChoice ttl =
      ChooseTtl(*previous, traits, current.provider, context, options);
  event.set_ttl_seconds(ttl.seconds);
  event.set_ttl_source(ttl.source);

  if (previous->snapshot == nullptr || current.snapshot == nullptr) {
    AddReason(v1::REASON_UNKNOWN, event);
    event.set_evidence(v1::EVIDENCE_UNKNOWN);
  } else {
    AddStructuralReasons(*previous, current, traits, event);
    if (event.reasons_size() > 0) {
      event.set_evidence(v1::EVIDENCE_CLIENT_EXPLAINED);
    } else {
      AddReason(gap_seconds > ttl.seconds ? v1::REASON_TTL_EXPIRED
                                          : v1::REASON_LIKELY_PROVIDER_EVICTION,
                event);
      event.set_evidence(v1::EVIDENCE_PROVIDER_SUSPECTED);
    }
  }
  event.set_primary_reason(event.reasons(0));
  SetCost(options, current, traits, event);
  if (current.provider_diagnostics.has_value()) {
    const v1::ProviderCacheDiagnostics& diagnostics =
        *current.provider_diagnostics;
    event.set_provider_miss_reason(diagnostics.cache_miss_reason());
    event.set_provider_missed_tokens(diagnostics.cache_missed_input_tokens());
    event.set_provider_agreement(
        AgreementWith(diagnostics.cache_miss_reason(), event.primary_reason()));
  }
  return result;
}

}  // namespace cachewatch
