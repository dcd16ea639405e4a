// PostgresStore's queries: ListBreaks, ExplainBreak, LaneTimeline and the
// lane state (FindClassification, LoadRecentLanes, LoadLane), with the SQLite
// store's semantics (daemon/store/read_connection.cc): the same orders, page
// tokens, limits and reconstruction of turns from their columns.
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/classifier.h"
#include "daemon/core/lane_history.h"
#include "daemon/store/postgres/pg_write_statements.h"
#include "daemon/store/postgres/postgres_store.h"
#include "daemon/store/sqlite/columns.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

using google::protobuf::util::TimeUtil;

constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;
constexpr int kDefaultTimelineLimit = 200;
constexpr int kMaxTimelineLimit = 5000;

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
WHERE break_id = $1::text LIMIT 1)sql";

constexpr const char* kSelectTurn = "SELECT " CACHEWATCH_TURN_COLUMNS R"sql(
FROM turns
WHERE agent = $1::text AND session_id = $2::text AND lane = $3::text
  AND request_id = $4::text LIMIT 1)sql";

constexpr const char* kSelectToolEntries = R"sql(
SELECT name, schema_hash FROM tool_list_entries WHERE list_hash = $1::text
ORDER BY position)sql";

constexpr const char* kSelectTimeline = R"sql(
SELECT request_id, request_time_us, response_time_us, model,
  snapshot_received, usage_received, uncached_input_tokens, cache_read_tokens,
  cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens,
  output_tokens, prompt_total_tokens, verdict, primary_reason, break_id,
  tool_count
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

// The TTL shown by the lane's most recent classified turn with a 5 m / 1 h
// write split, up to turn r.
#define CACHEWATCH_OBSERVED_TTL                                           \
  "(SELECT CASE WHEN w.cache_write_1h_tokens > 0 THEN 3600 ELSE 300 END " \
  "FROM turns AS w "                                                      \
  "WHERE w.agent = r.agent AND w.session_id = r.session_id "              \
  "AND w.lane = r.lane AND w.request_time_us <= r.request_time_us "       \
  "AND (w.cache_write_1h_tokens > 0 OR w.cache_write_5m_tokens > 0) "     \
  "AND w.verdict IS NOT NULL AND w.verdict <> 'pending' "                 \
  "ORDER BY w.request_time_us DESC, w.request_id DESC LIMIT 1)"

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

// Turns LoadLane's TTL fallback looks back over.
constexpr int kLaneTtlLookback = 1000;

// kSelectLane's columns after the turn columns.
enum LaneRowColumn {
  kLaneVerdict = kTurnColumnCount,
  kLaneExpectedReuseTokens,
  kLaneMissedTokens,
  kLaneReceivedAtUs,
  kLaneBreakEvent,
};

#undef CACHEWATCH_TURN_COLUMNS
#undef CACHEWATCH_OBSERVED_TTL

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

PgParams KeyParams(const LaneKey& key) {
  PgParams params;
  params.Text(key.agent).Text(key.session_id).Text(LaneColumn(key));
  return params;
}

