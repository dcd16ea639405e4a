// The offline half of `cachewatch import`: runs transcript turns through the
// daemon's own core (ingest validation, the lane tracker and classifier),
// exactly as `analyze` runs a trace, and sums the breaks by reason, session
// and day with the tokens and dollars lost.
//
// Each file gets a fresh lane tracker (a file's lanes are its own), so the
// memory held is one file's lanes plus the report, whatever the number of
// files. The tracker forgets no lane while a file is read: a gap of days in
// a session is a TTL expiry, not a new lane.
//
// Not thread-safe.
#ifndef CACHEWATCH_CLI_IMPORT_ANALYSIS_H_
#define CACHEWATCH_CLI_IMPORT_ANALYSIS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cachewatch/v1/break.pb.h"
#include "cli/transcript.h"
#include "daemon/core/classifier.h"
#include "daemon/core/lane_tracker.h"
#include "nlohmann/json.hpp"

namespace cachewatch::cli {

struct ImportTotals {
  int64_t turns = 0;
  int64_t breaks = 0;
  int64_t missed_tokens = 0;
  double cost_usd = 0;  // Of breaks whose model has a price.
};

struct ImportReport {
  std::map<v1::Verdict, int64_t> turns_by_verdict;
  std::vector<v1::PromptCacheBreak> breaks;        // In classification order.
  std::map<std::string, ImportTotals> by_reason;   // Primary reason.
  std::map<std::string, ImportTotals> by_session;  // "agent/session".
  std::map<std::string, ImportTotals> by_day;      // UTC "2025-08-01".
  ImportTotals total;
  int64_t duplicates = 0;  // Turns the tracker had already seen.
  int64_t invalid = 0;     // Turns validation refused.
  std::vector<std::string> first_invalid;  // "request_id: why".
};

class ImportAnalyzer {
 public:
  explicit ImportAnalyzer(ClassifierOptions options);

  // Starts a file: its lanes start cold.
  void BeginFile();
  // Classifies `turn` (its snapshot, then its usage).
  void Add(const TranscriptTurn& turn);
  // Classifies whatever the file left pending.
  void EndFile();

  const ImportReport& report() const { return report_; }

 private:
  void Collect(const std::vector<ClassifiedTurn>& classified);

  const ClassifierOptions options_;
  std::unique_ptr<LaneTracker> tracker_;
  int64_t now_us_ = 0;
  ImportReport report_;
};

// The report as text: the breaks one per line (the 20 costliest; all with
// `verbose`), then tables by reason, by session (top 10) and by day (top
// 14), and what was read and skipped (with `verbose`: every break, session
// and day, each kind skipped, the first unreadable lines and the agent
// versions).
std::string ImportText(const ImportReport& report, const ReadTally& tally,
                       bool verbose);

// The report as one JSON object: {"breaks": [...], "by_reason": [...],
// "by_session": [...], "by_day": [...], "turns": {...}, "read": {...}}.
nlohmann::json ImportJson(const ImportReport& report, const ReadTally& tally);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_IMPORT_ANALYSIS_H_
