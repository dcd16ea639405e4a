// The text the CLI prints: one-line breaks, tables and the side-by-side
// postmortem of a break. Pure functions of their arguments; thread-safe.
#ifndef CACHEWATCH_CLI_FORMAT_H_
#define CACHEWATCH_CLI_FORMAT_H_

#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/service.pb.h"

namespace cachewatch::cli {

// RFC 3339 in UTC to the second, e.g. "2026-11-30T07:01:02Z".
std::string FormatTime(const google::protobuf::Timestamp& time);

// "agent/session/lane".
std::string LaneText(const v1::PromptCacheBreak& cache_break);

// Lower-case enum names without their prefix: "cold_start",
// "client_explained", "response_write_split".
std::string VerdictName(v1::Verdict verdict);
std::string EvidenceName(v1::Evidence evidence);

// The tools a break changed, at most `max_names` of them, each with what
// happened to it: "mcp__github__search (moved), Bash (schema) +2 more";
// empty when no tool changed.
std::string ToolChanges(const v1::PromptCacheBreak& cache_break,
                        size_t max_names);

// Rows as a table: left-aligned columns two spaces apart, the `numeric`
// columns right-aligned; the first row is the header.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows,
                        const std::set<size_t>& numeric);

// One line per break, as `tail` and `analyze` print it:
// "2026-11-30T07:01:02Z  my-agent/s1/main  tools_order_changed  lost 20000
// tok  tools: mcp__github__search (moved)".
std::string BreakLine(const v1::PromptCacheBreak& cache_break);

// A table of breaks with a header, as `breaks` prints it.
std::string BreakTable(const std::vector<v1::PromptCacheBreak>& breaks);

// Breaks and tokens lost per primary reason, most tokens first, with a
// total row.
std::string ReasonSummaryTable(const std::vector<v1::PromptCacheBreak>& breaks);

// The postmortem of one break: the header, the tool lists side by side with
// moved / schema-changed / added / removed tools marked, the system sections
// and the message chain.
std::string ExplainText(const v1::ExplainBreakResponse& explanation);

// One row per turn of a lane, as `lane` prints it.
std::string TimelineTable(const v1::GetLaneTimelineResponse& timeline);

// `message` in protobuf's JSON mapping on one line (no trailing newline).
absl::StatusOr<std::string> ToJsonLine(
    const google::protobuf::Message& message);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_FORMAT_H_
