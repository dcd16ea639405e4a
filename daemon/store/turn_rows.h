// Reading back what the stores wrote: the rows both stores' queries select
// (SqliteStore's daemon/store/sqlite/read_connection.cc, PostgresStore's
// daemon/store/postgres/postgres_queries.cc) decode the same way, since both
// lay their columns out alike (columns.h). Templates over the row type: a
// SQLite Statement positioned on a row, or a PgRow; each offers
// IsNull(column), Int(column) (0 for NULL), Text(column) ("" for NULL) and
// Blob(column).
//
// Everything returns DataLoss for a value the store could not have written.
// Pure functions of the row (and of the tool lists they are given);
// thread-safe as their arguments are.
#ifndef CACHEWATCH_DAEMON_STORE_TURN_ROWS_H_
#define CACHEWATCH_DAEMON_STORE_TURN_ROWS_H_

#include <google/protobuf/repeated_field.h>
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "daemon/core/lane_history.h"
#include "daemon/core/turn.h"
#include "daemon/store/columns.h"
#include "daemon/store/record.h"
#include "daemon/util/status_macros.h"

// The columns a Turn and its snapshot are rebuilt from, in TurnColumn order.
#define CACHEWATCH_TURN_COLUMNS                                             \
  "agent, session_id, lane, request_id, provider, model, request_time_us, " \
  "snapshot_received, usage_received, system_hash, system_sections, "       \
  "tool_list_hash, options_hash, cache_enabled, cache_automatic, "          \
  "cache_ttl_seconds, breakpoints, message_chain, expected_drop, "          \
  "tool_order_policy, uncached_input_tokens, cache_read_tokens, "           \
  "cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens, "      \
  "output_tokens, provider_miss_reason, provider_missed_tokens"

// The TTL (3600 or 300) the most recent classified turn with a 5 m / 1 h
// write split, up to the turn of row `r`, showed; NULL when none did.
#define CACHEWATCH_OBSERVED_TTL                                           \
  "(SELECT CASE WHEN w.cache_write_1h_tokens > 0 THEN 3600 ELSE 300 END " \
  "FROM turns AS w "                                                      \
  "WHERE w.agent = r.agent AND w.session_id = r.session_id "              \
  "AND w.lane = r.lane AND w.request_time_us <= r.request_time_us "       \
  "AND (w.cache_write_1h_tokens > 0 OR w.cache_write_5m_tokens > 0) "     \
  "AND w.verdict IS NOT NULL AND w.verdict <> 'pending' "                 \
  "ORDER BY w.request_time_us DESC, w.request_id DESC LIMIT 1)"

