// PostgresStore's queries: ListBreaks, ExplainBreak, LaneTimeline and the
// lane state (FindClassification, LoadRecentLanes, LoadLane), with the SQLite
// store's semantics (daemon/store/sqlite/read_connection.cc): the same orders,
// page tokens (break_pages.h), limits and reconstruction of turns from their
// columns (turn_rows.h).
#include <google/protobuf/util/time_util.h>

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/classifier.h"
#include "daemon/core/lane_history.h"
#include "daemon/store/break_pages.h"
#include "daemon/store/columns.h"
#include "daemon/store/postgres/pg_write_statements.h"
#include "daemon/store/postgres/postgres_store.h"
#include "daemon/store/turn_rows.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

using google::protobuf::util::TimeUtil;

constexpr const char* kSelectBreak = R"sql(
SELECT agent, session_id, lane, event FROM prompt_cache_breaks
WHERE break_id = $1::text LIMIT 1)sql";

constexpr const char* kSelectTurn = "SELECT " CACHEWATCH_TURN_COLUMNS R"sql(
FROM turns
WHERE agent = $1::text AND session_id = $2::text AND lane = $3::text
  AND request_id = $4::text LIMIT 1)sql";

constexpr const char* kSelectToolEntries = R"sql(
SELECT name, schema_hash FROM tool_list_entries WHERE list_hash = $1::text
ORDER BY position)sql";

constexpr const char* kSelectTimeline =
    "SELECT " CACHEWATCH_TIMELINE_COLUMNS R"sql(
FROM turns
WHERE agent = $1::text AND session_id = $2::text AND lane = $3::text
ORDER BY request_time_us DESC, request_id DESC
LIMIT $4::bigint)sql";

constexpr const char* kSelectClassification = R"sql(
SELECT t.verdict, t.expected_reuse_tokens, t.missed_tokens, t.expected_drop,
  (SELECT b.event FROM prompt_cache_breaks AS b
   WHERE b.break_id = t.break_id LIMIT 1)
FROM turns AS t
WHERE t.agent = $1::text AND t.session_id = $2::text AND t.lane = $3::text
  AND t.request_id = $4::text LIMIT 1)sql";

constexpr const char* kSelectRecentLanes =
    "SELECT " CACHEWATCH_TURN_COLUMNS ", " CACHEWATCH_OBSERVED_TTL R"sql(
FROM (
  SELECT DISTINCT ON (agent, session_id, lane) * FROM turns
  WHERE request_time_us >= $1::bigint
    AND verdict IS NOT NULL AND verdict <> 'pending'
  ORDER BY agent, session_id, lane, request_time_us DESC, request_id DESC
) AS r)sql";

// One lane's newest turns within retention, newest first: the classified
// ones and those waiting for a pair received since $5 (the snapshots given
// up before are left out), each with its classification and break event.
// One range of turns_by_lane_time read backwards, as the SQLite store's
// (daemon/store/sqlite/read_connection.cc); a lane never seen costs one
// index seek per partition.
constexpr const char* kSelectLane = "SELECT " CACHEWATCH_TURN_COLUMNS R"sql(,
  verdict, expected_reuse_tokens, missed_tokens, received_at_us,
  (SELECT b.event FROM prompt_cache_breaks AS b
   WHERE b.break_id = t.break_id LIMIT 1)
FROM (
  SELECT * FROM turns
  WHERE agent = $1::text AND session_id = $2::text AND lane = $3::text
    AND request_time_us >= $4::bigint
    AND ((verdict IS NOT NULL AND verdict <> 'pending')
         OR received_at_us >= $5::bigint)
  ORDER BY request_time_us DESC, request_id DESC
  LIMIT $6::bigint) AS t
ORDER BY request_time_us DESC, request_id DESC)sql";

// The TTL a lane's most recent classified turn with a 5 m / 1 h write split
// showed, among its last $5 turns (LoadLane's fallback when none of the
// turns it read showed one).
constexpr const char* kSelectLaneTtl = R"sql(
SELECT CASE WHEN cache_write_1h_tokens > 0 THEN 3600 ELSE 300 END
FROM (
  SELECT cache_write_1h_tokens, cache_write_5m_tokens, verdict FROM turns
  WHERE agent = $1::text AND session_id = $2::text AND lane = $3::text
    AND request_time_us >= $4::bigint
  ORDER BY request_time_us DESC, request_id DESC
  LIMIT $5::bigint) AS recent
WHERE (cache_write_1h_tokens > 0 OR cache_write_5m_tokens > 0)
  AND verdict IS NOT NULL AND verdict <> 'pending'
