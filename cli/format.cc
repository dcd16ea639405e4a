#include "cli/format.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/core/classifier.h"
#include "daemon/core/provider_traits.h"
#include "daemon/util/enum_name.h"

namespace cachewatch::cli {
namespace {

std::string TtlSourceName(v1::TtlSource source) {
  return EnumText(source, "unspecified");
}

// The provider's own diagnosis beside ours, verbatim.
std::string ProviderWord(const v1::PromptCacheBreak& b) {
  if (b.provider_miss_reason().empty()) return "no diagnostics sent";
  std::string word = absl::StrCat("says \"", b.provider_miss_reason(), "\"");
  if (b.provider_missed_tokens() > 0) {
    absl::StrAppend(&word, " (", b.provider_missed_tokens(), " tokens missed)");
  }
  switch (b.provider_agreement()) {
    case v1::PROVIDER_AGREEMENT_AGREE:
      absl::StrAppend(&word, ": agrees with ", ReasonName(b.primary_reason()));
      break;
    case v1::PROVIDER_AGREEMENT_DISAGREE:
      absl::StrAppend(&word, ": disagrees with ",
                      ReasonName(b.primary_reason()));
      break;
    default:
      absl::StrAppend(&word, ": a word cachewatch does not map");
      break;
  }
  return word;
}

std::string Provider(v1::Provider provider) {
  return std::string(ProviderName(provider));
}

}  // namespace

std::string RenderTable(const std::vector<std::vector<std::string>>& rows,
                        const std::set<size_t>& numeric) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += "  ";
      const bool last = i + 1 == row.size();
      if (numeric.contains(i)) {
        line += std::string(widths[i] - row[i].size(), ' ') + row[i];
      } else {
        line += last ? row[i] : absl::StrFormat("%-*s", widths[i], row[i]);
      }
    }
    out += line + "\n";
  }
  return out;
}

namespace {

bool Contains(const google::protobuf::RepeatedPtrField<std::string>& names,
              const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string ToolChangeKind(const v1::PromptCacheBreak& cache_break,
                           const std::string& name) {
  std::vector<std::string> kinds;
  if (Contains(cache_break.reordered_tool_names(), name)) {
    kinds.push_back("moved");
  }
  if (Contains(cache_break.schema_changed_tool_names(), name)) {
    kinds.push_back("schema");
  }
  if (Contains(cache_break.added_tool_names(), name)) kinds.push_back("added");
  if (Contains(cache_break.removed_tool_names(), name)) {
    kinds.push_back("removed");
  }
  return absl::StrJoin(kinds, ", ");
}

std::string ShortHash(uint64_t hash) { return absl::StrFormat("%016x", hash); }

std::string ExplainHeader(const v1::PromptCacheBreak& b) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"break", absl::StrCat(b.break_id(), "  ", ReasonName(b.primary_reason()),
                             " (", EvidenceName(b.evidence()), ")")});
  rows.push_back({"lane", absl::StrCat(LaneText(b), "  provider ",
                                       Provider(b.provider()))});
  rows.push_back(
      {"previous", absl::StrCat(b.previous_request_id(), "  ",
                                FormatTime(b.previous_request_time()), "  ",
                                b.previous_model())});
  rows.push_back(
      {"current", absl::StrCat(b.request_id(), "  ",
                               FormatTime(b.request_time()), "  ", b.model())});
  rows.push_back(
      {"gap", absl::StrFormat("%.1f s %s TTL %u s (%s)", b.gap_seconds(),
                              b.gap_seconds() > b.ttl_seconds() ? ">" : "<=",
                              b.ttl_seconds(), TtlSourceName(b.ttl_source()))});
  rows.push_back(
      {"tokens",
       absl::StrFormat("expected %d  read %d (previous turn read %d)  missed "
                       "%d  prompt %d  written %d",
                       b.expected_reuse_tokens(), b.current_cache_read_tokens(),
                       b.previous_cache_read_tokens(), b.missed_tokens(),
                       b.prompt_total_tokens(), b.cache_write_tokens())});
  if (b.has_estimated_cost()) {
    rows.push_back(
        {"cost", absl::StrFormat("$%.4f extra", b.estimated_extra_cost_usd())});
  }
  std::vector<std::string> reasons;
  for (int reason : b.reasons()) {
    reasons.push_back(ReasonName(static_cast<v1::Reason>(reason)));
  }
  rows.push_back({"reasons", absl::StrJoin(reasons, ", ")});
  rows.push_back({"provider", ProviderWord(b)});
  return RenderTable(rows, {});
}