template <typename Enum>
absl::StatusOr<Enum> EnumColumn(const PgRow& row, int column,
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

absl::StatusOr<uint64_t> HashColumn(const PgRow& row, int column,
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

absl::Status ParseEvent(const std::string& bytes, v1::PromptCacheBreak* event) {
  if (!event->ParseFromString(bytes)) {
    return absl::DataLossError("malformed prompt_cache_breaks.event");
  }
  return absl::OkStatus();
}

v1::NormalizedUsage UsageColumns(const PgRow& row, int first) {
  v1::NormalizedUsage usage;
  usage.set_uncached_input_tokens(row.Int(first));
  usage.set_cache_read_tokens(row.Int(first + 1));
  usage.set_cache_write_tokens(row.Int(first + 2));
  usage.set_cache_write_5m_tokens(row.Int(first + 3));
  usage.set_cache_write_1h_tokens(row.Int(first + 4));
  usage.set_output_tokens(row.Int(first + 5));
  return usage;
}

absl::StatusOr<Turn> TurnOf(const PgRow& row,
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
  absl::StatusOr<v1::Provider> provider =
      EnumColumn<v1::Provider>(row, kProvider, "provider");
  if (!provider.ok()) return provider.status();
  turn.provider = *provider;
  turn.model = std::string(row.Text(kModel));
  turn.request_time_us = row.Int(kRequestTimeUs);
  return turn;
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

absl::StatusOr<std::shared_ptr<const v1::Snapshot>> SnapshotOf(
    const PgRow& row, ToolListCache& tools) {
  if (row.Int(kSnapshotReceived) == 0) return nullptr;
  auto snapshot = std::make_shared<v1::Snapshot>();
  snapshot->set_agent(std::string(row.Text(kAgent)));
  snapshot->set_session_id(std::string(row.Text(kSessionId)));
  snapshot->set_lane(std::string(row.Text(kLane)));
  snapshot->set_request_id(std::string(row.Text(kRequestId)));
  *snapshot->mutable_request_time() =
      TimeUtil::MicrosecondsToTimestamp(row.Int(kRequestTimeUs));
  absl::StatusOr<v1::Provider> provider =
      EnumColumn<v1::Provider>(row, kProvider, "provider");
  if (!provider.ok()) return provider.status();
  snapshot->set_provider(*provider);
  snapshot->set_model(std::string(row.Text(kModel)));
  absl::StatusOr<uint64_t> system_hash =
      HashColumn(row, kSystemHash, "system_hash");
  if (!system_hash.ok()) return system_hash.status();
  snapshot->set_system_hash(*system_hash);
  if (!row.IsNull(kSystemSections)) {
    CACHEWATCH_RETURN_IF_ERROR(ParseSectionsJson(
        row.Text(kSystemSections), snapshot->mutable_system_sections()));
  }
  if (!row.IsNull(kToolListHash)) {
    absl::StatusOr<const google::protobuf::RepeatedPtrField<v1::ToolRef>*>
        list = tools.Get(std::string(row.Text(kToolListHash)));
    if (!list.ok()) return list.status();
    *snapshot->mutable_tools() = **list;
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
  absl::StatusOr<uint64_t> options_hash =
      HashColumn(row, kOptionsHash, "options_hash");
  if (!options_hash.ok()) return options_hash.status();
  snapshot->set_options_hash(*options_hash);
  CACHEWATCH_RETURN_IF_ERROR(ParseChainBlob(row.Blob(kMessageChain),
                                            snapshot->mutable_message_chain()));
  absl::StatusOr<v1::ExpectedDrop> expected_drop =
      EnumColumn<v1::ExpectedDrop>(row, kExpectedDrop, "expected_drop");
  if (!expected_drop.ok()) return expected_drop.status();
  snapshot->set_expected_drop(*expected_drop);
  absl::StatusOr<v1::ToolOrderPolicy> policy = EnumColumn<v1::ToolOrderPolicy>(
      row, kToolOrderPolicy, "tool_order_policy");
  if (!policy.ok()) return policy.status();
  snapshot->set_tool_order_policy(*policy);
  return snapshot;
}

absl::StatusOr<RestoredLane> RestoredLaneOf(const PgRow& row,
                                            ToolListCache& tools) {
  absl::StatusOr<std::shared_ptr<const v1::Snapshot>> snapshot =
      SnapshotOf(row, tools);
  if (!snapshot.ok()) return snapshot.status();
  absl::StatusOr<Turn> turn = TurnOf(row, *std::move(snapshot));
  if (!turn.ok()) return turn.status();
  RestoredLane lane;
  lane.key = {std::string(row.Text(kAgent)), std::string(row.Text(kSessionId)),
              std::string(row.Text(kLane))};
  lane.state.last_turn = *std::move(turn);
  lane.state.observed_ttl_seconds =
      static_cast<uint32_t>(row.Int(kTurnColumnCount));
  return lane;
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
    const PgRow& row, const ClassificationColumns& columns) {
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
    CACHEWATCH_ASSIGN_OR_RETURN(turn_.turn, TurnOf(row, nullptr));
    turn_.has_snapshot = row.Int(kSnapshotReceived) != 0;
    turn_.received_us = row.Int(kLaneReceivedAtUs);
    turn_.classification.reset();
    if (!row.IsNull(kLaneVerdict) && row.Text(kLaneVerdict) != "pending") {
      CACHEWATCH_ASSIGN_OR_RETURN(
          turn_.classification,
          ClassificationOf(
              row, {kLaneVerdict, kLaneExpectedReuseTokens, kLaneMissedTokens,
                    kExpectedDrop, kLaneBreakEvent}));
    }
    return &turn_;
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
  PgParams params;
  if (request.has_since()) {
    filters |= kSince;
    params.Int(TimeUtil::TimestampToMicroseconds(request.since()));
  }
  if (request.has_until()) {
    filters |= kUntil;
    params.Int(TimeUtil::TimestampToMicroseconds(request.until()));
  }
  if (!request.agent().empty()) {
    filters |= kAgentFilter;
    params.Text(request.agent());
  }
  if (!request.session_id().empty()) {
    filters |= kSessionFilter;
    params.Text(request.session_id());
  }
  if (!request.lane().empty()) {
    filters |= kLaneFilter;
    params.Text(request.lane());
  }
  if (!request.model().empty()) {
    filters |= kModelFilter;
    params.Text(request.model());
  }
  if (request.reason() != v1::REASON_UNSPECIFIED) {
    filters |= kReasonFilter;
    params.Text(ReasonName(request.reason()));
  }
  if (after.has_value()) {
    filters |= kAfterToken;
    params.Int(after->request_time_us).Text(after->break_id);
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
  limit =
      limit <= 0 ? kDefaultTimelineLimit : std::min(limit, kMaxTimelineLimit);
  absl::StatusOr<PgPool::Lease> connection = readers_->Acquire();
  if (!connection.ok()) return connection.status();
  absl::StatusOr<PgResult> rows =
      (*connection)
          ->Prepared("cw_timeline", kSelectTimeline, KeyParams(key).Int(limit));
  if (!rows.ok()) return rows.status();
  v1::GetLaneTimelineResponse response;
  for (int i = rows->rows() - 1; i >= 0; --i) {  // Oldest first.
    const PgRow s = rows->row(i);
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
    absl::StatusOr<v1::Verdict> verdict =
        EnumColumn<v1::Verdict>(s, 13, "verdict");
    if (!verdict.ok()) return verdict.status();
    turn.set_verdict(*verdict);
    absl::StatusOr<v1::Reason> reason =
        EnumColumn<v1::Reason>(s, 14, "primary_reason");
    if (!reason.ok()) return reason.status();
    turn.set_primary_reason(*reason);
    turn.set_break_id(std::string(s.Text(15)));
    turn.set_tool_count(static_cast<int32_t>(s.Int(16)));
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