LIMIT 1)sql";

// The SQL of ListBreaks for a set of filters; parameters are numbered in
// the order the filters are listed here.
std::string ListBreaksSql(unsigned filters) {
  std::string sql =
      "SELECT request_time_us, break_id, event FROM prompt_cache_breaks "
      "WHERE true";
  int n = 0;
  auto next = [&n] { return absl::StrCat("$", ++n); };
  if (filters & kSince) {
    absl::StrAppend(&sql, " AND request_time_us >= ", next(), "::bigint");
  }
  if (filters & kUntil) {
    absl::StrAppend(&sql, " AND request_time_us < ", next(), "::bigint");
  }
  if (filters & kAgentFilter) absl::StrAppend(&sql, " AND agent = ", next());
  if (filters & kSessionFilter) {
    absl::StrAppend(&sql, " AND session_id = ", next());
  }
  if (filters & kLaneFilter) absl::StrAppend(&sql, " AND lane = ", next());
  if (filters & kModelFilter) absl::StrAppend(&sql, " AND model = ", next());
  if (filters & kReasonFilter) {
    absl::StrAppend(&sql, " AND primary_reason = ", next());
  }
  if (filters & kAfterToken) {
    const std::string after_us = next();
    const std::string after_id = next();
    absl::StrAppend(&sql, " AND request_time_us <= ", after_us,
                    "::bigint AND (request_time_us < ", after_us,
                    "::bigint OR break_id < ", after_id, "::text)");
  }
  absl::StrAppend(&sql, " ORDER BY request_time_us DESC, break_id DESC LIMIT ",
                  next(), "::bigint");
  return sql;
}

PgParams KeyParams(const LaneKey& key) {
  PgParams params;
  params.Text(key.agent).Text(key.session_id).Text(LaneColumn(key));
  return params;
}

// Tool lists read while answering one query, by list hash.
class ToolListCache {
 public:
  explicit ToolListCache(PgConnection& connection) : connection_(connection) {}

  absl::StatusOr<const google::protobuf::RepeatedPtrField<v1::ToolRef>*> Get(
      const std::string& list_hash) {
    auto it = lists_.find(list_hash);
    if (it != lists_.end()) return &it->second;
    absl::StatusOr<PgResult> rows = connection_.Prepared(
        "cw_tool_entries", kSelectToolEntries, PgParams().Text(list_hash));
    if (!rows.ok()) return rows.status();
    google::protobuf::RepeatedPtrField<v1::ToolRef> tools;
    for (int i = 0; i < rows->rows(); ++i) {
      const PgRow row = rows->row(i);
      absl::StatusOr<uint64_t> hash =
          HashColumn(row, 1, "tool_list_entries.schema_hash");
      if (!hash.ok()) return hash.status();
      v1::ToolRef* tool = tools.Add();
      tool->set_name(std::string(row.Text(0)));
      tool->set_schema_hash(*hash);
    }
    return &lists_.emplace(list_hash, std::move(tools)).first->second;
  }

 private:
  PgConnection& connection_;
  std::map<std::string, google::protobuf::RepeatedPtrField<v1::ToolRef>> lists_;
};

// The rows of kSelectLane, for RestoreLaneState.
class PgLaneHistory final : public LaneHistory {
 public:
  PgLaneHistory(PgConnection& connection, const PgResult& rows,
                const LaneKey& key, int64_t since_us)
      : connection_(connection),
        rows_(rows),
        key_(key),
        since_us_(since_us),
        tools_(connection) {}

  absl::StatusOr<StoredTurn*> Next() override {
    if (next_ == rows_.rows()) return nullptr;
    const PgRow row = rows_.row(next_++);
    CACHEWATCH_RETURN_IF_ERROR(StoredTurnOf(row, turn_));
    return &turn_;
  }

  absl::StatusOr<Turn> FullTurn() override {
    return TurnOf(rows_.row(next_ - 1), nullptr);
  }

  absl::StatusOr<std::shared_ptr<const v1::Snapshot>> Snapshot() override {
    return SnapshotOf(rows_.row(next_ - 1), tools_);
  }

  absl::StatusOr<uint32_t> EarlierObservedTtl() override {
    CACHEWATCH_ASSIGN_OR_RETURN(
        const PgResult ttl,
        connection_.Prepared(
            "cw_lane_ttl", kSelectLaneTtl,
            KeyParams(key_).Int(since_us_).Int(kLaneTtlLookback)));
    if (ttl.rows() == 0) return 0;
    return static_cast<uint32_t>(ttl.row(0).Int(0));
  }

