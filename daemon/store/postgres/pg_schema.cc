#include "daemon/store/postgres/pg_schema.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/store/schema_version.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

// Advisory lock keys (pg_advisory_xact_lock), arbitrary but fixed.
constexpr int64_t kMigrationLock = 0x6361636865770001;  // "cachew" 1
constexpr int64_t kPartitionLock = 0x6361636865770002;

// Migration i (1-based) takes the schema from version i-1 to i. Append only;
// never edit a migration that has shipped. 1 is the SQLite store's schema
// version 2, partitioned; text compares byte-wise (COLLATE "C"), as in
// SQLite, so every ORDER BY and comparison agrees with the SQLite store.
const std::vector<std::string>& Migrations() {
  static const auto* const kMigrations = new std::vector<std::string>{
      R"sql(
CREATE TABLE tool_lists (
  list_hash text COLLATE "C" PRIMARY KEY,
  tool_count bigint NOT NULL
);
CREATE TABLE tool_list_entries (
  list_hash text COLLATE "C" NOT NULL REFERENCES tool_lists ON DELETE CASCADE,
  position bigint NOT NULL,
  name text COLLATE "C" NOT NULL,
  schema_hash text COLLATE "C" NOT NULL,
  PRIMARY KEY (list_hash, position)
);
CREATE TABLE turns (
  id bigint GENERATED ALWAYS AS IDENTITY,
  agent text COLLATE "C" NOT NULL,
  session_id text COLLATE "C" NOT NULL,
  lane text COLLATE "C" NOT NULL,
  request_id text COLLATE "C" NOT NULL,
  provider text COLLATE "C",
  model text COLLATE "C",
  request_time_us bigint NOT NULL,
  response_time_us bigint,
  snapshot_received integer NOT NULL DEFAULT 0,
  usage_received integer NOT NULL DEFAULT 0,
  system_hash text COLLATE "C",
  system_sections text COLLATE "C",
  tool_list_hash text COLLATE "C" REFERENCES tool_lists,
  tool_count bigint,
  options_hash text COLLATE "C",
  cache_enabled integer,
  cache_automatic integer,
  cache_ttl_seconds bigint,
  breakpoints text COLLATE "C",
  message_chain bytea,
  expected_drop text COLLATE "C",
  tool_order_policy text COLLATE "C",
  uncached_input_tokens bigint,
  cache_read_tokens bigint,
  cache_write_tokens bigint,
  cache_write_5m_tokens bigint,
  cache_write_1h_tokens bigint,
  output_tokens bigint,
  prompt_total_tokens bigint,
  raw_usage_json text COLLATE "C",
  provider_miss_reason text COLLATE "C",
  provider_missed_tokens bigint,
  verdict text COLLATE "C",
  primary_reason text COLLATE "C",
  break_id text COLLATE "C",
  expected_reuse_tokens bigint,
  missed_tokens bigint,
  received_at_us bigint,
  CONSTRAINT turns_key
    UNIQUE (agent, session_id, lane, request_id, request_time_us)
) PARTITION BY RANGE (request_time_us);
CREATE INDEX turns_by_lane_time
  ON turns (agent, session_id, lane, request_time_us);
CREATE INDEX turns_by_time ON turns (request_time_us);
CREATE INDEX turns_by_tool_list ON turns (tool_list_hash);
CREATE TABLE prompt_cache_breaks (
  break_id text COLLATE "C" NOT NULL,
  agent text COLLATE "C",
  session_id text COLLATE "C",
  lane text COLLATE "C",
  provider text COLLATE "C",
  previous_request_id text COLLATE "C",
  request_id text COLLATE "C",
  previous_model text COLLATE "C",
  model text COLLATE "C",
  primary_reason text COLLATE "C",
  reasons text COLLATE "C",
  evidence text COLLATE "C",
  previous_cache_read_tokens bigint,
  current_cache_read_tokens bigint,
  expected_reuse_tokens bigint,
  missed_tokens bigint,
  prompt_total_tokens bigint,
  cache_write_tokens bigint,
  changed_tool_names text COLLATE "C",
  added_tool_names text COLLATE "C",
  removed_tool_names text COLLATE "C",
  reordered_tool_names text COLLATE "C",
  schema_changed_tool_names text COLLATE "C",
  changed_system_sections text COLLATE "C",
  first_changed_tool_index bigint,
  first_changed_message_block bigint,
  blocks_since_last_write bigint,
  gap_seconds double precision,
  ttl_seconds bigint,
  ttl_source text COLLATE "C",
  estimated_extra_cost_usd double precision,
  previous_request_time_us bigint,
  request_time_us bigint NOT NULL,
  provider_miss_reason text COLLATE "C",
  provider_missed_tokens bigint,
  provider_agreement text COLLATE "C",
  event bytea,
  CONSTRAINT prompt_cache_breaks_key UNIQUE (break_id, request_time_us)
) PARTITION BY RANGE (request_time_us);
CREATE INDEX breaks_by_time ON prompt_cache_breaks (request_time_us);
CREATE INDEX breaks_by_agent_time
  ON prompt_cache_breaks (agent, request_time_us);
CREATE INDEX breaks_by_model_time
  ON prompt_cache_breaks (model, request_time_us);
CREATE INDEX breaks_by_lane_time
  ON prompt_cache_breaks (agent, session_id, lane, request_time_us);
CREATE INDEX breaks_by_agent_reason
  ON prompt_cache_breaks (agent, primary_reason, request_time_us,
                          missed_tokens, estimated_extra_cost_usd);
CREATE INDEX breaks_by_session
  ON prompt_cache_breaks (agent, session_id, request_time_us, lane,
                          primary_reason, missed_tokens,
                          estimated_extra_cost_usd);
CREATE INDEX breaks_by_reason_time
  ON prompt_cache_breaks (primary_reason, request_time_us, agent,
                          ttl_seconds, gap_seconds, missed_tokens);
CREATE INDEX breaks_with_reorders
  ON prompt_cache_breaks (request_time_us, agent, primary_reason,
                          missed_tokens, reordered_tool_names)
  WHERE reordered_tool_names <> '[]';
CREATE INDEX breaks_with_schema_changes
  ON prompt_cache_breaks (request_time_us, agent, session_id,
                          primary_reason, missed_tokens,
                          schema_changed_tool_names)
  WHERE schema_changed_tool_names <> '[]';
CREATE VIEW breaks_readable AS SELECT
  break_id,
  to_char(to_timestamp(round(request_time_us / 1000.0) / 1000) AT TIME ZONE 'UTC',
          'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS request_time,
  to_char(to_timestamp(round(previous_request_time_us / 1000.0) / 1000) AT TIME ZONE 'UTC',
          'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS previous_request_time,
  agent, session_id, lane, provider, previous_model, model,
  primary_reason, reasons, evidence,
  previous_cache_read_tokens, current_cache_read_tokens,
  expected_reuse_tokens, missed_tokens, prompt_total_tokens,
  cache_write_tokens, estimated_extra_cost_usd,
  changed_tool_names, added_tool_names, removed_tool_names,
  reordered_tool_names, schema_changed_tool_names, first_changed_tool_index,
  changed_system_sections, first_changed_message_block,
  blocks_since_last_write, gap_seconds, ttl_seconds, ttl_source,
  previous_request_id, request_id,
  provider_miss_reason, provider_missed_tokens, provider_agreement
FROM prompt_cache_breaks;
)sql",
      // 2: which daemon wrote each lane last (docs/FLEET.md, "A lane's
      // state across daemons"). A commit claims its lanes under their
      // advisory locks; the claim fails when another daemon wrote one of
      // them after this daemon last read it (its cached lane is stale).
      // Also the index the writes look a turn up by: the lane's time index
      // would read every turn of a partition the planner has no statistics
      // for yet.
      R"sql(
CREATE INDEX turns_by_request ON turns (agent, session_id, lane, request_id);
CREATE SEQUENCE lane_write_seq;
CREATE TABLE lane_writers (
  agent text COLLATE "C" NOT NULL,
  session_id text COLLATE "C" NOT NULL,
  lane text COLLATE "C" NOT NULL,
  writer text COLLATE "C" NOT NULL,
  write_seq bigint NOT NULL,
  PRIMARY KEY (agent, session_id, lane)
);
CREATE FUNCTION cachewatch_claim_lanes(
    me text, agents text[], sessions text[], lanes text[], seen bigint[])
RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
  stale text;
BEGIN
  SELECT string_agg(k.i::text, ',' ORDER BY k.i) INTO stale
  FROM unnest(agents, sessions, lanes, seen)
         WITH ORDINALITY AS k(agent, session_id, lane, seen, i)
  JOIN lane_writers AS w
    ON w.agent = k.agent AND w.session_id = k.session_id AND w.lane = k.lane
  WHERE k.seen IS NOT NULL AND w.writer <> me AND w.write_seq > k.seen;
  IF stale IS NOT NULL THEN
    RAISE EXCEPTION 'lanes written by another daemon: <%>', stale
      USING ERRCODE = 'CW001';
  END IF;
  INSERT INTO lane_writers AS w (agent, session_id, lane, writer, write_seq)
  SELECT k.agent, k.session_id, k.lane, me, nextval('lane_write_seq')
  FROM unnest(agents, sessions, lanes) AS k(agent, session_id, lane)
  ON CONFLICT (agent, session_id, lane) DO UPDATE
    SET writer = excluded.writer, write_seq = excluded.write_seq;
  RETURN cardinality(agents);
END
$fn$;
)sql",
      // 3: the index the writes look a turn up by, on a hash of its key
      // (pg_write_statements.h, kPgFindTurns): the lookup is written so
      // that no other index can serve it, and the plan PostgreSQL caches
      // for it never reads a day or a lane per turn, whatever a
      // partition's statistics. It replaces turns_by_request, which served
      // no query turns_key does not.
      R"sql(
DROP INDEX turns_by_request;
CREATE INDEX turns_by_key_hash ON turns ((hashtextextended(
  agent || E'\x1f' || session_id || E'\x1f' || lane || E'\x1f' || request_id,
  0)));
)sql",
  };
  return *kMigrations;
}

