// The SQL that writes the store's rows, one statement per kind of row,
// with named parameters (":agent", ...) bound in the layouts of columns.h.
// WriteConnection runs them; bench/query_bench writes its generated store
// with the same text, so the two cannot drift apart when the schema changes.
//
// Every turn row is keyed by (agent, session_id, lane, request_id). Its
// records may arrive in any order, each written by its own upsert:
// kUpsertSnapshot, kUpsertUsage and kUpsertClassification, which define
// what a row holds. The store writes a batch's records of a turn merged
// (daemon/store/turn_merge.h) with kUpsertTurn, which gives the row those
// upserts would, applied in the order snapshot, usage, classification (a
// turn without a snapshot with kFillTurnRequestTime and
// kUpsertTurnWithoutSnapshot, which give the same row and rewrite no index); a
// break's classification still goes through kUpsertClassification (its
// break row is added only when the turn took it). A parameter left unbound
// is NULL.
#ifndef CACHEWATCH_DAEMON_STORE_SQLITE_WRITE_STATEMENTS_H_
#define CACHEWATCH_DAEMON_STORE_SQLITE_WRITE_STATEMENTS_H_

#include "daemon/store/break_columns.h"
#include "daemon/store/turn_columns.h"

namespace cachewatch {

inline constexpr const char* kInsertToolList = R"sql(
INSERT INTO tool_lists (list_hash, tool_count) VALUES (:list_hash, :tool_count)
ON CONFLICT (list_hash) DO NOTHING)sql";

inline constexpr const char* kInsertToolEntry = R"sql(
INSERT INTO tool_list_entries (list_hash, position, name, schema_hash)
VALUES (:list_hash, :position, :name, :schema_hash))sql";

// A retried snapshot (snapshot_received already 1) changes nothing. The
// snapshot's provider, model and request time win over the usage's.
inline constexpr const char* kUpsertSnapshot = R"sql(
INSERT INTO turns (
  agent, session_id, lane, request_id, provider, model, request_time_us,
  snapshot_received, system_hash, system_sections, tool_list_hash, tool_count,
  options_hash, cache_enabled, cache_automatic, cache_ttl_seconds, breakpoints,
  message_chain, expected_drop, tool_order_policy, received_at_us)
VALUES (
  :agent, :session_id, :lane, :request_id, :provider, :model, :request_time_us,
  1, :system_hash, :system_sections, :tool_list_hash, :tool_count,
  :options_hash, :cache_enabled, :cache_automatic, :cache_ttl_seconds,
  :breakpoints, :message_chain, :expected_drop, :tool_order_policy,
  :received_at_us)
ON CONFLICT (agent, session_id, lane, request_id) DO UPDATE SET
  provider = excluded.provider,
  model = excluded.model,
  request_time_us = excluded.request_time_us,
  snapshot_received = 1,
  system_hash = excluded.system_hash,
  system_sections = excluded.system_sections,
  tool_list_hash = excluded.tool_list_hash,
  tool_count = excluded.tool_count,
  options_hash = excluded.options_hash,
  cache_enabled = excluded.cache_enabled,
  cache_automatic = excluded.cache_automatic,
  cache_ttl_seconds = excluded.cache_ttl_seconds,
  breakpoints = excluded.breakpoints,
  message_chain = excluded.message_chain,
  expected_drop = excluded.expected_drop,
  tool_order_policy = excluded.tool_order_policy
WHERE turns.snapshot_received = 0)sql";

// A retried usage (usage_received already 1) changes nothing. Without a
// snapshot, the response time stands in for the request time.
inline constexpr const char* kUpsertUsage = R"sql(
INSERT INTO turns (
  agent, session_id, lane, request_id, provider, model, request_time_us,
  response_time_us, usage_received, uncached_input_tokens, cache_read_tokens,
  cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens,
  output_tokens, prompt_total_tokens, raw_usage_json, provider_miss_reason,
  provider_missed_tokens, received_at_us)
