#include "cli/simulate.h"

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/daemon_connection.h"
#include "cli/fleet.h"
#include "cli/record_stream.h"

namespace cachewatch::cli {
namespace {

struct SimulateOptions {
  FleetOptions fleet;
  double turns_per_second = 50;  // Per lane; 0: as fast as possible.
  double duration_seconds = 0;   // 0: one session of --turns per lane.
  std::string tag;               // Empty: sim<seed>-<unix time>.
};

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void PrintSummary(const SimulateOptions& options, const FleetCounts& counts,
                  double seconds) {
  std::cout << absl::StrFormat(
      "simulated %d lanes (%d sessions x %d), %d turns, %d records in %.1f "
      "s\n",
      options.fleet.sessions * options.fleet.lanes_per_session,
      options.fleet.sessions, options.fleet.lanes_per_session, counts.turns,
      counts.records, seconds);
  std::cout << "lane sessions by provider:";
  for (const auto& [provider, lanes] : counts.lanes_by_provider) {
    std::cout << " " << provider << " " << lanes;
  }
  std::cout << "\ninjected causes:\n";
  for (const auto& [cause, count] : counts.causes) {
    std::cout << absl::StrFormat("  %-40s %6d\n", cause, count);
  }
}

absl::Status RunSimulate(const GlobalOptions& global,
                         const SimulateOptions& options) {
  absl::StatusOr<std::unique_ptr<v1::CacheWatch::Stub>> stub =
      ConnectToDaemon(global);
  if (!stub.ok()) return stub.status();
  Fleet fleet(options.fleet);
  RecordStream stream(**stub, global);
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  std::vector<v1::RecordRequest> records;
  bool stream_open = true;
  for (int step = 0; stream_open; ++step) {
    if (options.duration_seconds > 0 ? elapsed() >= options.duration_seconds
                                     : step >= options.fleet.turns) {
      break;
    }
    if (options.turns_per_second > 0) {
      std::this_thread::sleep_until(
          start +
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
              std::chrono::duration<double>(step / options.turns_per_second)));
    }
    records.clear();
    if (absl::Status status = fleet.NextStep(NowMicros(), records);
        !status.ok()) {
      return status;
    }
    for (const v1::RecordRequest& record : records) {
      if (!stream.Send(record)) {
        stream_open = false;
        break;
      }
    }
  }
  absl::StatusOr<AckTally> tally = stream.Finish();
  if (!tally.ok()) return tally.status();
  PrintSummary(options, fleet.counts(), elapsed());
  std::cout << DescribeTally(*tally, fleet.counts().records);
  if (tally->refused() > 0 || tally->acknowledged < fleet.counts().records) {
    return absl::FailedPreconditionError(
        absl::StrCat("the daemon refused ", tally->refused(),
                     " and did not "
                     "acknowledge ",
                     fleet.counts().records - tally->acknowledged, " of ",
                     fleet.counts().records, " records"));
  }
  return absl::OkStatus();
}

std::vector<std::string> SplitAgents(const std::string& text) {
  std::vector<std::string> agents;
  for (absl::string_view agent : absl::StrSplit(text, ',')) {
    if (!agent.empty()) agents.emplace_back(agent);
  }
  return agents;
}

}  // namespace

void AddSimulateCommand(CLI::App& app, const GlobalOptions& global,
                        absl::Status& result) {
  auto options = std::make_shared<SimulateOptions>();
  CLI::App* command = app.add_subcommand(
      "simulate",
      "Send a synthetic agent fleet's turns, with every cause of a cache "
      "break, to the daemon");
  FleetOptions& fleet = options->fleet;
  command->add_option("--sessions", fleet.sessions, "Concurrent sessions")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      ->add_option("--lanes-per-session", fleet.lanes_per_session,
                   "Lanes per session (main plus subagents)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      ->add_option("--turns", fleet.turns,
                   "Turns per lane (with --duration: per session, after "
                   "which the lane starts a new session)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      ->add_option("--rate", options->turns_per_second,
                   "Turns per second per lane; 0 sends as fast as possible")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--seed", fleet.seed, "Seed; same seed, same fleet")
      ->capture_default_str();
  command
      ->add_option("--duration", options->duration_seconds,
                   "Keep sending for this many seconds")
      ->check(CLI::NonNegativeNumber);
  command->add_option_function<std::string>(
      "--agents",
      [&fleet](const std::string& text) { fleet.agents = SplitAgents(text); },
      "Comma-separated agent names, given to sessions in turn "
      "(default claude-code,my-agent)");
  command->add_option("--tag", options->tag,
                      "Session id prefix (default: sim<seed>-<unix time>), "
                      "so that runs do not collide");
  command->callback([options, &global, &result] {
    if (options->fleet.agents.empty()) {
      result = absl::InvalidArgumentError("--agents: no agent name given");
      return;
    }
    options->fleet.tag = options->tag;
    if (options->fleet.tag.empty()) {
      options->fleet.tag =
          absl::StrCat("sim", options->fleet.seed, "-",
                       std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
    }
    result = RunSimulate(global, *options);
  });
}

}  // namespace cachewatch::cli
