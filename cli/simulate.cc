#include "cli/simulate.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/daemon_connection.h"
#include "cli/fleet.h"
#include "cli/record_stream.h"
#include "cli/trace.h"
#include "daemon/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace cachewatch::cli {
namespace {

struct SimulateOptions {
  FleetOptions fleet;
  double turns_per_second = 50;  // Per lane; 0: as fast as possible.
  double duration_seconds = 0;   // 0: one session of --turns per lane.
  std::string tag;               // Empty: sim<seed>-<unix time>.
  std::string trace_path;        // Write the records here, send nothing.
  std::string truth_path;        // Write every turn's ground truth here.
  double jitter_seconds = 0;     // Most random delay before a record arrives.
};

// Orders records as they would arrive: each is delayed by a random share of
// `jitter_seconds` after its client time (a reporter's queue, the network,
// a retry), so a usage may overtake its snapshot. Stable; deterministic for
// a seed.
void Jitter(double jitter_seconds, uint64_t seed,
            std::vector<v1::RecordRequest>& records) {
  if (jitter_seconds <= 0) return;
  std::mt19937_64 engine(seed ^ 0x6a09e667f3bcc908ULL);
  std::uniform_int_distribution<int64_t> delay(
      0, static_cast<int64_t>(jitter_seconds * 1e6));
  std::vector<std::pair<int64_t, size_t>> arrival;
  arrival.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    arrival.emplace_back(RecordTimeMicros(records[i]) + delay(engine), i);
  }
  std::stable_sort(arrival.begin(), arrival.end());
  std::vector<v1::RecordRequest> ordered;
  ordered.reserve(records.size());
  for (const auto& [time, index] : arrival) {
    ordered.push_back(std::move(records[index]));
  }
  records = std::move(ordered);
}

nlohmann::json TruthJson(const TurnTruth& truth) {
  return {{"agent", truth.agent},
          {"session_id", truth.session_id},
          {"lane", truth.lane},
          {"request_id", truth.request_id},
          {"truth", truth.truth},
          {"cache", truth.cache},
          {"expected_reuse_tokens", truth.expected_reuse_tokens},
          {"cache_read_tokens", truth.cache_read_tokens},
          {"snapshot_lost", truth.snapshot_lost}};
}

absl::Status WriteTruth(const std::string& path,
                        const std::vector<TurnTruth>& truths) {
  std::ofstream out(path);
  if (!out) return absl::NotFoundError(absl::StrCat("cannot write ", path));
  for (const TurnTruth& truth : truths) out << TruthJson(truth).dump() << "\n";
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

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

// Writes the whole fleet's records, in arrival order, as a trace.
absl::Status RunSimulateToTrace(const SimulateOptions& options) {
  Fleet fleet(options.fleet);
  const int64_t now_us = NowMicros();
  std::vector<v1::RecordRequest> records;
  std::vector<TurnTruth> truths;
  for (int step = 0; step < options.fleet.turns; ++step) {
    CACHEWATCH_RETURN_IF_ERROR(fleet.NextStep(now_us, records, &truths));
  }
  Jitter(options.jitter_seconds, options.fleet.seed, records);
  std::ofstream out(options.trace_path);
  if (!out) {
    return absl::NotFoundError(
        absl::StrCat("cannot write ", options.trace_path));
  }
  google::protobuf::util::JsonPrintOptions compact;
  for (const v1::RecordRequest& record : records) {
    std::string line;
    if (!google::protobuf::util::MessageToJsonString(record, &line, compact)
             .ok()) {
      return absl::InternalError("a record does not print as JSON");
    }
    out << line << "\n";
  }
  out.close();
  if (!out) {
    return absl::DataLossError(
        absl::StrCat("cannot write ", options.trace_path));
  }
  if (!options.truth_path.empty()) {
    CACHEWATCH_RETURN_IF_ERROR(WriteTruth(options.truth_path, truths));
  }
  PrintSummary(options, fleet.counts(), 0);
  return absl::OkStatus();
}

absl::Status RunSimulate(const GlobalOptions& global,
                         const SimulateOptions& options) {
  CACHEWATCH_ASSIGN_OR_RETURN(std::unique_ptr<v1::CacheWatch::Stub> stub,
                              ConnectToDaemon(global));
  Fleet fleet(options.fleet);
  RecordStream stream(*stub, global);
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  std::vector<v1::RecordRequest> records;
  std::vector<TurnTruth> truths;
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
    CACHEWATCH_RETURN_IF_ERROR(fleet.NextStep(
        NowMicros(), records, options.truth_path.empty() ? nullptr : &truths));
    Jitter(options.jitter_seconds, options.fleet.seed + step, records);
    for (const v1::RecordRequest& record : records) {
      if (!stream.Send(record)) {
        stream_open = false;
        break;
      }
    }
  }
  CACHEWATCH_ASSIGN_OR_RETURN(AckTally tally, stream.Finish());
  if (!options.truth_path.empty()) {
    CACHEWATCH_RETURN_IF_ERROR(WriteTruth(options.truth_path, truths));
  }
  PrintSummary(options, fleet.counts(), elapsed());
  std::cout << DescribeTally(tally, fleet.counts().records);
  if (tally.refused() > 0 || tally.acknowledged < fleet.counts().records) {
    return absl::FailedPreconditionError(
        absl::StrCat("the daemon refused ", tally.refused(),
                     " and did not "
                     "acknowledge ",
                     fleet.counts().records - tally.acknowledged, " of ",
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
  command->add_option("--trace", options->trace_path,
                      "Write the records (one session of --turns per lane, "
                      "in arrival order) to this trace file instead of "
                      "sending them; `cachewatch analyze` reads it");
  command->add_option("--truth", options->truth_path,
                      "Write each turn's ground truth (JSON lines: lane, "
                      "request id, the true verdict or primary reason, what "
                      "the simulated provider cache did)");
  command
      ->add_option("--jitter", options->jitter_seconds,
                   "Delay each record by a random 0..SECONDS before it "
                   "arrives, so records arrive out of order (a usage may "
                   "overtake its snapshot)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--lost-snapshots", fleet.lost_snapshot_rate,
                   "Share of snapshots never sent")
      ->check(CLI::Range(0.0, 1.0));
  command
      ->add_option("--duplicate-usages", fleet.duplicate_usage_rate,
                   "Share of usages sent twice (retries)")
      ->check(CLI::Range(0.0, 1.0));
  command
      ->add_option("--long-idle", fleet.long_idle_rate,
                   "Share of idle breaks lasting 2 to 5 hours")
      ->check(CLI::Range(0.0, 1.0));
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
    result = options->trace_path.empty() ? RunSimulate(global, *options)
                                         : RunSimulateToTrace(*options);
  });
}

}  // namespace cachewatch::cli
