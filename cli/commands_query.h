// The commands that query a running daemon: `tail` (WatchBreaks), `breaks`
// (ListBreaks), `explain` (ExplainBreak) and `lane` (GetLaneTimeline).
#ifndef CACHEWATCH_CLI_COMMANDS_QUERY_H_
#define CACHEWATCH_CLI_COMMANDS_QUERY_H_

#include <google/protobuf/timestamp.pb.h>

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/break.pb.h"
#include "cli/command.h"

namespace cachewatch::cli {

// Parses a --reason value: a design name ("tools_order_changed") or the enum
// name ("REASON_TOOLS_ORDER_CHANGED"). InvalidArgument otherwise.
absl::StatusOr<v1::Reason> ParseReason(const std::string& text);

// Parses a --since value relative to `now_seconds`: a duration ("90s",
// "15m", "1h", "2d") or an RFC 3339 time. InvalidArgument otherwise.
absl::StatusOr<google::protobuf::Timestamp> ParseSince(const std::string& text,
                                                       int64_t now_seconds);

// Adds tail, breaks, explain and lane; the outcome goes to `result`.
void AddQueryCommands(CLI::App& app, const GlobalOptions& global,
                      absl::Status& result);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_COMMANDS_QUERY_H_
