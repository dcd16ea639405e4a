#include "cli/replay.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cli/daemon_connection.h"
#include "cli/record_stream.h"
#include "cli/trace.h"
#include "daemon/util/status_macros.h"

namespace cachewatch::cli {
namespace {

struct ReplayOptions {
  std::string path;
  double records_per_second = 0;  // 0: as fast as the stream takes them.
  bool retime = false;
};

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Shifts every timestamp by the same amount so that the latest is now:
// verdicts depend only on differences between client times.
void Retime(std::vector<TraceRecord>& records) {
  if (records.empty()) return;
  int64_t latest = RecordTimeMicros(records.front().record);
  for (const TraceRecord& entry : records) {
    latest = std::max(latest, RecordTimeMicros(entry.record));
  }
  const int64_t delta = NowMicros() - latest;
  for (TraceRecord& entry : records) ShiftRecordTime(delta, entry.record);
}

absl::Status RunReplay(const GlobalOptions& global,
                       const ReplayOptions& options) {
  CACHEWATCH_ASSIGN_OR_RETURN(Trace trace, ReadTrace(options.path));
  for (const TraceLineError& error : trace.errors) {
    std::cerr << options.path << ":" << error.line << ": "
              << error.status.message() << "\n";
  }
  if (options.retime) Retime(trace.records);
  CACHEWATCH_ASSIGN_OR_RETURN(std::unique_ptr<v1::CacheWatch::Stub> stub,
                              ConnectToDaemon(global));
  RecordStream stream(*stub, global);
  const auto start = std::chrono::steady_clock::now();
  size_t sent = 0;
  for (const TraceRecord& entry : trace.records) {
    if (options.records_per_second > 0) {
      std::this_thread::sleep_until(
          start +
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
              std::chrono::duration<double>(sent /
                                            options.records_per_second)));
    }
    if (!stream.Send(entry.record)) break;
    ++sent;
  }
  CACHEWATCH_ASSIGN_OR_RETURN(AckTally tally, stream.Finish());
  std::cout << DescribeTally(tally, sent);
  if (tally.refused() > 0 || sent < trace.records.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the daemon refused ", tally.refused(), " of ", sent, " records"));
  }
  return absl::OkStatus();
}

}  // namespace

void AddReplayCommand(CLI::App& app, const GlobalOptions& global,
                      absl::Status& result) {
  auto options = std::make_shared<ReplayOptions>();
  CLI::App* command = app.add_subcommand(
      "replay", "Send a recorded trace to the daemon over the Record stream");
  command->add_option("trace", options->path, "The trace (JSON lines)")
      ->required();
  command
      ->add_option("--rate", options->records_per_second,
                   "Records per second (e.g. 20 or 20/s); 0 sends as fast as "
                   "the daemon takes them")
      ->transform([](std::string value) {
        if (value.ends_with("/s")) value.resize(value.size() - 2);
        return value;
      })
      ->check(CLI::NonNegativeNumber);
  command->add_flag("--retime", options->retime,
                    "Shift all timestamps so that the latest is now (verdicts "
                    "only depend on time differences)");
  command->callback(
      [options, &global, &result] { result = RunReplay(global, *options); });
}

}  // namespace cachewatch::cli
