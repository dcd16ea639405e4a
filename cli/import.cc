#include "cli/import.h"

#include <google/protobuf/util/time_util.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/daemon_connection.h"
#include "cli/import_analysis.h"
#include "cli/record_stream.h"
#include "cli/transcript_files.h"
#include "daemon/config/config.h"
#include "daemon/util/status_macros.h"

namespace cachewatch::cli {
namespace {

using google::protobuf::util::TimeUtil;

struct ImportOptions {
  std::string agent;
  std::vector<std::string> paths;
  bool json = false;
  bool verbose = false;
  std::string config;               // The daemon's YAML config file.
  std::vector<std::string> prices;  // MODEL=INPUT,WRITE_5M,WRITE_1H,READ
  std::string to;                   // A daemon's address; empty: offline.
};

// Thresholds, TTLs and prices as the daemon would take them from the same
// config file and --price flags.
absl::StatusOr<ClassifierOptions> ClassifierOptionsFor(
    const ImportOptions& options) {
  std::vector<std::string> args = {"cachewatch import"};
  if (!options.config.empty()) {
    args.push_back("--config");
    args.push_back(options.config);
  }
  for (const std::string& price : options.prices) {
    args.push_back("--price");
    args.push_back(price);
  }
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  std::variant<Config, ConfigExit> parsed =
      ParseConfig(static_cast<int>(argv.size()), argv.data(), "import");
  if (const ConfigExit* exit = std::get_if<ConfigExit>(&parsed)) {
    return absl::InvalidArgumentError(exit->message);
  }
  return std::get<Config>(parsed).classifier;
}

// A progress line on stderr, when stderr is a terminal.
class Progress {
 public:
  explicit Progress(size_t files) : files_(files), shown_(isatty(2) != 0) {}

  void Update(const ReadTally& tally, bool force = false) {
    if (!shown_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    std::fprintf(stderr, "\rimport: %lld/%zu files, %.1f MB, %lld requests",
                 static_cast<long long>(tally.files), files_, tally.bytes / 1e6,
                 static_cast<long long>(tally.requests));
    std::fflush(stderr);
  }
  void Done() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  const size_t files_;
  const bool shown_;
  std::chrono::steady_clock::time_point last_;
};

// Sends turns to a daemon, each lane's only after the latest turn the
// daemon already holds for it.
class DaemonSender {
 public:
  DaemonSender(v1::CacheWatch::Stub& stub, const GlobalOptions& global)
      : stub_(stub), global_(global), stream_(stub, global) {}

  absl::Status Send(const TranscriptTurn& turn) {
    CACHEWATCH_ASSIGN_OR_RETURN(int64_t held, HeldUntil(turn.snapshot));
    if (TimeUtil::TimestampToMicroseconds(turn.snapshot.request_time()) <=
        held) {
      ++already_held_;
      return absl::OkStatus();
    }
    v1::RecordRequest snapshot;
    *snapshot.mutable_snapshot() = turn.snapshot;
    v1::RecordRequest usage;
    *usage.mutable_usage() = turn.usage;
    if (!stream_.Send(snapshot) || !stream_.Send(usage)) {
      return absl::UnavailableError("the record stream broke");
    }
    sent_ += 2;
    return absl::OkStatus();
  }

  absl::Status Finish() {
    CACHEWATCH_ASSIGN_OR_RETURN(AckTally tally, stream_.Finish());
    std::cout << "sent " << sent_ / 2 << " turns (" << sent_ << " records); "
              << already_held_
              << " turns the daemon already held were not sent again\n"
              << DescribeTally(tally, sent_);
    if (tally.refused() > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the daemon refused ", tally.refused(), " of ", sent_, " records"));
    }
    return absl::OkStatus();
  }

 private:
  // The request time of the latest turn the daemon holds for the lane of
  // `snapshot`, asked once per lane; INT64_MIN when it holds none.
  absl::StatusOr<int64_t> HeldUntil(const v1::Snapshot& snapshot) {
    const std::string lane = absl::StrCat(
        snapshot.agent(), "\n", snapshot.session_id(), "\n", snapshot.lane());
    if (auto it = held_.find(lane); it != held_.end()) return it->second;
    v1::GetLaneTimelineRequest request;
    request.set_agent(snapshot.agent());
    request.set_session_id(snapshot.session_id());
    request.set_lane(snapshot.lane());
    request.set_limit(1);
    v1::GetLaneTimelineResponse response;
    grpc::ClientContext context;
    context.set_deadline(UnaryDeadline(global_));
    Authorize(context, global_);
    const grpc::Status status =
        stub_.GetLaneTimeline(&context, request, &response);
    if (!status.ok()) {
      return FromRpcStatus(status, "GetLaneTimeline", global_);
    }
    int64_t held = std::numeric_limits<int64_t>::min();
    for (const v1::TurnSummary& turn : response.turns()) {
      held = std::max(held,
                      TimeUtil::TimestampToMicroseconds(turn.request_time()));
    }
    held_.emplace(lane, held);
    return held;
  }