VALUES (
  :agent, :session_id, :lane, :request_id, :provider, :model,
  :response_time_us, :response_time_us, 1, :uncached_input_tokens,
  :cache_read_tokens, :cache_write_tokens, :cache_write_5m_tokens,
  :cache_write_1h_tokens, :output_tokens, :prompt_total_tokens,
  :raw_usage_json, :provider_miss_reason, :provider_missed_tokens,
  :received_at_us)
ON CONFLICT (agent, session_id, lane, request_id) DO UPDATE SET
  provider = coalesce(turns.provider, excluded.provider),
  model = coalesce(turns.model, excluded.model),
  request_time_us = coalesce(turns.request_time_us, excluded.request_time_us),
  response_time_us = excluded.response_time_us,
  usage_received = 1,
  uncached_input_tokens = excluded.uncached_input_tokens,
  cache_read_tokens = excluded.cache_read_tokens,
  cache_write_tokens = excluded.cache_write_tokens,
  cache_write_5m_tokens = excluded.cache_write_5m_tokens,
  cache_write_1h_tokens = excluded.cache_write_1h_tokens,
  output_tokens = excluded.output_tokens,
  prompt_total_tokens = excluded.prompt_total_tokens,
  raw_usage_json = excluded.raw_usage_json,
  provider_miss_reason = excluded.provider_miss_reason,
  provider_missed_tokens = excluded.provider_missed_tokens
WHERE turns.usage_received = 0)sql";

// Only a turn not classified yet (no verdict, or 'pending') takes a verdict:
// a stored final verdict is never rewritten, whatever a retry brings.
inline constexpr const char* kUpsertClassification = R"sql(
INSERT INTO turns (
  agent, session_id, lane, request_id, request_time_us, expected_drop,
  verdict, primary_reason, break_id, expected_reuse_tokens, missed_tokens,
  received_at_us)
VALUES (
  :agent, :session_id, :lane, :request_id, :request_time_us, :expected_drop,
  :verdict, :primary_reason, :break_id, :expected_reuse_tokens,
  :missed_tokens, :received_at_us)
ON CONFLICT (agent, session_id, lane, request_id) DO UPDATE SET
  request_time_us = coalesce(turns.request_time_us, excluded.request_time_us),
  expected_drop = coalesce(turns.expected_drop, excluded.expected_drop),
  verdict = excluded.verdict,
  primary_reason = excluded.primary_reason,
  break_id = excluded.break_id,
  expected_reuse_tokens = excluded.expected_reuse_tokens,
  missed_tokens = excluded.missed_tokens
WHERE turns.verdict IS NULL
   OR (turns.verdict = 'pending' AND excluded.verdict <> 'pending'))sql";

// A turn's merged records in one upsert: has_snapshot, has_usage and
// has_classification (0 or 1) say which it brings; the parameters of a
// missing one are NULL. Column by column, the row becomes what
// kUpsertSnapshot, kUpsertUsage and kUpsertClassification would make of it,
// in that order: each record only where its own upsert's condition holds on
// the stored row (the snapshot: none stored yet; the usage: none stored yet;
// the classification: no verdict, or 'pending' and a final one), the
// snapshot's provider, model and request time and expected drop first, a
// usage's or classification's filling them only where they are NULL. The
// classification here is never a break's (a break's goes through
// kUpsertClassification, which writes its request time and break row).
#define CACHEWATCH_TURN_S "(:has_snapshot AND turns.snapshot_received = 0)"
#define CACHEWATCH_TURN_U "(:has_usage AND turns.usage_received = 0)"
#define CACHEWATCH_TURN_C                               \
  "(:has_classification AND (turns.verdict IS NULL OR " \
  "(turns.verdict = 'pending' AND :verdict <> 'pending')))"
// column = the record's value where `test` holds, else unchanged.
#define CACHEWATCH_TURN_SET(test, column)                       \
  "\n  " #column " = CASE WHEN " test " THEN excluded." #column \
  " ELSE turns." #column " END"