// The tool lists side by side, one row per position.
std::string ToolColumns(const v1::PromptCacheBreak& b,
                        const v1::Snapshot& before, const v1::Snapshot& after) {
  size_t width = 6;
  for (const v1::ToolRef& tool : before.tools()) {
    width = std::max(width, tool.name().size());
  }
  std::string out = absl::StrFormat("tools (%d before | %d after)\n",
                                    before.tools_size(), after.tools_size());
  const int rows = std::max(before.tools_size(), after.tools_size());
  for (int i = 0; i < rows; ++i) {
    std::string left;
    if (i < before.tools_size()) {
      const std::string& name = before.tools(i).name();
      left = absl::StrCat(Contains(b.removed_tool_names(), name) ? "- " : "  ",
                          name);
    }
    std::string right;
    if (i < after.tools_size()) {
      const std::string& name = after.tools(i).name();
      const char* marker = Contains(b.added_tool_names(), name) ? "+ "
                           : Contains(b.schema_changed_tool_names(), name)
                               ? "~ "
                               : "  ";
      right = absl::StrCat(marker, name);
      if (Contains(b.reordered_tool_names(), name)) right += "  <- moved";
    }
    out += absl::StrFormat("%3d %-*s | %s\n", i, width + 2, left, right);
  }
  if (b.reordered_tool_names_size() > 0) {
    out += absl::StrCat(
        "moved: ", absl::StrJoin(b.reordered_tool_names(), ", "), "\n");
  }
  if (b.first_changed_tool_index() >= 0) {
    out += absl::StrFormat("first differing position: %d\n",
                           b.first_changed_tool_index());
  }
  out += "(~ schema changed, + added, - removed, <- moved: reordered)\n";
  return out;
}

std::string SystemColumns(const v1::PromptCacheBreak& b,
                          const v1::Snapshot& before,
                          const v1::Snapshot& after) {
  std::string out = absl::StrFormat(
      "system hash %s -> %s%s\n", ShortHash(before.system_hash()),
      ShortHash(after.system_hash()),
      before.system_hash() == after.system_hash() ? " (unchanged)" : "");
  size_t width = 6;
  for (const v1::SystemSection& section : before.system_sections()) {
    width = std::max(width, section.name().size());
  }
  const int rows =
      std::max(before.system_sections_size(), after.system_sections_size());
  for (int i = 0; i < rows; ++i) {
    const std::string left = i < before.system_sections_size()
                                 ? before.system_sections(i).name()
                                 : "";
    std::string right =
        i < after.system_sections_size() ? after.system_sections(i).name() : "";
    if (!right.empty() && Contains(b.changed_system_sections(), right)) {
      right = "~ " + right;
    } else if (!right.empty()) {
      right = "  " + right;
    }
    out += absl::StrFormat("%3d   %-*s | %s\n", i, width, left, right);
  }
  if (b.changed_system_sections_size() > 0) {
    out += absl::StrCat("changed sections: ",
                        absl::StrJoin(b.changed_system_sections(), ", "), "\n");
  }
  return out;
}

std::string MessageLines(const v1::PromptCacheBreak& b,
                         const v1::Snapshot& before,
                         const v1::Snapshot& after) {
  return absl::StrFormat(
      "messages: chain %d -> %d blocks, first changed block %s, %d blocks "
      "since last write\n",
      before.message_chain_size(), after.message_chain_size(),
      b.first_changed_message_block() >= 0
          ? absl::StrCat(b.first_changed_message_block())
          : std::string("none"),
      b.blocks_since_last_write());
}

}  // namespace