constexpr const char* kCreateVersionTable = R"sql(
CREATE TABLE IF NOT EXISTS cachewatch_schema_migrations (
  version integer PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT now()
))sql";

absl::StatusOr<int> ReadVersion(PgConnection& connection) {
  absl::StatusOr<PgResult> result = connection.Query(
      "SELECT coalesce(max(version), 0) FROM cachewatch_schema_migrations");
  if (!result.ok()) return result.status();
  return static_cast<int>(result->row(0).Int(0));
}

std::string PartitionName(const std::string& table, int64_t day) {
  return absl::StrCat(
      table, "_p",
      absl::FormatTime("%Y%m%d", absl::FromUnixSeconds(day * 86400),
                       absl::UTCTimeZone()));
}

// The day of a partition's name, nullopt for a name not made by
// PartitionName.
std::optional<int64_t> DayOfName(const std::string& table,
                                 const std::string& name) {
  const std::string prefix = table + "_p";
  if (!name.starts_with(prefix) || name.size() != prefix.size() + 8) {
    return std::nullopt;
  }
  const std::string digits = name.substr(prefix.size());
  int year = 0, month = 0, day = 0;
  if (!absl::SimpleAtoi(digits.substr(0, 4), &year) ||
      !absl::SimpleAtoi(digits.substr(4, 2), &month) ||
      !absl::SimpleAtoi(digits.substr(6, 2), &day)) {
    return std::nullopt;
  }
  const absl::CivilDay civil(year, month, day);
  if (civil.year() != year || civil.month() != month || civil.day() != day) {
    return std::nullopt;  // Not a real date.
  }
  return absl::ToUnixSeconds(absl::FromCivil(civil, absl::UTCTimeZone())) /
         86400;
}

