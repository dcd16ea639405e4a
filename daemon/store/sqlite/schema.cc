// The schema. Table and column names are a public contract: postmortem SQL
// is written against them. Column layouts are described in columns.h.
//
// tool_lists / tool_list_entries: every distinct tool list once, addressed
//   by list_hash (ToolListHash in columns.h); entries in request order.
// turns: one row per (agent, session_id, lane, request_id), filled in by the
//   snapshot (snapshot_received = 1), the usage (usage_received = 1) and the
//   classification (verdict, ...), in whatever order they arrive.
//   request_time_us is the snapshot's request time, else the usage's
//   response time (client clocks, microseconds since the epoch);
//   received_at_us is the daemon's clock when the row was first written.
// prompt_cache_breaks: one row per break, keyed by break_id; `event` holds
//   the serialized cachewatch.v1.PromptCacheBreak, the other columns are
//   its fields for SQL.
// breaks_readable: prompt_cache_breaks with ISO-8601 times, for people at
//   the sqlite3 prompt.
#include "daemon/store/sqlite/schema.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/store/schema_version.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

// Migration i (1-based) takes the schema from version i-1 to i. Append only;
// never edit a migration that has shipped.
const std::vector<std::string>& Migrations() {
  static const auto* const kMigrations = new std::vector<std::string>{
      // 1: the initial schema.
      R"sql(
CREATE TABLE tool_lists (
  list_hash TEXT PRIMARY KEY,
  tool_count INTEGER NOT NULL
);
CREATE TABLE tool_list_entries (
  list_hash TEXT NOT NULL REFERENCES tool_lists ON DELETE CASCADE,
  position INTEGER NOT NULL,
  name TEXT NOT NULL,
  schema_hash TEXT NOT NULL,
  PRIMARY KEY (list_hash, position)
);
CREATE TABLE turns (
  id INTEGER PRIMARY KEY,
  agent TEXT NOT NULL,
  session_id TEXT NOT NULL,
  lane TEXT NOT NULL,
  request_id TEXT NOT NULL,
  provider TEXT,
  model TEXT,
  request_time_us INTEGER,
  response_time_us INTEGER,
  snapshot_received INTEGER NOT NULL DEFAULT 0,
  usage_received INTEGER NOT NULL DEFAULT 0,
  system_hash TEXT,
  system_sections TEXT,
  tool_list_hash TEXT REFERENCES tool_lists,
  tool_count INTEGER,
  options_hash TEXT,
  cache_enabled INTEGER,
  cache_automatic INTEGER,
  cache_ttl_seconds INTEGER,
  breakpoints TEXT,
  message_chain BLOB,
  expected_drop TEXT,
  tool_order_policy TEXT,
  uncached_input_tokens INTEGER,
  cache_read_tokens INTEGER,
  cache_write_tokens INTEGER,
  cache_write_5m_tokens INTEGER,
  cache_write_1h_tokens INTEGER,
  output_tokens INTEGER,
  prompt_total_tokens INTEGER,
  raw_usage_json TEXT,
  provider_miss_reason TEXT,
  provider_missed_tokens INTEGER,
  verdict TEXT,
  primary_reason TEXT,
  break_id TEXT,
  expected_reuse_tokens INTEGER,
  missed_tokens INTEGER,
  received_at_us INTEGER,
  UNIQUE (agent, session_id, lane, request_id)
);
CREATE INDEX turns_by_lane_time
  ON turns (agent, session_id, lane, request_time_us);
CREATE INDEX turns_by_time ON turns (request_time_us);
-- For retention's unreferenced-tool-list check and the foreign key.
CREATE INDEX turns_by_tool_list ON turns (tool_list_hash);
CREATE TABLE prompt_cache_breaks (
  break_id TEXT PRIMARY KEY,
  agent TEXT,
  session_id TEXT,
  lane TEXT,
  provider TEXT,
  previous_request_id TEXT,
  request_id TEXT,
  previous_model TEXT,
  model TEXT,
  primary_reason TEXT,
  reasons TEXT,
  evidence TEXT,
  previous_cache_read_tokens INTEGER,
  current_cache_read_tokens INTEGER,
  expected_reuse_tokens INTEGER,
  missed_tokens INTEGER,
  prompt_total_tokens INTEGER,
  cache_write_tokens INTEGER,
  changed_tool_names TEXT,
  added_tool_names TEXT,
  removed_tool_names TEXT,
  reordered_tool_names TEXT,
  schema_changed_tool_names TEXT,
  changed_system_sections TEXT,
  first_changed_tool_index INTEGER,
  first_changed_message_block INTEGER,
  blocks_since_last_write INTEGER,
  gap_seconds REAL,
  ttl_seconds INTEGER,
  ttl_source TEXT,
  estimated_extra_cost_usd REAL,
  previous_request_time_us INTEGER,
  request_time_us INTEGER,
  provider_miss_reason TEXT,
  provider_missed_tokens INTEGER,
  provider_agreement TEXT,
  event BLOB
);
CREATE INDEX breaks_by_time ON prompt_cache_breaks (request_time_us);
CREATE INDEX breaks_by_agent_time
  ON prompt_cache_breaks (agent, request_time_us);
CREATE INDEX breaks_by_reason_time
  ON prompt_cache_breaks (primary_reason, request_time_us);
CREATE INDEX breaks_by_model_time
  ON prompt_cache_breaks (model, request_time_us);
CREATE INDEX breaks_by_lane_time
  ON prompt_cache_breaks (agent, session_id, lane, request_time_us);
CREATE VIEW breaks_readable AS SELECT
  break_id,
  strftime('%Y-%m-%dT%H:%M:%fZ', request_time_us / 1e6, 'unixepoch')
    AS request_time,
  strftime('%Y-%m-%dT%H:%M:%fZ', previous_request_time_us / 1e6, 'unixepoch')
    AS previous_request_time,
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
      // 2: covering indexes for the postmortem aggregations
      // (dashboards/sql/), so a 30-day window reads index entries only.
      R"sql(
CREATE INDEX breaks_by_agent_reason
  ON prompt_cache_breaks (agent, primary_reason, request_time_us,
                          missed_tokens, estimated_extra_cost_usd);
CREATE INDEX breaks_by_session
  ON prompt_cache_breaks (agent, session_id, request_time_us, lane,
                          primary_reason, missed_tokens,
                          estimated_extra_cost_usd);
DROP INDEX breaks_by_reason_time;
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
)sql",
  };
  return *kMigrations;
}

