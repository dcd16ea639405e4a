#include "cli/import_analysis.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "cli/analyze.h"
#include "cli/format.h"
#include "daemon/pipeline/validation.h"

namespace cachewatch::cli {
namespace {

using google::protobuf::util::TimeUtil;

constexpr size_t kMaxInvalidKept = 20;
constexpr size_t kBreakLinesShown = 20;

// The tracker of an import: a lane is never forgotten while its file is
// read, however long a session paused.
TrackerOptions ImportTrackerOptions() {
  TrackerOptions options;
  options.idle_lane_timeout_us = std::numeric_limits<int64_t>::max() / 4;
  return options;
}

std::string Day(int64_t micros) {
  return absl::FormatTime("%Y-%m-%d", absl::FromUnixMicros(micros),
                          absl::UTCTimeZone());
}

void AddBreak(const v1::PromptCacheBreak& b, ImportTotals& totals) {
  ++totals.breaks;
  totals.missed_tokens += b.missed_tokens();
  totals.cost_usd += b.estimated_extra_cost_usd();
}

std::string Dollars(double usd) { return absl::StrFormat("$%.2f", usd); }

// Rows sorted by tokens lost, most first; `limit` rows at most (0: all).
std::string TotalsTable(const std::string& key_header,
                        const std::map<std::string, ImportTotals>& totals,
                        bool with_turns, size_t limit) {
  std::vector<std::pair<std::string, ImportTotals>> sorted(totals.begin(),
                                                           totals.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) {
                     return a.second.missed_tokens > b.second.missed_tokens;
                   });
  std::vector<std::vector<std::string>> rows;
  if (with_turns) {
    rows.push_back({key_header, "TURNS", "BREAKS", "TOKENS LOST", "USD LOST"});
  } else {
    rows.push_back({key_header, "BREAKS", "TOKENS LOST", "USD LOST"});
  }
  size_t shown = 0;
  for (const auto& [key, t] : sorted) {
    if (limit > 0 && shown++ == limit) {
      rows.push_back({absl::StrCat("(", sorted.size() - limit, " more)")});
      break;
    }
    std::vector<std::string> row = {key};
    if (with_turns) row.push_back(absl::StrCat(t.turns));
    row.push_back(absl::StrCat(t.breaks));
    row.push_back(absl::StrCat(t.missed_tokens));
    row.push_back(Dollars(t.cost_usd));
    rows.push_back(std::move(row));
  }
  return RenderTable(rows, with_turns ? std::set<size_t>{1, 2, 3, 4}
                                      : std::set<size_t>{1, 2, 3});
}

nlohmann::json TotalsJson(const std::string& key_name,
                          const std::map<std::string, ImportTotals>& totals) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [key, t] : totals) {
    rows.push_back({{key_name, key},
                    {"turns", t.turns},
                    {"breaks", t.breaks},
                    {"missed_tokens", t.missed_tokens},
                    {"estimated_extra_cost_usd", t.cost_usd}});
  }
  return rows;
}

}  // namespace

ImportAnalyzer::ImportAnalyzer(ClassifierOptions options)
    : options_(std::move(options)) {}

void ImportAnalyzer::BeginFile() {
  tracker_ = std::make_unique<LaneTracker>(ImportTrackerOptions(), options_);
}

void ImportAnalyzer::Collect(const std::vector<ClassifiedTurn>& classified) {
  for (const ClassifiedTurn& turn : classified) {
    const v1::Verdict verdict = turn.classification.verdict();
    ++report_.turns_by_verdict[verdict];
    const std::string session =
        absl::StrCat(turn.key.agent, "/", turn.key.session_id);
    const std::string day = Day(turn.turn.request_time_us);
    ++report_.by_session[session].turns;
    ++report_.by_day[day].turns;
    ++report_.total.turns;
    if (verdict != v1::VERDICT_BREAK) continue;
    const v1::PromptCacheBreak& b = turn.classification.cache_break();
    ImportTotals& reason = report_.by_reason[ReasonName(b.primary_reason())];
    AddBreak(b, reason);
    AddBreak(b, report_.by_session[session]);
    AddBreak(b, report_.by_day[day]);
    AddBreak(b, report_.total);
    report_.breaks.push_back(b);
  }
}

