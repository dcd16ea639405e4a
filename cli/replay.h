// `cachewatch replay`: sends a recorded trace's records, in file order, to
// the daemon over the Record stream and reports how they were acknowledged.
#ifndef CACHEWATCH_CLI_REPLAY_H_
#define CACHEWATCH_CLI_REPLAY_H_

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "cli/command.h"

namespace cachewatch::cli {

// Adds the `replay` subcommand; its outcome goes to `result`. Fails when the
// daemon is unreachable or refused any record.
void AddReplayCommand(CLI::App& app, const GlobalOptions& global,
                      absl::Status& result);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_REPLAY_H_