 private:
  PgConnection& connection_;
  const PgResult& rows_;
  const LaneKey& key_;
  const int64_t since_us_;
  ToolListCache tools_;
  int next_ = 0;
  StoredTurn turn_;
};

// Runs `body` in a read-only REPEATABLE READ transaction: every statement
// of it sees the database as of one moment.
template <typename Body>
absl::Status InSnapshot(PgConnection& connection, Body body) {
  CACHEWATCH_RETURN_IF_ERROR(
      connection.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  absl::Status status = body();
  if (status.ok()) status = connection.Exec("COMMIT");
  if (!status.ok() && connection.ok()) {
    connection.Exec("ROLLBACK").IgnoreError();
  }
  return status;
}

}  // namespace

absl::StatusOr<v1::ListBreaksResponse> PostgresStore::ListBreaks(
    const v1::ListBreaksRequest& request) {
  CACHEWATCH_ASSIGN_OR_RETURN(const BreakPage page, BreakPageOf(request));
  const unsigned filters = page.filters;
  const int page_size = page.size;
  // Parameters in ListBreaksSql's order.
  PgParams params;
  if (filters & kSince) {
    params.Int(TimeUtil::TimestampToMicroseconds(request.since()));
  }
  if (filters & kUntil) {
    params.Int(TimeUtil::TimestampToMicroseconds(request.until()));
  }
  if (filters & kAgentFilter) params.Text(request.agent());
  if (filters & kSessionFilter) params.Text(request.session_id());
  if (filters & kLaneFilter) params.Text(request.lane());
  if (filters & kModelFilter) params.Text(request.model());
  if (filters & kReasonFilter) params.Text(ReasonName(request.reason()));
  if (filters & kAfterToken) {
    params.Int(page.after->request_time_us).Text(page.after->break_id);
  }
  params.Int(page_size + 1);  // One more tells whether a page follows.

  absl::StatusOr<PgPool::Lease> connection = readers_->Acquire();
  if (!connection.ok()) return connection.status();
  absl::StatusOr<PgResult> rows =
      (*connection)
          ->Prepared(absl::StrCat("cw_list_breaks_", filters),
                     ListBreaksSql(filters), params);
  if (!rows.ok()) return rows.status();
  v1::ListBreaksResponse response;
  PagePosition last;
  for (int i = 0; i < rows->rows(); ++i) {
    const PgRow row = rows->row(i);
    if (response.breaks_size() == page_size) {
      response.set_next_page_token(EncodePageToken(last));
      break;
    }
    CACHEWATCH_RETURN_IF_ERROR(ParseEvent(row.Blob(2), response.add_breaks()));
    last.request_time_us = row.Int(0);
    last.break_id = std::string(row.Text(1));
  }
  return response;
}

absl::StatusOr<v1::ExplainBreakResponse> PostgresStore::ExplainBreak(
    const std::string& break_id) {
  absl::StatusOr<PgPool::Lease> lease = readers_->Acquire();
  if (!lease.ok()) return lease.status();
  PgConnection& connection = **lease;
  v1::ExplainBreakResponse response;
  CACHEWATCH_RETURN_IF_ERROR(InSnapshot(connection, [&]() -> absl::Status {
    absl::StatusOr<PgResult> found = connection.Prepared(
        "cw_select_break", kSelectBreak, PgParams().Text(break_id));
    if (!found.ok()) return found.status();
    if (found->rows() == 0) {
      return absl::NotFoundError(absl::StrCat("no break ", break_id));
    }
    const PgRow row = found->row(0);
    const LaneKey key{std::string(row.Text(0)), std::string(row.Text(1)),
                      std::string(row.Text(2))};
    CACHEWATCH_RETURN_IF_ERROR(
        ParseEvent(row.Blob(3), response.mutable_cache_break()));
    ToolListCache tools(connection);
    auto find = [&](const std::string& request_id)
        -> absl::StatusOr<std::shared_ptr<const v1::Snapshot>> {
      absl::StatusOr<PgResult> turn = connection.Prepared(
          "cw_select_turn", kSelectTurn, KeyParams(key).Text(request_id));
      if (!turn.ok()) return turn.status();
      if (turn->rows() == 0) return nullptr;
      return SnapshotOf(turn->row(0), tools);
    };
    absl::StatusOr<std::shared_ptr<const v1::Snapshot>> previous =
        find(response.cache_break().previous_request_id());
    if (!previous.ok()) return previous.status();
    if (*previous != nullptr)
      *response.mutable_previous_snapshot() = **previous;
    absl::StatusOr<std::shared_ptr<const v1::Snapshot>> current =
        find(response.cache_break().request_id());
    if (!current.ok()) return current.status();
    if (*current != nullptr) *response.mutable_snapshot() = **current;
    return absl::OkStatus();
  }));
  return response;
}