// Runs `body` in a transaction that holds the advisory lock `lock`.
template <typename Body>
absl::Status Locked(PgConnection& connection, int64_t lock, Body body) {
  CACHEWATCH_RETURN_IF_ERROR(connection.Exec("BEGIN"));
  absl::Status status =
      connection.Query("SELECT pg_advisory_xact_lock($1)", PgParams().Int(lock))
          .status();
  if (status.ok()) status = body();
  if (status.ok()) status = connection.Exec("COMMIT");
  if (!status.ok() && connection.ok())
    connection.Exec("ROLLBACK").IgnoreError();
  return status;
}

}  // namespace

int PgLatestSchemaVersion() { return static_cast<int>(Migrations().size()); }

absl::StatusOr<int> PgSchemaVersion(PgConnection& connection) {
  absl::StatusOr<PgResult> exists = connection.Query(
      "SELECT to_regclass('cachewatch_schema_migrations') IS NOT NULL");
  if (!exists.ok()) return exists.status();
  if (exists->row(0).Text(0) != "t") return 0;
  return ReadVersion(connection);
}

absl::Status PgMigrate(PgConnection& connection) {
  return Locked(connection, kMigrationLock, [&]() -> absl::Status {
    CACHEWATCH_RETURN_IF_ERROR(connection.Exec(kCreateVersionTable));
    // Read under the lock: another daemon may have migrated meanwhile.
    absl::StatusOr<int> version = ReadVersion(connection);
    if (!version.ok()) return version.status();
    CACHEWATCH_RETURN_IF_ERROR(
        CheckSchemaVersionKnown(*version, PgLatestSchemaVersion()));
    for (int next = *version; next < PgLatestSchemaVersion(); ++next) {
      CACHEWATCH_RETURN_IF_ERROR(connection.Exec(Migrations()[next]));
      CACHEWATCH_RETURN_IF_ERROR(
          connection
              .Query("INSERT INTO cachewatch_schema_migrations (version) "
                     "VALUES ($1)",
                     PgParams().Int(next + 1))
              .status());
    }
    return absl::OkStatus();
  });
}