std::string FormatTime(const google::protobuf::Timestamp& time) {
  const std::time_t seconds = time.seconds();
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

std::string LaneText(const v1::PromptCacheBreak& cache_break) {
  return absl::StrCat(cache_break.agent(), "/", cache_break.session_id(), "/",
                      cache_break.lane());
}

std::string VerdictName(v1::Verdict verdict) {
  return EnumText(verdict, "unspecified");
}

std::string EvidenceName(v1::Evidence evidence) {
  return EnumText(evidence, "unspecified");
}

std::string ToolChanges(const v1::PromptCacheBreak& cache_break,
                        size_t max_names) {
  const auto& names = cache_break.changed_tool_names();
  std::vector<std::string> shown;
  for (int i = 0; i < names.size() && shown.size() < max_names; ++i) {
    shown.push_back(absl::StrCat(names[i], " (",
                                 ToolChangeKind(cache_break, names[i]), ")"));
  }
  std::string text = absl::StrJoin(shown, ", ");
  if (static_cast<size_t>(names.size()) > shown.size()) {
    absl::StrAppend(&text, " +", names.size() - shown.size(), " more");
  }
  return text;
}

std::string BreakLine(const v1::PromptCacheBreak& b) {
  std::string line = absl::StrFormat(
      "%s  %s  %s  lost %d tok", FormatTime(b.request_time()), LaneText(b),
      ReasonName(b.primary_reason()), b.missed_tokens());
  if (const std::string tools = ToolChanges(b, 3); !tools.empty()) {
    absl::StrAppend(&line, "  tools: ", tools);
  }
  if (b.changed_system_sections_size() > 0) {
    absl::StrAppend(
        &line, "  system: ", absl::StrJoin(b.changed_system_sections(), ", "));
  }
  if (b.primary_reason() == v1::REASON_MODEL_CHANGED) {
    absl::StrAppend(&line, "  model: ", b.previous_model(), " -> ", b.model());
  }
  if (b.primary_reason() == v1::REASON_MESSAGES_CHANGED) {
    absl::StrAppend(&line, "  first changed block ",
                    b.first_changed_message_block());
  }
  if (b.primary_reason() == v1::REASON_TTL_EXPIRED ||
      b.primary_reason() == v1::REASON_LIKELY_PROVIDER_EVICTION) {
    absl::StrAppend(&line, absl::StrFormat("  gap %.0fs, ttl %us",
                                           b.gap_seconds(), b.ttl_seconds()));
  }
  return line;
}

std::string BreakTable(const std::vector<v1::PromptCacheBreak>& breaks) {
  std::vector<std::vector<std::string>> rows = {
      {"TIME", "LANE", "REASON", "LOST", "MODEL", "BREAK ID", "TOOLS"}};
  for (const v1::PromptCacheBreak& b : breaks) {
    rows.push_back({FormatTime(b.request_time()), LaneText(b),
                    ReasonName(b.primary_reason()),
                    absl::StrCat(b.missed_tokens()), b.model(), b.break_id(),
                    ToolChanges(b, 2)});
  }
  return RenderTable(rows, {3});
}

std::string ReasonSummaryTable(
    const std::vector<v1::PromptCacheBreak>& breaks) {
  struct Totals {
    int64_t count = 0;
    int64_t missed = 0;
  };
  std::map<std::string, Totals> by_reason;
  Totals total;
  for (const v1::PromptCacheBreak& b : breaks) {
    Totals& totals = by_reason[ReasonName(b.primary_reason())];
    ++totals.count;
    totals.missed += b.missed_tokens();
    ++total.count;
    total.missed += b.missed_tokens();
  }
  std::vector<std::pair<std::string, Totals>> sorted(by_reason.begin(),
                                                     by_reason.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) {
                     return a.second.missed > b.second.missed;
                   });
  std::vector<std::vector<std::string>> rows = {
      {"REASON", "BREAKS", "TOKENS LOST"}};
  for (const auto& [reason, totals] : sorted) {
    rows.push_back(
        {reason, absl::StrCat(totals.count), absl::StrCat(totals.missed)});
  }
  rows.push_back(
      {"total", absl::StrCat(total.count), absl::StrCat(total.missed)});
  return RenderTable(rows, {1, 2});
}

std::string ExplainText(const v1::ExplainBreakResponse& explanation) {
  const v1::PromptCacheBreak& b = explanation.cache_break();
  std::string out = ExplainHeader(b);
  if (!explanation.has_previous_snapshot() || !explanation.has_snapshot()) {
    absl::StrAppend(
        &out, "\nno diff: the snapshot of ",
        explanation.has_previous_snapshot() ? "the current" : "the previous",
        " turn was never received, so the cause cannot be known\n");
    return out;
  }
  absl::StrAppend(
      &out, "\n",
      ToolColumns(b, explanation.previous_snapshot(), explanation.snapshot()),
      "\n",
      SystemColumns(b, explanation.previous_snapshot(), explanation.snapshot()),
      "\n",
      MessageLines(b, explanation.previous_snapshot(), explanation.snapshot()));
  return out;
}

std::string TimelineTable(const v1::GetLaneTimelineResponse& timeline) {
  std::vector<std::vector<std::string>> rows = {{"TIME", "REQUEST", "MODEL",
                                                 "READ", "WRITE", "UNCACHED",
                                                 "HIT", "VERDICT", "REASON"}};
  for (const v1::TurnSummary& turn : timeline.turns()) {
    const v1::NormalizedUsage& usage = turn.usage();
    const bool usage_known = turn.usage_received();
    const auto count = [&](int64_t value) {
      return usage_known ? absl::StrCat(value) : std::string("-");
    };
    std::string model = turn.model();
    if (!turn.snapshot_received()) model += " (no snapshot)";
    rows.push_back(
        {FormatTime(turn.request_time()), turn.request_id(), model,
         count(usage.cache_read_tokens()), count(usage.cache_write_tokens()),
         count(usage.uncached_input_tokens()),
         usage_known ? absl::StrFormat("%.1f%%", turn.hit_ratio() * 100)
                     : std::string("-"),
         VerdictName(turn.verdict()),
         turn.verdict() == v1::VERDICT_BREAK ? ReasonName(turn.primary_reason())
                                             : std::string("")});
  }
  return RenderTable(rows, {3, 4, 5, 6});
}

absl::StatusOr<std::string> ToJsonLine(
    const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  const auto status =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print JSON: ", status.ToString()));
  }
  return json;
}

}  // namespace cachewatch::cli