namespace cachewatch {

// The position of each of CACHEWATCH_TURN_COLUMNS.
enum TurnColumn {
  kAgent,
  kSessionId,
  kLane,
  kRequestId,
  kProvider,
  kModel,
  kRequestTimeUs,
  kSnapshotReceived,
  kUsageReceived,
  kSystemHash,
  kSystemSections,
  kToolListHash,
  kOptionsHash,
  kCacheEnabled,
  kCacheAutomatic,
  kCacheTtlSeconds,
  kBreakpoints,
  kMessageChain,
  kExpectedDrop,
  kToolOrderPolicy,
  kUncachedInputTokens,
  kCacheReadTokens,
  kCacheWriteTokens,
  kCacheWrite5mTokens,
  kCacheWrite1hTokens,
  kOutputTokens,
  kProviderMissReason,
  kProviderMissedTokens,
  kTurnColumnCount,
};

// The lane query's columns after the turn columns (both stores' kSelectLane).
enum LaneRowColumn {
  kLaneVerdict = kTurnColumnCount,
  kLaneExpectedReuseTokens,
  kLaneMissedTokens,
  kLaneReceivedAtUs,
  kLaneBreakEvent,
};

// An enum column (its value's name, see columns.h); the unspecified value
// for NULL. `what` names the column in the error.
template <typename Enum, typename Row>
absl::StatusOr<Enum> EnumColumn(const Row& row, int column,
                                std::string_view what) {
  if (row.IsNull(column)) return static_cast<Enum>(0);
  const std::optional<Enum> value = ParseEnumText<Enum>(row.Text(column));
  if (!value.has_value()) {
    return absl::DataLossError(
        absl::StrCat("unknown ", std::string(what), " \"",
                     std::string(row.Text(column)), "\""));
  }
  return *value;
}

// A hash column (16 hex digits); 0 for NULL.
template <typename Row>
absl::StatusOr<uint64_t> HashColumn(const Row& row, int column,
                                    std::string_view what) {
  if (row.IsNull(column)) return 0;
  const std::optional<uint64_t> hash = ParseHex64(row.Text(column));
  if (!hash.has_value()) {
    return absl::DataLossError(
        absl::StrCat("malformed ", std::string(what), " \"",
                     std::string(row.Text(column)), "\""));
  }
  return *hash;
}

// A stored break event (prompt_cache_breaks.event).
inline absl::Status ParseEvent(std::string_view bytes,
                               v1::PromptCacheBreak* event) {
  if (!event->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError("malformed prompt_cache_breaks.event");
  }
  return absl::OkStatus();
}

// The usage columns starting at `first` (uncached, read, write, 5m, 1h,
// output).
template <typename Row>
v1::NormalizedUsage UsageColumns(const Row& row, int first) {
  v1::NormalizedUsage usage;
  usage.set_uncached_input_tokens(row.Int(first));
  usage.set_cache_read_tokens(row.Int(first + 1));
  usage.set_cache_write_tokens(row.Int(first + 2));
  usage.set_cache_write_5m_tokens(row.Int(first + 3));
  usage.set_cache_write_1h_tokens(row.Int(first + 4));
  usage.set_output_tokens(row.Int(first + 5));
  return usage;
}

// The Turn of a row selected with the turn columns, around `snapshot`.
template <typename Row>
absl::StatusOr<Turn> TurnOf(const Row& row,
                            std::shared_ptr<const v1::Snapshot> snapshot) {
  Turn turn;
  turn.request_id = std::string(row.Text(kRequestId));
  turn.snapshot = std::move(snapshot);
  if (row.Int(kUsageReceived) != 0) {
    turn.usage = UsageColumns(row, kUncachedInputTokens);
  }
  if (!row.IsNull(kProviderMissReason)) {
    v1::ProviderCacheDiagnostics diagnostics;
    diagnostics.set_cache_miss_reason(
        std::string(row.Text(kProviderMissReason)));
    diagnostics.set_cache_missed_input_tokens(row.Int(kProviderMissedTokens));
    turn.provider_diagnostics = std::move(diagnostics);
  }
  CACHEWATCH_ASSIGN_OR_RETURN(
      const v1::Provider provider,
      EnumColumn<v1::Provider>(row, kProvider, "provider"));
  turn.provider = provider;
  turn.model = std::string(row.Text(kModel));
  turn.request_time_us = row.Int(kRequestTimeUs);
  return turn;
}

// The snapshot stored in a row selected with the turn columns, or null when
// the turn has none. `tools` gives a tool list by its hash: its
// Get(const std::string&) returns
// absl::StatusOr<const google::protobuf::RepeatedPtrField<v1::ToolRef>*>.
template <typename Row, typename Tools>
absl::StatusOr<std::shared_ptr<const v1::Snapshot>> SnapshotOf(const Row& row,
                                                               Tools& tools) {
  if (row.Int(kSnapshotReceived) == 0) return nullptr;
  auto snapshot = std::make_shared<v1::Snapshot>();
  snapshot->set_agent(std::string(row.Text(kAgent)));
  snapshot->set_session_id(std::string(row.Text(kSessionId)));
  snapshot->set_lane(std::string(row.Text(kLane)));
  snapshot->set_request_id(std::string(row.Text(kRequestId)));
  if (!row.IsNull(kRequestTimeUs)) {
    *snapshot->mutable_request_time() =
        google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(
            row.Int(kRequestTimeUs));
  }
  CACHEWATCH_ASSIGN_OR_RETURN(
      const v1::Provider provider,
      EnumColumn<v1::Provider>(row, kProvider, "provider"));
  snapshot->set_provider(provider);
  snapshot->set_model(std::string(row.Text(kModel)));
  CACHEWATCH_ASSIGN_OR_RETURN(const uint64_t system_hash,
                              HashColumn(row, kSystemHash, "system_hash"));
  snapshot->set_system_hash(system_hash);
  if (!row.IsNull(kSystemSections)) {
    CACHEWATCH_RETURN_IF_ERROR(ParseSectionsJson(
        row.Text(kSystemSections), snapshot->mutable_system_sections()));
  }
  if (!row.IsNull(kToolListHash)) {
    CACHEWATCH_ASSIGN_OR_RETURN(
        const google::protobuf::RepeatedPtrField<v1::ToolRef>* list,
        tools.Get(std::string(row.Text(kToolListHash))));
    *snapshot->mutable_tools() = *list;
  }
  if (!row.IsNull(kCacheEnabled)) {
    v1::CacheControl* control = snapshot->mutable_cache_control();
    control->set_enabled(row.Int(kCacheEnabled) != 0);
    control->set_automatic(row.Int(kCacheAutomatic) != 0);
    control->set_ttl_seconds(static_cast<uint32_t>(row.Int(kCacheTtlSeconds)));
    if (!row.IsNull(kBreakpoints)) {
      CACHEWATCH_RETURN_IF_ERROR(ParseBreakpointsJson(
          row.Text(kBreakpoints), control->mutable_breakpoints()));
    }
  }
  CACHEWATCH_ASSIGN_OR_RETURN(const uint64_t options_hash,
                              HashColumn(row, kOptionsHash, "options_hash"));
  snapshot->set_options_hash(options_hash);
  CACHEWATCH_RETURN_IF_ERROR(ParseChainBlob(row.Blob(kMessageChain),
                                            snapshot->mutable_message_chain()));
  CACHEWATCH_ASSIGN_OR_RETURN(
      const v1::ExpectedDrop expected_drop,
      EnumColumn<v1::ExpectedDrop>(row, kExpectedDrop, "expected_drop"));
  snapshot->set_expected_drop(expected_drop);
  CACHEWATCH_ASSIGN_OR_RETURN(const v1::ToolOrderPolicy policy,
                              EnumColumn<v1::ToolOrderPolicy>(
                                  row, kToolOrderPolicy, "tool_order_policy"));
  snapshot->set_tool_order_policy(policy);
  return snapshot;
}

// A lane's baseline as LoadRecentLanes selects it: the turn columns, then
// the observed TTL (CACHEWATCH_OBSERVED_TTL).
template <typename Row, typename Tools>
absl::StatusOr<RestoredLane> RestoredLaneOf(const Row& row, Tools& tools) {
  CACHEWATCH_ASSIGN_OR_RETURN(std::shared_ptr<const v1::Snapshot> snapshot,
                              SnapshotOf(row, tools));
  CACHEWATCH_ASSIGN_OR_RETURN(Turn turn, TurnOf(row, std::move(snapshot)));
  RestoredLane lane;
  lane.key = {std::string(row.Text(kAgent)), std::string(row.Text(kSessionId)),
              std::string(row.Text(kLane))};
  lane.state.last_turn = std::move(turn);
  lane.state.observed_ttl_seconds =
      static_cast<uint32_t>(row.Int(kTurnColumnCount));
  return lane;
}

// Turns the lane query's TTL fallback (LaneHistory::EarlierObservedTtl)
// looks back over.
inline constexpr int kLaneTtlLookback = 1000;

// Where a row holds a turn's classification.
struct ClassificationColumns {
  int verdict;
  int expected_reuse_tokens;
  int missed_tokens;
  int expected_drop;
  int break_event;
};

// Where the lane query (LaneRowColumn) holds it.
inline constexpr ClassificationColumns kLaneClassificationColumns{
    kLaneVerdict, kLaneExpectedReuseTokens, kLaneMissedTokens, kExpectedDrop,
    kLaneBreakEvent};

// The classification in `row`'s `columns`: an expected drop with its hint, a
// break with its event.
template <typename Row>
absl::StatusOr<v1::TurnClassification> ClassificationOf(
    const Row& row, const ClassificationColumns& columns) {
  v1::TurnClassification classification;
  CACHEWATCH_ASSIGN_OR_RETURN(
      const v1::Verdict verdict,
      EnumColumn<v1::Verdict>(row, columns.verdict, "verdict"));
  classification.set_verdict(verdict);
  classification.set_expected_reuse_tokens(
      row.Int(columns.expected_reuse_tokens));
  classification.set_missed_tokens(row.Int(columns.missed_tokens));
  if (verdict == v1::VERDICT_EXPECTED_DROP) {
    CACHEWATCH_ASSIGN_OR_RETURN(
        const v1::ExpectedDrop hint,
        EnumColumn<v1::ExpectedDrop>(row, columns.expected_drop,
                                     "expected_drop"));
    classification.set_expected_drop(hint);
  }
  if (verdict == v1::VERDICT_BREAK && !row.IsNull(columns.break_event)) {
    CACHEWATCH_RETURN_IF_ERROR(ParseEvent(
        row.Blob(columns.break_event), classification.mutable_cache_break()));
  }
  return classification;
}

// What RestoreLaneState decides a row of the lane query by (TurnOf gives
// the whole turn).
template <typename Row>
absl::Status StoredTurnOf(const Row& row, StoredTurn& stored) {
  stored.request_id = std::string(row.Text(kRequestId));
  stored.request_time_us = row.Int(kRequestTimeUs);
  stored.has_snapshot = row.Int(kSnapshotReceived) != 0;
  stored.cache_write_5m_tokens = row.Int(kCacheWrite5mTokens);
  stored.cache_write_1h_tokens = row.Int(kCacheWrite1hTokens);
  stored.received_us = row.Int(kLaneReceivedAtUs);
  stored.classification.reset();
  if (!row.IsNull(kLaneVerdict) && row.Text(kLaneVerdict) != "pending") {
    CACHEWATCH_ASSIGN_OR_RETURN(
        stored.classification,
        ClassificationOf(row, kLaneClassificationColumns));
  }
  return absl::OkStatus();
}

// The columns of both stores' timeline query, in order.
#define CACHEWATCH_TIMELINE_COLUMNS                                      \
  "request_id, request_time_us, response_time_us, model, "               \
  "snapshot_received, usage_received, uncached_input_tokens, "           \
  "cache_read_tokens, cache_write_tokens, cache_write_5m_tokens, "       \
  "cache_write_1h_tokens, output_tokens, prompt_total_tokens, verdict, " \
  "primary_reason, break_id, tool_count"

// The turns a timeline asked for `limit` turns returns at most: 200 when
// `limit` is not positive, never more than 5000.
inline int TimelineLimit(int limit) {
  constexpr int kDefaultTimelineLimit = 200;
  constexpr int kMaxTimelineLimit = 5000;
  return limit <= 0 ? kDefaultTimelineLimit
                    : std::min(limit, kMaxTimelineLimit);
}

// A row of the timeline query (CACHEWATCH_TIMELINE_COLUMNS).
template <typename Row>
absl::StatusOr<v1::TurnSummary> TurnSummaryOf(const Row& s) {
  using google::protobuf::util::TimeUtil;
  v1::TurnSummary turn;
  turn.set_request_id(std::string(s.Text(0)));
  if (!s.IsNull(1)) {
    *turn.mutable_request_time() = TimeUtil::MicrosecondsToTimestamp(s.Int(1));
  }
  if (!s.IsNull(2)) {
    *turn.mutable_response_time() = TimeUtil::MicrosecondsToTimestamp(s.Int(2));
  }
  turn.set_model(std::string(s.Text(3)));
  turn.set_snapshot_received(s.Int(4) != 0);
  turn.set_usage_received(s.Int(5) != 0);
  if (turn.usage_received()) {
    *turn.mutable_usage() = UsageColumns(s, 6);
    const int64_t prompt_total = s.Int(12);
    if (prompt_total > 0) {
      turn.set_hit_ratio(static_cast<double>(turn.usage().cache_read_tokens()) /
                         static_cast<double>(prompt_total));
    }
  }
  CACHEWATCH_ASSIGN_OR_RETURN(const v1::Verdict verdict,
                              EnumColumn<v1::Verdict>(s, 13, "verdict"));
  turn.set_verdict(verdict);
  CACHEWATCH_ASSIGN_OR_RETURN(const v1::Reason reason,
                              EnumColumn<v1::Reason>(s, 14, "primary_reason"));
  turn.set_primary_reason(reason);
  turn.set_break_id(std::string(s.Text(15)));
  turn.set_tool_count(static_cast<int32_t>(s.Int(16)));
  return turn;
}

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_TURN_ROWS_H_