absl::StatusOr<int> UserVersion(Database& db) {
  CACHEWATCH_ASSIGN_OR_RETURN(Statement statement,
                              db.Prepare("PRAGMA user_version"));
  CACHEWATCH_ASSIGN_OR_RETURN(bool row, statement.Step());
  if (!row) return absl::InternalError("PRAGMA user_version returned no row");
  return static_cast<int>(statement.Int(0));
}

}  // namespace

int LatestSchemaVersion() { return static_cast<int>(Migrations().size()); }

absl::Status CheckSchemaVersion(Database& db) {
  CACHEWATCH_ASSIGN_OR_RETURN(int version, UserVersion(db));
  return CheckSchemaVersionKnown(version, LatestSchemaVersion());
}

absl::Status Migrate(Database& db) {
  while (true) {
    Transaction transaction(db);
    CACHEWATCH_RETURN_IF_ERROR(transaction.Begin("BEGIN IMMEDIATE"));
    // Re-read under the write lock: another process may have migrated.
    CACHEWATCH_ASSIGN_OR_RETURN(int version, UserVersion(db));
    CACHEWATCH_RETURN_IF_ERROR(
        CheckSchemaVersionKnown(version, LatestSchemaVersion()));
    if (version == LatestSchemaVersion()) return absl::OkStatus();
    CACHEWATCH_RETURN_IF_ERROR(db.Exec(Migrations()[version]));
    // PRAGMA takes no bound parameters; the version is our own integer.
    CACHEWATCH_RETURN_IF_ERROR(
        db.Exec(absl::StrCat("PRAGMA user_version = ", version + 1)));
    CACHEWATCH_RETURN_IF_ERROR(transaction.Commit());
  }
}

}  // namespace cachewatch
