#include "daemon/store/sqlite/read_connection.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/classifier.h"
#include "daemon/core/lane_history.h"
#include "daemon/store/sqlite/columns.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

using google::protobuf::util::TimeUtil;

constexpr int kBusyTimeoutMs = 5000;
constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;
constexpr int kDefaultTimelineLimit = 200;
constexpr int kMaxTimelineLimit = 5000;
// The most a ListBreaks or timeline reply carries, in bytes of its rows:
// below gRPC's default 4 MiB client receive limit, with room to spare.
constexpr size_t kMaxReplyBytes = 3 * 1024 * 1024;
// A TurnSummary's bytes besides its request id, model and break id, at most.
constexpr size_t kTurnSummaryFixedBytes = 160;

// The columns a Turn and its snapshot are rebuilt from, in TurnColumn order.
#define CACHEWATCH_TURN_COLUMNS                                             \
  "agent, session_id, lane, request_id, provider, model, request_time_us, " \
  "snapshot_received, usage_received, system_hash, system_sections, "       \
  "tool_list_hash, options_hash, cache_enabled, cache_automatic, "          \
  "cache_ttl_seconds, breakpoints, message_chain, expected_drop, "          \
  "tool_order_policy, uncached_input_tokens, cache_read_tokens, "           \
  "cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens, "      \
  "output_tokens, provider_miss_reason, provider_missed_tokens"

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

constexpr const char* kSelectTimeline = R"sql(
SELECT request_id, request_time_us, response_time_us, model,
  snapshot_received, usage_received, uncached_input_tokens, cache_read_tokens,
  cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens,
  output_tokens, prompt_total_tokens, verdict, primary_reason, break_id,
  tool_count
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

// The TTL the most recent classified turn with a 5 m / 1 h write split, up
// to the turn of row `r`, showed (3600 or 300), or NULL.
#define CACHEWATCH_OBSERVED_TTL                                           \
  "(SELECT CASE WHEN w.cache_write_1h_tokens > 0 THEN 3600 ELSE 300 END " \
  "FROM turns AS w "                                                      \
  "WHERE w.agent = r.agent AND w.session_id = r.session_id "              \
  "AND w.lane = r.lane AND w.request_time_us <= r.request_time_us "       \
  "AND (w.cache_write_1h_tokens > 0 OR w.cache_write_5m_tokens > 0) "     \
  "AND w.verdict IS NOT NULL AND w.verdict <> 'pending' "                 \
  "ORDER BY w.request_time_us DESC, w.request_id DESC LIMIT 1)"

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

// Turns LoadLane's TTL fallback looks back over.
constexpr int kLaneTtlLookback = 1000;

#undef CACHEWATCH_OBSERVED_TTL

// kSelectLane's columns after the turn columns.
enum LaneRowColumn {
  kLaneVerdict = kTurnColumnCount,
  kLaneExpectedReuseTokens,
  kLaneMissedTokens,
  kLaneReceivedAtUs,
  kLaneBreakEvent,
};

#undef CACHEWATCH_TURN_COLUMNS

// ListBreaks filters, as bits of the statement cache key.
enum ListFilter : unsigned {
  kSince = 1 << 0,
  kUntil = 1 << 1,
  kAgentFilter = 1 << 2,
  kSessionFilter = 1 << 3,
  kLaneFilter = 1 << 4,
  kModelFilter = 1 << 5,
  kReasonFilter = 1 << 6,
  kAfterToken = 1 << 7,
};

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

// The keyset position after which a page starts: the last break returned.
struct PagePosition {
  int64_t request_time_us = 0;
  std::string break_id;
};

std::string EncodePageToken(const PagePosition& position) {
  return absl::WebSafeBase64Escape(
      absl::StrCat(position.request_time_us, ":", position.break_id));
}