absl::StatusOr<v1::GetLaneTimelineResponse> PostgresStore::LaneTimeline(
    const LaneKey& key, int limit) {
  limit = TimelineLimit(limit);
  absl::StatusOr<PgPool::Lease> connection = readers_->Acquire();
  if (!connection.ok()) return connection.status();
  absl::StatusOr<PgResult> rows =
      (*connection)
          ->Prepared("cw_timeline", kSelectTimeline, KeyParams(key).Int(limit));
  if (!rows.ok()) return rows.status();
  v1::GetLaneTimelineResponse response;
  for (int i = rows->rows() - 1; i >= 0; --i) {  // Oldest first.
    CACHEWATCH_ASSIGN_OR_RETURN(*response.add_turns(),
                                TurnSummaryOf(rows->row(i)));
  }
  return response;
}

absl::StatusOr<std::optional<v1::TurnClassification>>
PostgresStore::FindClassification(const LaneKey& key,
                                  const std::string& request_id) {
  absl::StatusOr<PgPool::Lease> connection = readers_->Acquire();
  if (!connection.ok()) return connection.status();
  absl::StatusOr<PgResult> rows =
      (*connection)
          ->Prepared("cw_classification_of", kSelectClassification,
                     KeyParams(key).Text(request_id));
  if (!rows.ok()) return rows.status();
  if (rows->rows() == 0 || rows->row(0).IsNull(0)) return std::nullopt;
  return ClassificationOf(rows->row(0), {0, 1, 2, 3, 4});
}

absl::StatusOr<std::vector<RestoredLane>> PostgresStore::LoadRecentLanes(
    int64_t since_us) {
  absl::StatusOr<PgPool::Lease> lease = readers_->Acquire();
  if (!lease.ok()) return lease.status();
  PgConnection& connection = **lease;
  std::vector<RestoredLane> lanes;
  CACHEWATCH_RETURN_IF_ERROR(InSnapshot(connection, [&]() -> absl::Status {
    absl::StatusOr<PgResult> rows = connection.Prepared(
        "cw_recent_lanes", kSelectRecentLanes, PgParams().Int(since_us));
    if (!rows.ok()) return rows.status();
    ToolListCache tools(connection);
    for (int i = 0; i < rows->rows(); ++i) {
      absl::StatusOr<RestoredLane> lane = RestoredLaneOf(rows->row(i), tools);
      if (!lane.ok()) return lane.status();
      lanes.push_back(*std::move(lane));
    }
    return absl::OkStatus();
  }));
  return lanes;
}

absl::StatusOr<std::optional<RestoredLane>> PostgresStore::LoadLane(
    const LaneKey& key, const LaneLookup& lookup) {
  absl::StatusOr<PgPool::Lease> lease = readers_->Acquire();
  if (!lease.ok()) return lease.status();
  PgConnection& connection = **lease;
  std::optional<RestoredLane> found;
  int64_t write_seq = 0;
  CACHEWATCH_RETURN_IF_ERROR(InSnapshot(connection, [&]() -> absl::Status {
    // The lane's last claim, as of the same snapshot as its turns: a later
    // write by another daemon makes this daemon's next claim of it fail.
    absl::StatusOr<PgResult> seq = connection.Prepared(
        "cw_lane_write_seq", kPgLaneWriteSeq, KeyParams(key));
    if (!seq.ok()) return seq.status();
    if (seq->rows() > 0) write_seq = seq->row(0).Int(0);
    absl::StatusOr<PgResult> rows = connection.Prepared(
        "cw_lane", kSelectLane,
        KeyParams(key)
            .Int(lookup.since_us)
            .Int(lookup.waiting_since_us)
            .Int(static_cast<int64_t>(lookup.answered + lookup.waiting)));
    if (!rows.ok()) return rows.status();
    PgLaneHistory history(connection, *rows, key, lookup.since_us);
    CACHEWATCH_ASSIGN_OR_RETURN(
        std::optional<LaneState> state,
        RestoreLaneState(history, {lookup.answered, lookup.waiting}));
    if (state.has_value()) found = RestoredLane{key, *std::move(state)};
    return absl::OkStatus();
  }));
  NoteSeen(PgLaneKey(key), write_seq);
  return found;
}

}  // namespace cachewatch
