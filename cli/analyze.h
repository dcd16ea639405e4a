// `cachewatch analyze`: runs a recorded trace through the daemon's own core
// (ingest validation, usage normalization, the lane tracker and classifier)
// without a daemon, and reports its breaks (or, with --turns, every turn's
// verdict). Records are taken in file order, as the daemon would take them
// in arrival order: a usage that comes before its snapshot waits for it for
// the grace window, measured on the trace's own clock (below), so a trace
// gives the same verdicts here as replayed to the daemon.
#ifndef CACHEWATCH_CLI_ANALYZE_H_
#define CACHEWATCH_CLI_ANALYZE_H_

#include <functional>
#include <map>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "cachewatch/v1/break.pb.h"
#include "cli/trace.h"
#include "daemon/core/lane_tracker.h"
#include "nlohmann/json.hpp"

namespace cachewatch::cli {

// One classified turn, as `analyze --turns` prints it.
struct TurnVerdict {
  LaneKey key;
  std::string request_id;
  v1::Verdict verdict = v1::VERDICT_UNSPECIFIED;
  v1::Reason primary_reason = v1::REASON_UNSPECIFIED;  // Breaks only.
};

struct TraceAnalysis {
  std::vector<v1::PromptCacheBreak> breaks;  // In classification order.
  std::vector<TurnVerdict> turns;            // In classification order.
  std::map<v1::Verdict, int> turns_by_verdict;
  int duplicates = 0;  // Records already seen.
  int invalid = 0;     // Records validation refused.
};

// Feeds `records` in order to a fresh lane tracker with `options` (except
// that it never forgets a lane, as the daemon reads a forgotten lane back
// from its store), using
// each record's own client timestamp as the daemon's clock (never going
// backwards), then expires every turn still pending so that each one is
// classified. Calls `on_invalid` for each record validation refuses.
TraceAnalysis AnalyzeTrace(
    const std::vector<TraceRecord>& records,
    const std::function<void(const TraceRecord&, const absl::Status&)>&
        on_invalid,
    const TrackerOptions& options = {});

// The JSON object `analyze --turns` prints for a turn.
nlohmann::json TurnVerdictJson(const TurnVerdict& turn);

// The JSON object `analyze --json` prints for a break.
nlohmann::json BreakSummaryJson(const v1::PromptCacheBreak& cache_break);

// Adds the `analyze` subcommand; its outcome goes to `result`.
void AddAnalyzeCommand(CLI::App& app, absl::Status& result);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_ANALYZE_H_
