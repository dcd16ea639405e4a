// `cachewatch simulate`: drives a synthetic agent fleet (fleet.h) against
// the daemon over the Record stream and summarizes what it sent and how the
// daemon classified it.
#ifndef CACHEWATCH_CLI_SIMULATE_H_
#define CACHEWATCH_CLI_SIMULATE_H_

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "cli/command.h"

namespace cachewatch::cli {

// Adds the `simulate` subcommand; its outcome goes to `result`. Fails when
// the daemon is unreachable or refused any record.
void AddSimulateCommand(CLI::App& app, const GlobalOptions& global,
                        absl::Status& result);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_SIMULATE_H_
