#include "cli/commands_query.h"

#include <google/protobuf/util/time_util.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/daemon_connection.h"
#include "cli/format.h"
#include "daemon/core/classifier.h"
#include "daemon/util/status_macros.h"

namespace cachewatch::cli {
namespace {

using google::protobuf::util::TimeUtil;

// The most breaks a ListBreaks page may hold (the service's maximum).
constexpr int kMaxPageSize = 1000;

struct Filters {
  std::string agent;
  std::string model;
  std::string reason;
  std::string session;
  std::string lane;
};

void AddFilterOptions(CLI::App& command, Filters& filters, bool with_lane) {
  command.add_option("--agent", filters.agent, "Only this agent");
  command.add_option("--model", filters.model, "Only this model");
  command.add_option("--reason", filters.reason,
                     "Only this primary reason (e.g. tools_order_changed)");
  command.add_option("--session", filters.session, "Only this session id");
  if (with_lane) command.add_option("--lane", filters.lane, "Only this lane");
}

absl::StatusOr<v1::Reason> ReasonFilter(const Filters& filters) {
  if (filters.reason.empty()) return v1::REASON_UNSPECIFIED;
  return ParseReason(filters.reason);
}

// tail ----------------------------------------------------------------------

absl::Status RunTail(const GlobalOptions& global, const Filters& filters) {
  CACHEWATCH_ASSIGN_OR_RETURN(v1::Reason reason, ReasonFilter(filters));
  v1::WatchBreaksRequest request;
  request.set_agent(filters.agent);
  request.set_model(filters.model);
  request.set_reason(reason);
  request.set_session_id(filters.session);
  CACHEWATCH_ASSIGN_OR_RETURN(std::unique_ptr<v1::CacheWatch::Stub> stub,
                              ConnectToDaemon(global));
  grpc::ClientContext context;
  Authorize(context, global);
  std::unique_ptr<grpc::ClientReader<v1::PromptCacheBreak>> reader =
      stub->WatchBreaks(&context, request);
  v1::PromptCacheBreak cache_break;
  while (reader->Read(&cache_break)) {
    std::cout << BreakLine(cache_break) << std::endl;
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return FromRpcStatus(status, "WatchBreaks", global);
  return absl::UnavailableError("the daemon ended the break stream");
}

// breaks --------------------------------------------------------------------

struct BreaksOptions {
  Filters filters;
  std::string since;
  int limit = 50;
  bool json = false;
};

absl::StatusOr<v1::ListBreaksRequest> ListRequest(
    const BreaksOptions& options) {
  v1::ListBreaksRequest request;
  CACHEWATCH_ASSIGN_OR_RETURN(v1::Reason reason, ReasonFilter(options.filters));
  request.set_reason(reason);
  request.set_agent(options.filters.agent);
  request.set_model(options.filters.model);
  request.set_session_id(options.filters.session);
  request.set_lane(options.filters.lane);
  if (!options.since.empty()) {
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    CACHEWATCH_ASSIGN_OR_RETURN(google::protobuf::Timestamp since,
                                ParseSince(options.since, now));
    *request.mutable_since() = since;
  }
  return request;
}

absl::Status RunBreaks(const GlobalOptions& global,
                       const BreaksOptions& options) {
  CACHEWATCH_ASSIGN_OR_RETURN(v1::ListBreaksRequest request,
                              ListRequest(options));
  CACHEWATCH_ASSIGN_OR_RETURN(std::unique_ptr<v1::CacheWatch::Stub> stub,
                              ConnectToDaemon(global));
  std::vector<v1::PromptCacheBreak> breaks;
  while (breaks.size() < static_cast<size_t>(options.limit)) {
    request.set_page_size(
        std::min<int>(kMaxPageSize, options.limit - breaks.size()));
    grpc::ClientContext context;
    context.set_deadline(UnaryDeadline(global));
    Authorize(context, global);
    v1::ListBreaksResponse response;
    CACHEWATCH_RETURN_IF_ERROR(FromRpcStatus(
        stub->ListBreaks(&context, request, &response), "ListBreaks", global));
    breaks.insert(breaks.end(), response.breaks().begin(),
                  response.breaks().end());
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  if (breaks.size() > static_cast<size_t>(options.limit)) {
    breaks.resize(options.limit);
  }
  if (!options.json) {
    std::cout << BreakTable(breaks);
    return absl::OkStatus();
  }
  for (const v1::PromptCacheBreak& cache_break : breaks) {
    CACHEWATCH_ASSIGN_OR_RETURN(std::string json, ToJsonLine(cache_break));
    std::cout << json << "\n";
  }
  return absl::OkStatus();
}

// explain -------------------------------------------------------------------

struct ExplainOptions {
  std::string break_id;
  bool json = false;
};

absl::Status RunExplain(const GlobalOptions& global,
                        const ExplainOptions& options) {
  CACHEWATCH_ASSIGN_OR_RETURN(std::unique_ptr<v1::CacheWatch::Stub> stub,
                              ConnectToDaemon(global));
  v1::ExplainBreakRequest request;
  request.set_break_id(options.break_id);
  v1::ExplainBreakResponse response;
  grpc::ClientContext context;
  context.set_deadline(UnaryDeadline(global));
  Authorize(context, global);
  const grpc::Status status = stub->ExplainBreak(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    return absl::NotFoundError(
        absl::StrCat("no break with id ", options.break_id));
  }
  if (!status.ok()) return FromRpcStatus(status, "ExplainBreak", global);
  if (!options.json) {
    std::cout << ExplainText(response);
    return absl::OkStatus();
  }
  CACHEWATCH_ASSIGN_OR_RETURN(std::string json, ToJsonLine(response));
  std::cout << json << "\n";
  return absl::OkStatus();
}

// lane ----------------------------------------------------------------------

struct LaneOptions {
  std::string lane_key;
  int limit = 200;
};

absl::Status RunLane(const GlobalOptions& global, const LaneOptions& options) {
  const std::vector<std::string> parts = absl::StrSplit(options.lane_key, '/');
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty() ||
      parts[1].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lane: expected <agent>/<session>[/<lane>], got \"",
                     options.lane_key, "\""));
  }
  v1::GetLaneTimelineRequest request;
  request.set_agent(parts[0]);
  request.set_session_id(parts[1]);
  if (parts.size() == 3) request.set_lane(parts[2]);
  request.set_limit(options.limit);
  CACHEWATCH_ASSIGN_OR_RETURN(std::unique_ptr<v1::CacheWatch::Stub> stub,
                              ConnectToDaemon(global));
  grpc::ClientContext context;
  context.set_deadline(UnaryDeadline(global));
  Authorize(context, global);
  v1::GetLaneTimelineResponse response;
  CACHEWATCH_RETURN_IF_ERROR(
      FromRpcStatus(stub->GetLaneTimeline(&context, request, &response),
                    "GetLaneTimeline", global));
  if (response.turns().empty()) {
    return absl::NotFoundError(
        absl::StrCat("no turns recorded for lane ", options.lane_key));
  }
  std::cout << TimelineTable(response);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::Reason> ParseReason(const std::string& text) {
  const std::string upper = absl::AsciiStrToUpper(text);
  v1::Reason reason;
  if ((v1::Reason_Parse(upper, &reason) ||
       v1::Reason_Parse("REASON_" + upper, &reason)) &&
      reason != v1::REASON_UNSPECIFIED) {
    return reason;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--reason: unknown reason \"", text,
                   "\" (e.g. tools_order_changed, system_changed, "
                   "ttl_expired)"));
}

absl::StatusOr<google::protobuf::Timestamp> ParseSince(const std::string& text,
                                                       int64_t now_seconds) {
  google::protobuf::Timestamp time;
  if (TimeUtil::FromString(text, &time)) return time;
  static constexpr std::pair<char, int64_t> kUnits[] = {
      {'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
  int64_t amount = 0;
  if (!text.empty() &&
      absl::SimpleAtoi(text.substr(0, text.size() - 1), &amount) &&
      amount >= 0) {
    for (const auto& [unit, seconds] : kUnits) {
      if (text.back() == unit) {
        time.set_seconds(now_seconds - amount * seconds);
        return time;
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--since: expected a duration like 15m, 1h, 2d or an RFC 3339 time, "
      "got \"",
      text, "\""));
}

void AddQueryCommands(CLI::App& app, const GlobalOptions& global,
                      absl::Status& result) {
  auto tail = std::make_shared<Filters>();
  CLI::App* tail_command = app.add_subcommand(
      "tail",
      "Print each break as the daemon classifies it, until interrupted");
  AddFilterOptions(*tail_command, *tail, /*with_lane=*/false);
  tail_command->callback(
      [tail, &global, &result] { result = RunTail(global, *tail); });

  auto breaks = std::make_shared<BreaksOptions>();
  CLI::App* breaks_command =
      app.add_subcommand("breaks", "List stored breaks, newest first");
  AddFilterOptions(*breaks_command, breaks->filters, /*with_lane=*/true);
  breaks_command->add_option("--since", breaks->since,
                             "Only breaks since a duration ago (1h, 30m, 2d) "
                             "or an RFC 3339 time");
  breaks_command->add_option("--limit", breaks->limit, "At most this many")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  breaks_command->add_flag(
      "--json", breaks->json,
      "One JSON object per line (protobuf JSON of PromptCacheBreak)");
  breaks_command->callback(
      [breaks, &global, &result] { result = RunBreaks(global, *breaks); });

  auto explain = std::make_shared<ExplainOptions>();
  CLI::App* explain_command = app.add_subcommand(
      "explain", "Show one break: the two turns it compares, side by side");
  explain_command->add_option("break_id", explain->break_id, "The break id")
      ->required();
  explain_command->add_flag("--json", explain->json,
                            "Print the ExplainBreakResponse as JSON");
  explain_command->callback(
      [explain, &global, &result] { result = RunExplain(global, *explain); });

  auto lane = std::make_shared<LaneOptions>();
  CLI::App* lane_command =
      app.add_subcommand("lane", "Show one lane's turns, oldest first");
  lane_command
      ->add_option("lane", lane->lane_key,
                   "<agent>/<session>[/<lane>] (lane defaults to main)")
      ->required();
  lane_command->add_option("--limit", lane->limit, "Most recent turns")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  lane_command->callback(
      [lane, &global, &result] { result = RunLane(global, *lane); });
}

}  // namespace cachewatch::cli
