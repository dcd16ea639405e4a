#include "cli/analyze.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/format.h"
#include "daemon/core/classifier.h"
#include "daemon/core/lane_tracker.h"
#include "daemon/pipeline/validation.h"
#include "daemon/util/status_macros.h"

namespace cachewatch::cli {
namespace {

void Collect(const std::vector<ClassifiedTurn>& classified,
             TraceAnalysis& analysis) {
  for (const ClassifiedTurn& turn : classified) {
    const v1::Verdict verdict = turn.classification.verdict();
    ++analysis.turns_by_verdict[verdict];
    TurnVerdict& out = analysis.turns.emplace_back();
    out.key = turn.key;
    out.request_id = turn.turn.request_id;
    out.verdict = verdict;
    if (verdict == v1::VERDICT_BREAK) {
      analysis.breaks.push_back(turn.classification.cache_break());
      out.primary_reason = turn.classification.cache_break().primary_reason();
    }
  }
}

struct AnalyzeOptions {
  std::string path;
  bool json = false;
  bool turns = false;
  int64_t usage_grace_seconds = TrackerOptions{}.usage_grace_us / 1'000'000;
};

void PrintSummary(const TraceAnalysis& analysis, size_t unreadable_lines) {
  int turns = 0;
  std::string verdicts;
  for (const auto& [verdict, count] : analysis.turns_by_verdict) {
    turns += count;
    absl::StrAppend(&verdicts, verdicts.empty() ? "" : ", ",
                    VerdictName(verdict), " ", count);
  }
  std::cout << "\n"
            << turns << " turns (" << verdicts << "), "
            << analysis.breaks.size() << " breaks, " << analysis.duplicates
            << " duplicate records, " << analysis.invalid + unreadable_lines
            << " invalid lines\n\n"
            << ReasonSummaryTable(analysis.breaks);
}

absl::Status RunAnalyze(const AnalyzeOptions& options) {
  CACHEWATCH_ASSIGN_OR_RETURN(Trace trace, ReadTrace(options.path));
  for (const TraceLineError& error : trace.errors) {
    std::cerr << options.path << ":" << error.line << ": "
              << error.status.message() << "\n";
  }
  TrackerOptions tracker;
  tracker.usage_grace_us = options.usage_grace_seconds * 1'000'000;
  const TraceAnalysis analysis = AnalyzeTrace(
      trace.records,
      [&](const TraceRecord& record, const absl::Status& why) {
        std::cerr << options.path << ":" << record.line << ": " << why.message()
                  << "\n";
      },
      tracker);
  if (options.turns) {
    for (const TurnVerdict& turn : analysis.turns) {
      std::cout << TurnVerdictJson(turn).dump() << "\n";
    }
    return absl::OkStatus();
  }
  for (const v1::PromptCacheBreak& cache_break : analysis.breaks) {
    if (options.json) {
      std::cout << BreakSummaryJson(cache_break).dump() << "\n";
    } else {
      std::cout << BreakLine(cache_break) << "\n";
    }
  }
  if (!options.json) PrintSummary(analysis, trace.errors.size());
  return absl::OkStatus();
}

}  // namespace

TraceAnalysis AnalyzeTrace(
    const std::vector<TraceRecord>& records,
    const std::function<void(const TraceRecord&, const absl::Status&)>&
        on_invalid,
    const TrackerOptions& options) {
  TraceAnalysis analysis;
  // The whole trace is at hand: no lane is ever forgotten, as the daemon
  // forgets none (it reads an evicted lane back from its store).
  TrackerOptions tracker_options = options;
  tracker_options.idle_lane_timeout_us = std::numeric_limits<int64_t>::max();
  tracker_options.max_lanes = std::numeric_limits<size_t>::max();
  LaneTracker tracker(tracker_options, ClassifierOptions{});
  const ValidationLimits limits;
  int64_t now_us = std::numeric_limits<int64_t>::min();
  for (const TraceRecord& entry : records) {
    const v1::RecordRequest& record = entry.record;
    now_us = std::max(now_us, RecordTimeMicros(record));
    Collect(tracker.Expire(now_us), analysis);
    RecordOutcome outcome = RecordOutcome::kAccepted;
    if (record.has_snapshot()) {
      if (absl::Status valid =
              ValidateSnapshot(record.snapshot(), limits, now_us);
          !valid.ok()) {
        ++analysis.invalid;
        on_invalid(entry, valid);
        continue;
      }
      SnapshotResult result = tracker.AddSnapshot(
          std::make_shared<const v1::Snapshot>(record.snapshot()), now_us);
      outcome = result.outcome;
      Collect(result.classified, analysis);
    } else {
      absl::StatusOr<v1::NormalizedUsage> normalized =
          ValidateUsage(record.usage(), limits, now_us);
      if (!normalized.ok()) {
        ++analysis.invalid;
        on_invalid(entry, normalized.status());
        continue;
      }
      UsageResult result =
          tracker.AddUsage(record.usage(), *normalized, now_us);
      outcome = result.outcome;
      Collect(result.classified, analysis);
    }
    if (outcome == RecordOutcome::kDuplicate) ++analysis.duplicates;
  }
  // Far enough ahead that every unpaired snapshot has timed out.
  Collect(tracker.Expire(std::numeric_limits<int64_t>::max() / 2), analysis);
  return analysis;
}

nlohmann::json TurnVerdictJson(const TurnVerdict& turn) {
  nlohmann::json json = {{"agent", turn.key.agent},
                         {"session_id", turn.key.session_id},
                         {"lane", turn.key.lane},
                         {"request_id", turn.request_id},
                         {"verdict", VerdictName(turn.verdict)}};
  if (turn.verdict == v1::VERDICT_BREAK) {
    json["primary_reason"] = ReasonName(turn.primary_reason);
  }
  return json;
}

nlohmann::json BreakSummaryJson(const v1::PromptCacheBreak& b) {
  nlohmann::json reasons = nlohmann::json::array();
  for (int reason : b.reasons()) {
    reasons.push_back(ReasonName(static_cast<v1::Reason>(reason)));
  }
  return {
      {"previous_request_id", b.previous_request_id()},
      {"request_id", b.request_id()},
      {"primary_reason", ReasonName(b.primary_reason())},
      {"reasons", reasons},
      {"evidence", EvidenceName(b.evidence())},
      {"missed_tokens", b.missed_tokens()},
      {"expected_reuse_tokens", b.expected_reuse_tokens()},
      {"previous_cache_read_tokens", b.previous_cache_read_tokens()},
      {"current_cache_read_tokens", b.current_cache_read_tokens()},
      {"changed_tool_names",
       std::vector<std::string>(b.changed_tool_names().begin(),
                                b.changed_tool_names().end())},
      {"agent", b.agent()},
      {"session_id", b.session_id()},
      {"lane", b.lane()},
  };
}

void AddAnalyzeCommand(CLI::App& app, absl::Status& result) {
  auto options = std::make_shared<AnalyzeOptions>();
  CLI::App* command = app.add_subcommand(
      "analyze",
      "Classify a recorded trace offline, with the daemon's own core");
  command->add_option("trace", options->path, "The trace (JSON lines)")
      ->required();
  command->add_flag("--json", options->json,
                    "Print one JSON object per break instead of text");
  command->add_flag("--turns", options->turns,
                    "Print one JSON object per classified turn (lane, "
                    "request id, verdict, primary reason of a break)");
  command
      ->add_option("--usage-grace-seconds", options->usage_grace_seconds,
                   "How long a usage that came before its snapshot waits for "
                   "it, on the trace's clock (the daemon's flag of that name)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->callback([options, &result] { result = RunAnalyze(*options); });
}

}  // namespace cachewatch::cli
