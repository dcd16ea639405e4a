#include "daemon/store/sqlite/read_connection.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/classifier.h"
#include "daemon/core/lane_history.h"
#include "daemon/store/break_pages.h"
#include "daemon/store/columns.h"
#include "daemon/store/turn_rows.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

using google::protobuf::util::TimeUtil;

constexpr int kBusyTimeoutMs = 5000;
// The most a ListBreaks or timeline reply carries, in bytes of its rows:
// below gRPC's default 4 MiB client receive limit, with room to spare.
constexpr size_t kMaxReplyBytes = 3 * 1024 * 1024;
// A TurnSummary's bytes besides its request id, model and break id, at most.
constexpr size_t kTurnSummaryFixedBytes = 160;

constexpr const char* kSelectBreak = R"sql(
SELECT agent, session_id, lane, event FROM prompt_cache_breaks
WHERE break_id = :break_id)sql";

constexpr const char* kSelectTurn = "SELECT " CACHEWATCH_TURN_COLUMNS R"sql(
FROM turns
WHERE agent = :agent AND session_id = :session_id AND lane = :lane
  AND request_id = :request_id)sql";

constexpr const char* kSelectToolEntries = R"sql(
SELECT name, schema_hash FROM tool_list_entries WHERE list_hash = :list_hash
ORDER BY position)sql";

constexpr const char* kSelectTimeline =
    "SELECT " CACHEWATCH_TIMELINE_COLUMNS R"sql(
FROM turns
WHERE agent = :agent AND session_id = :session_id AND lane = :lane
ORDER BY request_time_us DESC, request_id DESC
LIMIT :limit)sql";

constexpr const char* kSelectClassification = R"sql(
SELECT t.verdict, t.expected_reuse_tokens, t.missed_tokens, t.expected_drop,
  b.event
FROM turns AS t LEFT JOIN prompt_cache_breaks AS b ON b.break_id = t.break_id
WHERE t.agent = :agent AND t.session_id = :session_id AND t.lane = :lane
  AND t.request_id = :request_id)sql";

// Each lane's last classified turn since :since_us (the order the lane
// tracker uses: request time, then request id), and the TTL shown by the
// lane's most recent classified turn with a 5 m / 1 h write split. The
// window's turns are materialized first (through turns_by_time): otherwise
// the planner walks all of turns_by_lane_time in PARTITION BY order, every
// turn ever stored (1.7 s at 10 M turns, bench/query_bench).
constexpr const char* kSelectRecentLanes = R"sql(
WITH recent AS MATERIALIZED (
  SELECT * FROM turns
  WHERE request_time_us >= :since_us
    AND verdict IS NOT NULL AND verdict <> 'pending')
SELECT )sql" CACHEWATCH_TURN_COLUMNS ", " CACHEWATCH_OBSERVED_TTL R"sql(
FROM (
  SELECT *, row_number() OVER (
      PARTITION BY agent, session_id, lane
      ORDER BY request_time_us DESC, request_id DESC) AS recency
  FROM recent) AS r
WHERE recency = 1)sql";

// One lane's newest turns within retention, newest first: the classified
// ones and those waiting for a pair received since :waiting_since_us (the
// snapshots given up before are left out), each with its classification.
// One range of turns_by_lane_time read backwards; a lane with no turns costs
// one index seek.
constexpr const char* kSelectLane = "SELECT " CACHEWATCH_TURN_COLUMNS R"sql(,
  verdict, expected_reuse_tokens, missed_tokens, received_at_us,
  (SELECT b.event FROM prompt_cache_breaks AS b WHERE b.break_id = t.break_id)
FROM (
  SELECT )sql" CACHEWATCH_TURN_COLUMNS R"sql(, verdict, expected_reuse_tokens,
    missed_tokens, received_at_us, break_id
  FROM turns
  WHERE agent = :agent AND session_id = :session_id AND lane = :lane
    AND request_time_us >= :since_us
    AND ((verdict IS NOT NULL AND verdict <> 'pending')
         OR received_at_us >= :waiting_since_us)
  ORDER BY request_time_us DESC
  LIMIT :limit) AS t)sql";

// The TTL a lane's most recent classified turn with a 5 m / 1 h write split
// showed, among its last :limit turns (LoadLane's fallback when none of the
// turns it read showed one).
constexpr const char* kSelectLaneTtl = R"sql(
SELECT CASE WHEN cache_write_1h_tokens > 0 THEN 3600 ELSE 300 END
FROM (
  SELECT cache_write_1h_tokens, cache_write_5m_tokens, verdict FROM turns
  WHERE agent = :agent AND session_id = :session_id AND lane = :lane
    AND request_time_us >= :since_us
  ORDER BY request_time_us DESC
  LIMIT :limit)