int64_t PgDayOf(int64_t time_us) {
  // Floor division: times before the epoch round down too.
  return time_us >= 0 ? time_us / kPgDayUs
                      : -((-time_us + kPgDayUs - 1) / kPgDayUs);
}

absl::Status PgCreatePartitions(PgConnection& connection,
                                const std::vector<int64_t>& days) {
  if (days.empty()) return absl::OkStatus();
  return Locked(connection, kPartitionLock, [&]() -> absl::Status {
    for (int64_t day : std::set<int64_t>(days.begin(), days.end())) {
      for (const char* table : {"turns", "prompt_cache_breaks"}) {
        // Names and bounds are our own integers: no injection possible.
        CACHEWATCH_RETURN_IF_ERROR(connection.Exec(absl::StrCat(
            "CREATE TABLE IF NOT EXISTS ", PartitionName(table, day),
            " PARTITION OF ", table, " FOR VALUES FROM (", day * kPgDayUs,
            ") TO (", (day + 1) * kPgDayUs, ")")));
      }
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<PgPartition>> PgListPartitions(
    PgConnection& connection) {
  absl::StatusOr<PgResult> result = connection.Query(R"sql(
SELECT parent.relname, child.relname
FROM pg_inherits
JOIN pg_class AS parent ON parent.oid = pg_inherits.inhparent
JOIN pg_class AS child ON child.oid = pg_inherits.inhrelid
WHERE parent.oid IN ('turns'::regclass, 'prompt_cache_breaks'::regclass))sql");
  if (!result.ok()) return result.status();
  std::vector<PgPartition> partitions;
  for (int i = 0; i < result->rows(); ++i) {
    PgPartition partition;
    partition.table = std::string(result->row(i).Text(0));
    partition.name = std::string(result->row(i).Text(1));
    const std::optional<int64_t> day =
        DayOfName(partition.table, partition.name);
    if (!day.has_value()) continue;  // Not ours: left alone.
    partition.day = *day;
    partitions.push_back(std::move(partition));
  }
  std::sort(partitions.begin(), partitions.end(),
            [](const PgPartition& a, const PgPartition& b) {
              return a.day != b.day ? a.day < b.day : a.table < b.table;
            });
  return partitions;
}

}  // namespace cachewatch