// The head of kUpsertTurn and kUpsertTurnWithoutSnapshot: the insert of a
// turn not stored yet, up to its conflict clause's SET.
#define CACHEWATCH_UPSERT_TURN_HEAD                                          \
  "INSERT INTO turns (\n  " CACHEWATCH_TURN_INSERT_COLUMNS                   \
  ")\nVALUES (\n"                                                            \
  "  :agent, :session_id, :lane, :request_id,\n"                             \
  "  coalesce(:s_provider, :u_provider), coalesce(:s_model, :u_model),\n"    \
  "  coalesce(:s_request_time_us, :response_time_us),\n"                     \
  "  :has_snapshot, :system_hash, :system_sections, :tool_list_hash,\n"      \
  "  :tool_count, :options_hash, :cache_enabled, :cache_automatic,\n"        \
  "  :cache_ttl_seconds, :breakpoints, :message_chain,\n"                    \
  "  coalesce(:s_expected_drop, :c_expected_drop), :tool_order_policy,\n"    \
  "  :response_time_us, :has_usage, :uncached_input_tokens, "                \
  ":cache_read_tokens,\n"                                                    \
  "  :cache_write_tokens, :cache_write_5m_tokens, :cache_write_1h_tokens,\n" \
  "  :output_tokens, :prompt_total_tokens, :raw_usage_json,\n"               \
  "  :provider_miss_reason, :provider_missed_tokens, :verdict, "             \
  ":primary_reason,\n"                                                       \
  "  :break_id, :expected_reuse_tokens, :missed_tokens, :received_at_us)\n"  \
  "ON CONFLICT (agent, session_id, lane, request_id) DO UPDATE SET"
// The SET of the usage's and the classification's own columns.
#define CACHEWATCH_TURN_SET_USAGE_AND_VERDICT \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_U, response_time_us) ","      \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_U, usage_received) ","        \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_U, uncached_input_tokens) "," \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_U, cache_read_tokens) ","     \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_U, cache_write_tokens) ","    \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_U, cache_write_5m_tokens) "," \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_U, cache_write_1h_tokens) "," \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_U, output_tokens) ","         \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_U, prompt_total_tokens) ","   \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_U, raw_usage_json) ","        \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_U, provider_miss_reason) ","  \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_U, provider_missed_tokens) "," \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_C, verdict) ","               \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_C, primary_reason) ","        \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_C, break_id) ","              \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_C, expected_reuse_tokens) "," \
  CACHEWATCH_TURN_SET(CACHEWATCH_TURN_C, missed_tokens)

inline constexpr const char* kUpsertTurn =
    CACHEWATCH_UPSERT_TURN_HEAD
    "\n  provider = coalesce(CASE WHEN " CACHEWATCH_TURN_S
    " THEN :s_provider ELSE turns.provider END,\n"
    "    CASE WHEN " CACHEWATCH_TURN_U " THEN :u_provider END),\n"
    "  model = coalesce(CASE WHEN " CACHEWATCH_TURN_S
    " THEN :s_model ELSE turns.model END,\n"
    "    CASE WHEN " CACHEWATCH_TURN_U " THEN :u_model END),\n"
    "  request_time_us = coalesce(CASE WHEN " CACHEWATCH_TURN_S
    " THEN :s_request_time_us ELSE turns.request_time_us END,\n"
    "    CASE WHEN " CACHEWATCH_TURN_U " THEN :response_time_us END),\n"
    "  expected_drop = coalesce(CASE WHEN " CACHEWATCH_TURN_S
    " THEN :s_expected_drop ELSE turns.expected_drop END,\n"
    "    CASE WHEN " CACHEWATCH_TURN_C " THEN :c_expected_drop END),"
    CACHEWATCH_TURN_SET(CACHEWATCH_TURN_S, snapshot_received) ","
    CACHEWATCH_TURN_SET(CACHEWATCH_TURN_S, system_hash) ","
    CACHEWATCH_TURN_SET(CACHEWATCH_TURN_S, system_sections) ","
    CACHEWATCH_TURN_SET(CACHEWATCH_TURN_S, tool_list_hash) ","
    CACHEWATCH_TURN_SET(CACHEWATCH_TURN_S, tool_count) ","
    CACHEWATCH_TURN_SET(CACHEWATCH_TURN_S, options_hash) ","
    CACHEWATCH_TURN_SET(CACHEWATCH_TURN_S, cache_enabled) ","
    CACHEWATCH_TURN_SET(CACHEWATCH_TURN_S, cache_automatic) ","
    CACHEWATCH_TURN_SET(CACHEWATCH_TURN_S, cache_ttl_seconds) ","
    CACHEWATCH_TURN_SET(CACHEWATCH_TURN_S, breakpoints) ","
    CACHEWATCH_TURN_SET(CACHEWATCH_TURN_S, message_chain) ","
    CACHEWATCH_TURN_SET(CACHEWATCH_TURN_S, tool_order_policy) ","
    CACHEWATCH_TURN_SET_USAGE_AND_VERDICT
    "\nWHERE " CACHEWATCH_TURN_S " OR " CACHEWATCH_TURN_U
    " OR " CACHEWATCH_TURN_C;