void ImportAnalyzer::Add(const TranscriptTurn& turn) {
  const ValidationLimits limits;
  now_us_ = std::max(
      now_us_, TimeUtil::TimestampToMicroseconds(turn.snapshot.request_time()));
  auto invalid = [&](const absl::Status& why) {
    ++report_.invalid;
    if (report_.first_invalid.size() < kMaxInvalidKept) {
      report_.first_invalid.push_back(
          absl::StrCat(turn.snapshot.request_id(), ": ", why.message()));
    }
  };
  if (absl::Status valid = ValidateSnapshot(turn.snapshot, limits, now_us_);
      !valid.ok()) {
    invalid(valid);
    return;
  }
  absl::StatusOr<v1::NormalizedUsage> normalized =
      ValidateUsage(turn.usage, limits, now_us_);
  if (!normalized.ok()) {
    invalid(normalized.status());
    return;
  }
  SnapshotResult snapshot = tracker_->AddSnapshot(
      std::make_shared<const v1::Snapshot>(turn.snapshot), now_us_);
  Collect(snapshot.classified);
  UsageResult usage = tracker_->AddUsage(turn.usage, *normalized, now_us_);
  Collect(usage.classified);
  if (usage.outcome == RecordOutcome::kDuplicate) ++report_.duplicates;
}

void ImportAnalyzer::EndFile() {
  if (tracker_ == nullptr) return;
  // Far enough ahead that every unpaired snapshot has timed out.
  Collect(tracker_->Expire(std::numeric_limits<int64_t>::max() / 2));
  tracker_.reset();
}

std::string ImportText(const ImportReport& report, const ReadTally& tally,
                       bool verbose) {
  std::string out;
  // The costliest breaks, in classification order; all with `verbose`.
  std::vector<size_t> shown(report.breaks.size());
  for (size_t i = 0; i < shown.size(); ++i) shown[i] = i;
  if (!verbose && shown.size() > kBreakLinesShown) {
    std::stable_sort(shown.begin(), shown.end(), [&](size_t a, size_t b) {
      return report.breaks[a].missed_tokens() >
             report.breaks[b].missed_tokens();
    });
    shown.resize(kBreakLinesShown);
    std::sort(shown.begin(), shown.end());
  }
  for (size_t i : shown) {
    const v1::PromptCacheBreak& b = report.breaks[i];
    absl::StrAppend(&out, BreakLine(b));
    if (b.has_estimated_cost()) {
      absl::StrAppend(&out, "  ", Dollars(b.estimated_extra_cost_usd()));
    }
    absl::StrAppend(&out, "\n");
  }
  if (shown.size() < report.breaks.size()) {
    absl::StrAppend(&out, "(the ", shown.size(), " costliest of ",
                    report.breaks.size(), " breaks; --verbose lists all)\n");
  }
  std::string verdicts;
  for (const auto& [verdict, count] : report.turns_by_verdict) {
    absl::StrAppend(&verdicts, verdicts.empty() ? "" : ", ",
                    VerdictName(verdict), " ", count);
  }
  absl::StrAppend(
      &out, report.breaks.empty() ? "" : "\n", tally.files, " files, ",
      tally.lines, " lines (", absl::StrFormat("%.1f", tally.bytes / 1e6),
      " MB), ", tally.requests, " requests; ", report.total.turns, " turns",
      verdicts.empty() ? "" : absl::StrCat(" (", verdicts, ")"), ", ",
      report.total.breaks, " breaks, ", report.total.missed_tokens,
      " tokens lost, ", Dollars(report.total.cost_usd), "\n");
  if (!report.by_reason.empty()) {
    absl::StrAppend(&out, "\n",
                    TotalsTable("REASON", report.by_reason,
                                /*with_turns=*/false, 0));
    absl::StrAppend(&out, "\n",
                    TotalsTable("SESSION", report.by_session,
                                /*with_turns=*/true, verbose ? 0 : 10));
    absl::StrAppend(&out, "\n",
                    TotalsTable("DAY (UTC)", report.by_day,
                                /*with_turns=*/true, verbose ? 0 : 14));
  }
  absl::StrAppend(
      &out,
      "\nTranscripts record the messages and usage, never the tools or the "
      "system prompt: those are unknown, and no break is put down to them.\n");
  int64_t skipped = 0;
  for (const auto& [kind, count] : tally.skipped) skipped += count;
  absl::StrAppend(
      &out, "Skipped: ", tally.duplicate_requests, " duplicate request lines, ",
      tally.corrupt_lines, " corrupt lines, ", tally.partial_lines,
      " partial last lines (read next time), ", skipped, " other lines",
      verbose ? ":" : " (--verbose lists them)", "\n");
  if (report.invalid > 0) {
    absl::StrAppend(&out, report.invalid, " turns refused by validation\n");
  }
  if (verbose) {
    for (const auto& [kind, count] : tally.skipped) {
      absl::StrAppend(&out, "  ", kind, ": ", count, "\n");
    }
    for (const std::string& problem : tally.first_problems) {
      absl::StrAppend(&out, "  ", problem, "\n");
    }
    for (const std::string& why : report.first_invalid) {
      absl::StrAppend(&out, "  refused ", why, "\n");
    }
    if (!tally.versions.empty()) absl::StrAppend(&out, "Agent versions:\n");
    for (const auto& [version, lines] : tally.versions) {
      absl::StrAppend(&out, "  ", version, ": ", lines, " lines\n");
    }
  }
  return out;
}