WHERE (cache_write_1h_tokens > 0 OR cache_write_5m_tokens > 0)
  AND verdict IS NOT NULL AND verdict <> 'pending'
LIMIT 1)sql";

// The SQL of ListBreaks for a set of filters: only the shape varies, every
// value is a bound parameter.
std::string ListBreaksSql(unsigned filters) {
  std::string sql =
      "SELECT request_time_us, break_id, event FROM prompt_cache_breaks "
      "WHERE 1";
  if (filters & kSince) sql += " AND request_time_us >= :since_us";
  if (filters & kUntil) sql += " AND request_time_us < :until_us";
  if (filters & kAgentFilter) sql += " AND agent = :agent";
  if (filters & kSessionFilter) sql += " AND session_id = :session_id";
  if (filters & kLaneFilter) sql += " AND lane = :lane";
  if (filters & kModelFilter) sql += " AND model = :model";
  if (filters & kReasonFilter) sql += " AND primary_reason = :reason";
  if (filters & kAfterToken) {
    sql +=
        " AND request_time_us <= :after_us"
        " AND (request_time_us < :after_us OR break_id < :after_id)";
  }
  sql += " ORDER BY request_time_us DESC, break_id DESC LIMIT :limit";
  return sql;
}

void BindKey(Statement& statement, const LaneKey& key) {
  statement.BindText(":agent", key.agent);
  statement.BindText(":session_id", key.session_id);
  statement.BindText(":lane", LaneColumn(key));
}

}  // namespace

// Tool lists read while answering one query, by list hash.
class ReadConnection::ToolListCache {
 public:
  explicit ToolListCache(Statement& select_entries)
      : select_entries_(select_entries) {}

  absl::StatusOr<const google::protobuf::RepeatedPtrField<v1::ToolRef>*> Get(
      const std::string& list_hash) {
    auto [it, inserted] = lists_.try_emplace(list_hash);
    if (!inserted) return &it->second;
    StatementReset reset(select_entries_);
    select_entries_.BindText(":list_hash", list_hash);
    while (true) {
      absl::StatusOr<bool> row = select_entries_.Step();
      if (!row.ok()) {
        lists_.erase(it);
        return row.status();
      }
      if (!*row) break;
      absl::StatusOr<uint64_t> hash =
          HashColumn(select_entries_, 1, "tool_list_entries.schema_hash");
      if (!hash.ok()) {
        lists_.erase(it);
        return hash.status();
      }
      v1::ToolRef* tool = it->second.Add();
      tool->set_name(std::string(select_entries_.Text(0)));
      tool->set_schema_hash(*hash);
    }
    return &it->second;
  }

 private:
  Statement& select_entries_;
  std::map<std::string, google::protobuf::RepeatedPtrField<v1::ToolRef>> lists_;
};

absl::StatusOr<std::unique_ptr<ReadConnection>> ReadConnection::Open(
    const std::string& path) {
  CACHEWATCH_ASSIGN_OR_RETURN(Database db,
                              Database::Open(path, /*create=*/false));
  std::unique_ptr<ReadConnection> connection(new ReadConnection(std::move(db)));
  CACHEWATCH_RETURN_IF_ERROR(connection->db_.Exec(
      absl::StrCat("PRAGMA busy_timeout = ", kBusyTimeoutMs)));
  CACHEWATCH_RETURN_IF_ERROR(connection->db_.Exec("PRAGMA query_only = ON"));
  CACHEWATCH_RETURN_IF_ERROR(connection->PrepareStatements());
  return connection;
}

absl::Status ReadConnection::PrepareStatements() {
  const std::pair<const char*, Statement*> statements[] = {
      {kSelectBreak, &select_break_},
      {kSelectTurn, &select_turn_},
      {kSelectToolEntries, &select_tool_entries_},
      {kSelectTimeline, &select_timeline_},
      {kSelectClassification, &select_classification_},
      {kSelectRecentLanes, &select_recent_lanes_},
      {kSelectLane, &select_lane_},
      {kSelectLaneTtl, &select_lane_ttl_},
  };
  for (const auto& [sql, statement] : statements) {
    CACHEWATCH_ASSIGN_OR_RETURN(Statement prepared, db_.Prepare(sql));
    *statement = std::move(prepared);
  }
  return absl::OkStatus();
}

absl::StatusOr<Statement*> ReadConnection::ListBreaksStatement(
    unsigned filters) {
  auto it = list_breaks_.find(filters);
  if (it != list_breaks_.end()) return &it->second;
  CACHEWATCH_ASSIGN_OR_RETURN(Statement prepared,
                              db_.Prepare(ListBreaksSql(filters)));
  return &list_breaks_.emplace(filters, std::move(prepared)).first->second;
}