// kUpsertTurn for a merged turn without a snapshot (has_snapshot 0), the
// common case: a turn's usage and verdict come a response after its
// snapshot. It gives the row what kUpsertTurn would, but its SET leaves out
// every column only a snapshot writes and request_time_us: SQLite deletes
// and re-inserts a row's entry in every index on a column the SET assigns,
// even to the same value, so kUpsertTurn rewrites three of turns' indexes
// (and checks the tool list's foreign key) for a usage. The one change the
// left-out request time could make, a NULL one taking the usage's response
// time, is kFillTurnRequestTime's, run just before.
inline constexpr const char* kUpsertTurnWithoutSnapshot =
    CACHEWATCH_UPSERT_TURN_HEAD
    "\n  provider = coalesce(turns.provider,\n"
    "    CASE WHEN " CACHEWATCH_TURN_U
    " THEN :u_provider END),\n"
    "  model = coalesce(turns.model,\n"
    "    CASE WHEN " CACHEWATCH_TURN_U
    " THEN :u_model END),\n"
    "  expected_drop = coalesce(turns.expected_drop,\n"
    "    CASE WHEN " CACHEWATCH_TURN_C
    " THEN :c_expected_drop END)," CACHEWATCH_TURN_SET_USAGE_AND_VERDICT
    "\nWHERE " CACHEWATCH_TURN_U " OR " CACHEWATCH_TURN_C;

// Before kUpsertTurnWithoutSnapshot, for a turn that brings a usage with a
// response time: a stored row with no request time and no usage yet takes
// the response time as its request time (what kUpsertTurn's coalesce does).
// Changes nothing otherwise, nor when the turn is not stored yet.
inline constexpr const char* kFillTurnRequestTime = R"sql(
UPDATE turns SET request_time_us = :response_time_us
WHERE agent = :agent AND session_id = :session_id AND lane = :lane
  AND request_id = :request_id AND usage_received = 0
  AND request_time_us IS NULL)sql";

#undef CACHEWATCH_TURN_S
#undef CACHEWATCH_TURN_U
#undef CACHEWATCH_TURN_C
#undef CACHEWATCH_TURN_SET
#undef CACHEWATCH_TURN_SET_USAGE_AND_VERDICT
#undef CACHEWATCH_UPSERT_TURN_HEAD

inline constexpr const char* kInsertBreak = R"sql(
INSERT INTO prompt_cache_breaks (
  )sql" CACHEWATCH_BREAK_COLUMNS R"sql()
VALUES (
  :break_id, :agent, :session_id, :lane, :provider, :previous_request_id,
  :request_id, :previous_model, :model, :primary_reason, :reasons, :evidence,
  :previous_cache_read_tokens, :current_cache_read_tokens,
  :expected_reuse_tokens, :missed_tokens, :prompt_total_tokens,
  :cache_write_tokens, :changed_tool_names, :added_tool_names,
  :removed_tool_names, :reordered_tool_names, :schema_changed_tool_names,
  :changed_system_sections, :first_changed_tool_index,
  :first_changed_message_block, :blocks_since_last_write, :gap_seconds,
  :ttl_seconds, :ttl_source, :estimated_extra_cost_usd,
  :previous_request_time_us, :request_time_us, :provider_miss_reason,
  :provider_missed_tokens, :provider_agreement, :event)
ON CONFLICT (break_id) DO NOTHING)sql";

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_SQLITE_WRITE_STATEMENTS_H_