  v1::CacheWatch::Stub& stub_;
  const GlobalOptions& global_;
  RecordStream stream_;
  std::map<std::string, int64_t> held_;
  int64_t sent_ = 0;
  int64_t already_held_ = 0;
};

absl::Status RunImport(const GlobalOptions& global,
                       const ImportOptions& options) {
  CACHEWATCH_ASSIGN_OR_RETURN(TranscriptAgent agent,
                              ParseTranscriptAgent(options.agent));
  CACHEWATCH_ASSIGN_OR_RETURN(ClassifierOptions classifier,
                              ClassifierOptionsFor(options));
  CACHEWATCH_ASSIGN_OR_RETURN(
      std::vector<std::string> files,
      FindTranscriptFiles(agent, options.paths.empty()
                                     ? DefaultTranscriptPaths(agent)
                                     : options.paths));

  ReadTally tally;
  SeenRequests seen;
  Progress progress(files.size());
  if (!options.to.empty()) {
    GlobalOptions to = global;
    to.address = options.to;
    CACHEWATCH_ASSIGN_OR_RETURN(std::unique_ptr<v1::CacheWatch::Stub> stub,
                                ConnectToDaemon(to));
    DaemonSender sender(*stub, to);
    absl::Status sending;
    for (const std::string& file : files) {
      absl::Status read = ReadTranscriptFile(agent, file, tally, seen,
                                             [&](TranscriptTurn turn) {
                                               if (sending.ok())
                                                 sending = sender.Send(turn);
                                             });
      if (!read.ok()) return read;
      if (!sending.ok()) return sending;
      progress.Update(tally);
    }
    progress.Done();
    std::cout << "read " << tally.files << " files, " << tally.requests
              << " requests (" << tally.duplicate_requests
              << " duplicate request lines, " << tally.corrupt_lines
              << " corrupt lines, " << tally.partial_lines
              << " partial last lines skipped)\n";
    return sender.Finish();
  }

  ImportAnalyzer analyzer(std::move(classifier));
  for (const std::string& file : files) {
    analyzer.BeginFile();
    absl::Status read =
        ReadTranscriptFile(agent, file, tally, seen,
                           [&](TranscriptTurn turn) { analyzer.Add(turn); });
    analyzer.EndFile();
    if (!read.ok()) return read;
    progress.Update(tally);
  }
  progress.Done();
  if (options.json) {
    std::cout << ImportJson(analyzer.report(), tally).dump() << "\n";
  } else {
    std::cout << ImportText(analyzer.report(), tally, options.verbose);
  }
  return absl::OkStatus();
}

}  // namespace

void AddImportCommand(CLI::App& app, const GlobalOptions& global,
                      absl::Status& result) {
  auto options = std::make_shared<ImportOptions>();
  CLI::App* command = app.add_subcommand(
      "import",
      "Classify the requests in Claude Code, Codex CLI or Gemini CLI session "
      "logs (the breaks already paid for)");
  command
      ->add_option(
          "agent", options->agent,
          "claude-code (~/.claude/projects), codex (~/.codex/sessions) "
          "or gemini (~/.gemini/tmp)")
      ->required()
      ->check(CLI::IsMember({"claude-code", "codex", "gemini"}));
  command->add_option("paths", options->paths,
                      "Session files or directories (searched recursively); "
                      "default: the agent's own");
  command->add_flag("--json", options->json,
                    "Print the report as one JSON object");
  command->add_flag("--verbose", options->verbose,
                    "List every kind of skipped line, the first unreadable "
                    "lines and the agent versions seen");
  command
      ->add_option("--config", options->config,
                   "The daemon's YAML config file: its prices, TTLs and "
                   "thresholds apply")
      ->check(CLI::ExistingFile);
  command->add_option("--price", options->prices,
                      "MODEL=INPUT,WRITE_5M,WRITE_1H,READ in USD per million "
                      "tokens, as the daemon takes it (repeatable)");
  command->add_option("--to", options->to,
                      "Send the turns to the daemon at this address instead; "
                      "turns it already holds are not sent again");
  command->callback(
      [options, &global, &result] { result = RunImport(global, *options); });
}

}  // namespace cachewatch::cli