absl::StatusOr<v1::ListBreaksResponse> ReadConnection::ListBreaks(
    const v1::ListBreaksRequest& request) {
  CACHEWATCH_ASSIGN_OR_RETURN(const BreakPage page, BreakPageOf(request));
  const unsigned filters = page.filters;
  const int page_size = page.size;
  CACHEWATCH_ASSIGN_OR_RETURN(Statement * statement,
                              ListBreaksStatement(filters));
  Statement& s = *statement;
  StatementReset reset(s);
  if (filters & kSince) {
    s.BindInt(":since_us", TimeUtil::TimestampToMicroseconds(request.since()));
  }
  if (filters & kUntil) {
    s.BindInt(":until_us", TimeUtil::TimestampToMicroseconds(request.until()));
  }
  if (filters & kAgentFilter) s.BindText(":agent", request.agent());
  if (filters & kSessionFilter) s.BindText(":session_id", request.session_id());
  if (filters & kLaneFilter) s.BindText(":lane", request.lane());
  if (filters & kModelFilter) s.BindText(":model", request.model());
  if (filters & kReasonFilter) {
    s.BindText(":reason", ReasonName(request.reason()));
  }
  if (page.after.has_value()) {
    s.BindInt(":after_us", page.after->request_time_us);
    s.BindText(":after_id", page.after->break_id);
  }
  // One more than a page tells whether another page follows.
  s.BindInt(":limit", page_size + 1);

  v1::ListBreaksResponse response;
  PagePosition last;
  size_t reply_bytes = 0;
  while (true) {
    CACHEWATCH_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    // A page ends at page_size breaks or before kMaxReplyBytes (but holds
    // at least one break).
    reply_bytes += s.Blob(2).size();
    if (response.breaks_size() == page_size ||
        (response.breaks_size() > 0 && reply_bytes > kMaxReplyBytes)) {
      response.set_next_page_token(EncodePageToken(last));
      break;
    }
    CACHEWATCH_RETURN_IF_ERROR(ParseEvent(s.Blob(2), response.add_breaks()));
    last.request_time_us = s.Int(0);
    last.break_id = std::string(s.Text(1));
  }
  return response;
}

absl::StatusOr<std::shared_ptr<const v1::Snapshot>>
ReadConnection::FindSnapshot(const LaneKey& key, const std::string& request_id,
                             ToolListCache& tools) {
  StatementReset reset(select_turn_);
  BindKey(select_turn_, key);
  select_turn_.BindText(":request_id", request_id);
  CACHEWATCH_ASSIGN_OR_RETURN(bool row, select_turn_.Step());
  if (!row) return nullptr;
  return SnapshotOf(select_turn_, tools);
}

absl::StatusOr<v1::ExplainBreakResponse> ReadConnection::ExplainBreak(
    const std::string& break_id) {
  Transaction transaction(db_);  // The break and its turns as of one moment.
  CACHEWATCH_RETURN_IF_ERROR(transaction.Begin("BEGIN"));
  v1::ExplainBreakResponse response;
  LaneKey key;
  {
    StatementReset reset(select_break_);
    select_break_.BindText(":break_id", break_id);
    CACHEWATCH_ASSIGN_OR_RETURN(bool row, select_break_.Step());
    if (!row) {
      return absl::NotFoundError(absl::StrCat("no break ", break_id));
    }
    key = {std::string(select_break_.Text(0)),
           std::string(select_break_.Text(1)),
           std::string(select_break_.Text(2))};
    CACHEWATCH_RETURN_IF_ERROR(
        ParseEvent(select_break_.Blob(3), response.mutable_cache_break()));
  }
  ToolListCache tools(select_tool_entries_);
  CACHEWATCH_ASSIGN_OR_RETURN(
      std::shared_ptr<const v1::Snapshot> previous,
      FindSnapshot(key, response.cache_break().previous_request_id(), tools));
  if (previous != nullptr) *response.mutable_previous_snapshot() = *previous;
  CACHEWATCH_ASSIGN_OR_RETURN(
      std::shared_ptr<const v1::Snapshot> current,
      FindSnapshot(key, response.cache_break().request_id(), tools));
  if (current != nullptr) *response.mutable_snapshot() = *current;
  CACHEWATCH_RETURN_IF_ERROR(transaction.Commit());
  return response;
}

