// cachewatch: the command-line tool. main() only parses the command line
// and dispatches to the subcommand, whose outcome is the exit status.
#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "cli/analyze.h"
#include "cli/command.h"
#include "cli/commands_query.h"
#include "cli/import.h"
#include "cli/replay.h"
#include "cli/simulate.h"

int main(int argc, char** argv) {
  using namespace cachewatch::cli;
  CLI::App app("cachewatch: why did my agent's prompt cache break?",
               "cachewatch");
  app.require_subcommand(1);
  GlobalOptions global;
  AddGlobalOptions(app, global);
  absl::Status result;
  AddQueryCommands(app, global, result);
  AddAnalyzeCommand(app, result);
  AddImportCommand(app, global, result);
  AddReplayCommand(app, global, result);
  AddSimulateCommand(app, global, result);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return ExitStatusForParseError(app, error);
  }
  return ExitStatusFor(result);
}