std::optional<PagePosition> DecodePageToken(const std::string& token) {
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw)) return std::nullopt;
  const size_t colon = raw.find(':');
  if (colon == std::string::npos || colon + 1 == raw.size()) {
    return std::nullopt;
  }
  PagePosition position;
  if (!absl::SimpleAtoi(raw.substr(0, colon), &position.request_time_us)) {
    return std::nullopt;
  }
  position.break_id = raw.substr(colon + 1);
  return position;
}

void BindKey(Statement& statement, const LaneKey& key) {
  statement.BindText(":agent", key.agent);
  statement.BindText(":session_id", key.session_id);
  statement.BindText(":lane", LaneColumn(key));
}

template <typename Enum>
absl::StatusOr<Enum> EnumColumn(const Statement& row, int column,
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

absl::StatusOr<uint64_t> HashColumn(const Statement& row, int column,
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

absl::Status ParseEvent(std::string_view bytes, v1::PromptCacheBreak* event) {
  if (!event->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError("malformed prompt_cache_breaks.event");
  }
  return absl::OkStatus();
}

// The usage columns starting at `first` (uncached, read, write, 5m, 1h,
// output).
v1::NormalizedUsage UsageColumns(const Statement& row, int first) {
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
absl::StatusOr<Turn> TurnOf(const Statement& row,
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
      v1::Provider provider,
      EnumColumn<v1::Provider>(row, kProvider, "provider"));
  turn.provider = provider;
  turn.model = std::string(row.Text(kModel));
  turn.request_time_us = row.Int(kRequestTimeUs);
  return turn;
}

// Where a row holds a turn's classification.
struct ClassificationColumns {
  int verdict;
  int expected_reuse_tokens;
  int missed_tokens;
  int expected_drop;
  int break_event;
};

// The classification in `row`'s `columns`: an expected drop with its hint, a
// break with its event.
absl::StatusOr<v1::TurnClassification> ClassificationOf(
    const Statement& row, const ClassificationColumns& columns) {
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
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError("page_size must not be negative");
  }
  const int page_size = request.page_size() == 0
                            ? kDefaultPageSize
                            : std::min(request.page_size(), kMaxPageSize);
  std::optional<PagePosition> after;
  if (!request.page_token().empty()) {
    after = DecodePageToken(request.page_token());
    if (!after.has_value()) {
      return absl::InvalidArgumentError("invalid page_token");
    }
  }
  unsigned filters = 0;
  if (request.has_since()) filters |= kSince;
  if (request.has_until()) filters |= kUntil;
  if (!request.agent().empty()) filters |= kAgentFilter;
  if (!request.session_id().empty()) filters |= kSessionFilter;
  if (!request.lane().empty()) filters |= kLaneFilter;
  if (!request.model().empty()) filters |= kModelFilter;
  if (request.reason() != v1::REASON_UNSPECIFIED) filters |= kReasonFilter;
  if (after.has_value()) filters |= kAfterToken;

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
  if (after.has_value()) {
    s.BindInt(":after_us", after->request_time_us);
    s.BindText(":after_id", after->break_id);
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

absl::StatusOr<std::shared_ptr<const v1::Snapshot>> ReadConnection::SnapshotOf(
    const Statement& row, ToolListCache& tools) {
  if (row.Int(kSnapshotReceived) == 0) return nullptr;
  auto snapshot = std::make_shared<v1::Snapshot>();
  snapshot->set_agent(std::string(row.Text(kAgent)));
  snapshot->set_session_id(std::string(row.Text(kSessionId)));
  snapshot->set_lane(std::string(row.Text(kLane)));
  snapshot->set_request_id(std::string(row.Text(kRequestId)));
  if (!row.IsNull(kRequestTimeUs)) {
    *snapshot->mutable_request_time() =
        TimeUtil::MicrosecondsToTimestamp(row.Int(kRequestTimeUs));
  }
  CACHEWATCH_ASSIGN_OR_RETURN(
      v1::Provider provider,
      EnumColumn<v1::Provider>(row, kProvider, "provider"));
  snapshot->set_provider(provider);
  snapshot->set_model(std::string(row.Text(kModel)));
  CACHEWATCH_ASSIGN_OR_RETURN(uint64_t system_hash,
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
  CACHEWATCH_ASSIGN_OR_RETURN(uint64_t options_hash,
                              HashColumn(row, kOptionsHash, "options_hash"));
  snapshot->set_options_hash(options_hash);
  CACHEWATCH_RETURN_IF_ERROR(ParseChainBlob(row.Blob(kMessageChain),
                                            snapshot->mutable_message_chain()));
  CACHEWATCH_ASSIGN_OR_RETURN(
      v1::ExpectedDrop expected_drop,
      EnumColumn<v1::ExpectedDrop>(row, kExpectedDrop, "expected_drop"));
  snapshot->set_expected_drop(expected_drop);
  CACHEWATCH_ASSIGN_OR_RETURN(v1::ToolOrderPolicy policy,
                              EnumColumn<v1::ToolOrderPolicy>(
                                  row, kToolOrderPolicy, "tool_order_policy"));
  snapshot->set_tool_order_policy(policy);
  return snapshot;
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
  limit =
      limit <= 0 ? kDefaultTimelineLimit : std::min(limit, kMaxTimelineLimit);
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
    v1::TurnSummary& turn = *response.add_turns();
    turn.set_request_id(std::string(s.Text(0)));
    if (!s.IsNull(1)) {
      *turn.mutable_request_time() =
          TimeUtil::MicrosecondsToTimestamp(s.Int(1));
    }
    if (!s.IsNull(2)) {
      *turn.mutable_response_time() =
          TimeUtil::MicrosecondsToTimestamp(s.Int(2));
    }
    turn.set_model(std::string(s.Text(3)));
    turn.set_snapshot_received(s.Int(4) != 0);
    turn.set_usage_received(s.Int(5) != 0);
    if (turn.usage_received()) {
      *turn.mutable_usage() = UsageColumns(s, 6);
      const int64_t prompt_total = s.Int(12);
      if (prompt_total > 0) {
        turn.set_hit_ratio(
            static_cast<double>(turn.usage().cache_read_tokens()) /
            static_cast<double>(prompt_total));
      }
    }
    CACHEWATCH_ASSIGN_OR_RETURN(v1::Verdict verdict,
                                EnumColumn<v1::Verdict>(s, 13, "verdict"));
    turn.set_verdict(verdict);
    CACHEWATCH_ASSIGN_OR_RETURN(
        v1::Reason reason, EnumColumn<v1::Reason>(s, 14, "primary_reason"));
    turn.set_primary_reason(reason);
    turn.set_break_id(std::string(s.Text(15)));
    turn.set_tool_count(static_cast<int32_t>(s.Int(16)));
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

absl::StatusOr<RestoredLane> ReadConnection::RestoredLaneOf(
    const Statement& row, ToolListCache& tools) {
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
      CACHEWATCH_ASSIGN_OR_RETURN(turn_.turn, TurnOf(s, nullptr));
      turn_.has_snapshot = s.Int(kSnapshotReceived) != 0;
      turn_.received_us = s.Int(kLaneReceivedAtUs);
      turn_.classification.reset();
      if (!s.IsNull(kLaneVerdict) && s.Text(kLaneVerdict) != "pending") {
        CACHEWATCH_ASSIGN_OR_RETURN(
            turn_.classification,
            ClassificationOf(
                s, {kLaneVerdict, kLaneExpectedReuseTokens, kLaneMissedTokens,
                    kExpectedDrop, kLaneBreakEvent}));
      }
      return &turn_;
    }

    absl::StatusOr<std::shared_ptr<const v1::Snapshot>> Snapshot() override {
      return connection_.SnapshotOf(connection_.select_lane_, tools_);
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