nlohmann::json ImportJson(const ImportReport& report, const ReadTally& tally) {
  nlohmann::json breaks = nlohmann::json::array();
  for (const v1::PromptCacheBreak& b : report.breaks) {
    nlohmann::json object = BreakSummaryJson(b);
    object["request_time"] = FormatTime(b.request_time());
    object["model"] = b.model();
    object["gap_seconds"] = b.gap_seconds();
    object["ttl_seconds"] = b.ttl_seconds();
    object["first_changed_message_block"] = b.first_changed_message_block();
    if (b.has_estimated_cost()) {
      object["estimated_extra_cost_usd"] = b.estimated_extra_cost_usd();
    }
    object["unobserved"] = {"tools", "system"};
    breaks.push_back(std::move(object));
  }
  nlohmann::json verdicts = nlohmann::json::object();
  for (const auto& [verdict, count] : report.turns_by_verdict) {
    verdicts[VerdictName(verdict)] = count;
  }
  return {
      {"breaks", breaks},
      {"by_reason", TotalsJson("reason", report.by_reason)},
      {"by_session", TotalsJson("session", report.by_session)},
      {"by_day", TotalsJson("day", report.by_day)},
      {"turns",
       {{"total", report.total.turns},
        {"by_verdict", verdicts},
        {"breaks", report.total.breaks},
        {"missed_tokens", report.total.missed_tokens},
        {"estimated_extra_cost_usd", report.total.cost_usd},
        {"duplicates", report.duplicates},
        {"invalid", report.invalid}}},
      {"read",
       {{"files", tally.files},
        {"lines", tally.lines},
        {"bytes", tally.bytes},
        {"requests", tally.requests},
        {"duplicate_requests", tally.duplicate_requests},
        {"corrupt_lines", tally.corrupt_lines},
        {"partial_lines", tally.partial_lines},
        {"skipped", tally.skipped},
        {"versions", tally.versions}}},
  };
}

}  // namespace cachewatch::cli
