// `cachewatch import AGENT [PATH...]`: reads the session logs Claude Code,
// Codex CLI or Gemini CLI already write and classifies every model request
// with the daemon's own core, offline (a report by reason, session and day
// with tokens and dollars lost; --json), or sends the turns to a daemon
// (--to ADDRESS), idempotently: a lane's turns the daemon already holds
// are not sent again, so re-importing (or continuing a file still being
// written) counts nothing twice. docs/IMPORT.md.
#ifndef CACHEWATCH_CLI_IMPORT_H_
#define CACHEWATCH_CLI_IMPORT_H_

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "cli/command.h"

namespace cachewatch::cli {

// Adds the `import` subcommand; its outcome goes to `result`. Fails when a
// path does not exist or cannot be read, or (with --to) when the daemon is
// unreachable or refused records; unreadable lines are counted, never a
// failure.
void AddImportCommand(CLI::App& app, const GlobalOptions& global,
                      absl::Status& result);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_IMPORT_H_