absl::StatusOr<v1::GetLaneTimelineResponse> ReadConnection::LaneTimeline(
    const LaneKey& key, int limit) {
  limit = TimelineLimit(limit);
  Statement& s = select_timeline_;
  StatementReset reset(s);
  BindKey(s, key);
  s.BindInt(":limit", limit);
  v1::GetLaneTimelineResponse response;
  size_t reply_bytes = 0;
  while (true) {
    CACHEWATCH_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    // The most recent turns that fit in kMaxReplyBytes.
    reply_bytes += s.Text(0).size() + s.Text(3).size() + s.Text(15).size() +
                   kTurnSummaryFixedBytes;
    if (reply_bytes > kMaxReplyBytes) break;
    CACHEWATCH_ASSIGN_OR_RETURN(*response.add_turns(), TurnSummaryOf(s));
  }
  // Selected newest first, so that the limit keeps the most recent turns.
  std::reverse(response.mutable_turns()->begin(),
               response.mutable_turns()->end());
  return response;
}

absl::StatusOr<std::optional<v1::TurnClassification>>
ReadConnection::FindClassification(const LaneKey& key,
                                   const std::string& request_id) {
  Statement& s = select_classification_;
  StatementReset reset(s);
  BindKey(s, key);
  s.BindText(":request_id", request_id);
  CACHEWATCH_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row || s.IsNull(0)) return std::nullopt;
  return ClassificationOf(s, {0, 1, 2, 3, 4});
}

absl::StatusOr<std::vector<RestoredLane>> ReadConnection::LoadRecentLanes(
    int64_t since_us) {
  Transaction transaction(db_);  // Tool lists as of the turns read.
  CACHEWATCH_RETURN_IF_ERROR(transaction.Begin("BEGIN"));
  ToolListCache tools(select_tool_entries_);
  Statement& s = select_recent_lanes_;
  StatementReset reset(s);
  s.BindInt(":since_us", since_us);
  std::vector<RestoredLane> lanes;
  while (true) {
    CACHEWATCH_ASSIGN_OR_RETURN(const bool row, s.Step());
    if (!row) break;
    CACHEWATCH_ASSIGN_OR_RETURN(RestoredLane lane, RestoredLaneOf(s, tools));
    lanes.push_back(std::move(lane));
  }
  CACHEWATCH_RETURN_IF_ERROR(transaction.Commit());
  return lanes;
}

absl::StatusOr<std::optional<RestoredLane>> ReadConnection::LoadLane(
    const LaneKey& key, const LaneLookup& lookup) {
  // The rows of select_lane_, for RestoreLaneState.
  class LaneRows final : public LaneHistory {
   public:
    LaneRows(ReadConnection& connection, const LaneKey& key, int64_t since_us)
        : connection_(connection),
          key_(key),
          since_us_(since_us),
          tools_(connection.select_tool_entries_) {}

    absl::StatusOr<StoredTurn*> Next() override {
      Statement& s = connection_.select_lane_;
      CACHEWATCH_ASSIGN_OR_RETURN(const bool row, s.Step());
      if (!row) return nullptr;
      CACHEWATCH_RETURN_IF_ERROR(StoredTurnOf(s, turn_));
      return &turn_;
    }

    absl::StatusOr<Turn> FullTurn() override {
      return TurnOf(connection_.select_lane_, nullptr);
    }

    absl::StatusOr<std::shared_ptr<const v1::Snapshot>> Snapshot() override {
      return SnapshotOf(connection_.select_lane_, tools_);
    }

    absl::StatusOr<uint32_t> EarlierObservedTtl() override {
      Statement& ttl = connection_.select_lane_ttl_;
      StatementReset reset(ttl);
      BindKey(ttl, key_);
      ttl.BindInt(":since_us", since_us_);
      ttl.BindInt(":limit", kLaneTtlLookback);
      CACHEWATCH_ASSIGN_OR_RETURN(const bool row, ttl.Step());
      return row ? static_cast<uint32_t>(ttl.Int(0)) : 0;
    }

   private:
    ReadConnection& connection_;
    const LaneKey& key_;
    const int64_t since_us_;
    ToolListCache tools_;
    StoredTurn turn_;
  };

  Transaction transaction(db_);  // Tool lists as of the turns read.
  CACHEWATCH_RETURN_IF_ERROR(transaction.Begin("BEGIN"));
  Statement& s = select_lane_;
  StatementReset reset(s);
  BindKey(s, key);
  s.BindInt(":since_us", lookup.since_us);
  s.BindInt(":waiting_since_us", lookup.waiting_since_us);
  s.BindInt(":limit", static_cast<int64_t>(lookup.answered + lookup.waiting));
  LaneRows rows(*this, key, lookup.since_us);
  CACHEWATCH_ASSIGN_OR_RETURN(
      std::optional<LaneState> state,
      RestoreLaneState(rows, {lookup.answered, lookup.waiting}));
  CACHEWATCH_RETURN_IF_ERROR(transaction.Commit());
  if (!state.has_value()) return std::nullopt;
  return RestoredLane{key, *std::move(state)};
}

}  // namespace cachewatch
