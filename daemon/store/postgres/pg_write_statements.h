// The SQL that writes the PostgreSQL store's rows: the semantics of the
// SQLite store's upserts (daemon/store/write_statements.h) on partitioned
// tables. PostgreSQL cannot enforce (agent, session_id, lane, request_id)
// across partitions, so each turn statement first looks the turn up (among
// rows whose request time lies in [$5, $6): the partitions its records can
// be in), updates the row it finds and inserts one only when none exists;
// the lane's advisory lock, taken at the start of the transaction, keeps
// another daemon from inserting the same turn meanwhile.
//
// Parameters are positional; every one is cast to its column's type.
#ifndef CACHEWATCH_DAEMON_STORE_POSTGRES_PG_WRITE_STATEMENTS_H_
#define CACHEWATCH_DAEMON_STORE_POSTGRES_PG_WRITE_STATEMENTS_H_

namespace cachewatch {

// The lanes' advisory locks, always taken in the same order (no deadlock
// between two daemons' batches). $1: bigint[] of lane hashes.
inline constexpr const char* kPgLockLanes = R"sql(
SELECT count(pg_advisory_xact_lock(k))
FROM (SELECT k FROM unnest($1::bigint[]) AS k ORDER BY k) AS ordered)sql";

// Claims the batch's lanes for this daemon (cachewatch_claim_lanes, schema
// version 2): fails with SQLSTATE CW001 naming the 1-based positions of the
// lanes another daemon wrote after write_seq $5[i] (NULL: not checked).
// $1: this daemon's writer id; $2..$4: the lanes' keys.
inline constexpr const char* kPgClaimLanes = R"sql(
SELECT cachewatch_claim_lanes($1::text, $2::text[], $3::text[], $4::text[],
                              $5::bigint[]))sql";

// A lane's last write, as of a lane lookup's snapshot.
inline constexpr const char* kPgLaneWriteSeq = R"sql(
SELECT write_seq FROM lane_writers
WHERE agent = $1::text AND session_id = $2::text AND lane = $3::text)sql";

// A tool list and its entries, once per list hash. $3, $4: text[] of the
// tools' names and schema hashes, in order.
inline constexpr const char* kPgInsertToolList = R"sql(
WITH inserted AS (
  INSERT INTO tool_lists (list_hash, tool_count)
  VALUES ($1::text, $2::bigint)
  ON CONFLICT (list_hash) DO NOTHING
  RETURNING list_hash)
INSERT INTO tool_list_entries (list_hash, position, name, schema_hash)
SELECT inserted.list_hash, e.position - 1, e.name, e.schema_hash
FROM inserted,
  unnest($3::text[], $4::text[]) WITH ORDINALITY AS e(name, schema_hash,
                                                        position))sql";

#define CACHEWATCH_PG_FIND_TURN                                           \
  "WITH existing AS (SELECT request_time_us FROM turns "                  \
  "WHERE agent = $1::text AND session_id = $2::text AND lane = $3::text " \
  "AND request_id = $4::text AND request_time_us >= $5::bigint "          \
  "AND request_time_us < $6::bigint LIMIT 1) "
#define CACHEWATCH_PG_THIS_TURN                                            \
  " WHERE agent = $1::text AND session_id = $2::text AND lane = $3::text " \
  "AND request_id = $4::text "                                             \
  "AND request_time_us = (SELECT request_time_us FROM existing) "

// A retried snapshot changes nothing; the snapshot's provider, model and
// request time win over the usage's (the row moves to the partition of the
// snapshot's request time).
inline constexpr const char* kPgUpsertSnapshot = CACHEWATCH_PG_FIND_TURN R"sql(,
updated AS (
  UPDATE turns SET
    provider = $7::text, model = $8::text, request_time_us = $9::bigint,
    snapshot_received = 1, system_hash = $10::text,
    system_sections = $11::text, tool_list_hash = $12::text,
    tool_count = $13::bigint, options_hash = $14::text,
    cache_enabled = $15::integer, cache_automatic = $16::integer,
    cache_ttl_seconds = $17::bigint, breakpoints = $18::text,
    message_chain = $19::bytea, expected_drop = $20::text,
    tool_order_policy = $21::text)sql" CACHEWATCH_PG_THIS_TURN R"sql(
    AND snapshot_received = 0
  RETURNING 1)
INSERT INTO turns (
  agent, session_id, lane, request_id, provider, model, request_time_us,
  snapshot_received, system_hash, system_sections, tool_list_hash, tool_count,
  options_hash, cache_enabled, cache_automatic, cache_ttl_seconds, breakpoints,
  message_chain, expected_drop, tool_order_policy, received_at_us)
SELECT $1::text, $2::text, $3::text, $4::text, $7::text, $8::text,
  $9::bigint, 1, $10::text, $11::text, $12::text, $13::bigint, $14::text,
  $15::integer, $16::integer, $17::bigint, $18::text, $19::bytea, $20::text,
  $21::text, $22::bigint
WHERE NOT EXISTS (SELECT 1 FROM existing)
ON CONFLICT (agent, session_id, lane, request_id, request_time_us)
  DO NOTHING)sql";

// A retried usage changes nothing. $9: the response time (NULL when
// absent); $10: the request time of a new row (the response time, else the
// daemon's clock).
inline constexpr const char* kPgUpsertUsage = CACHEWATCH_PG_FIND_TURN R"sql(,
updated AS (
  UPDATE turns SET
    provider = coalesce(provider, $7::text),
    model = coalesce(model, $8::text),
    response_time_us = $9::bigint, usage_received = 1,
    uncached_input_tokens = $11::bigint, cache_read_tokens = $12::bigint,
    cache_write_tokens = $13::bigint, cache_write_5m_tokens = $14::bigint,
    cache_write_1h_tokens = $15::bigint, output_tokens = $16::bigint,
    prompt_total_tokens = $17::bigint, raw_usage_json = $18::text,
    provider_miss_reason = $19::text,
    provider_missed_tokens = $20::bigint)sql" CACHEWATCH_PG_THIS_TURN R"sql(
    AND usage_received = 0
  RETURNING 1)
INSERT INTO turns (
  agent, session_id, lane, request_id, provider, model, request_time_us,
  response_time_us, usage_received, uncached_input_tokens, cache_read_tokens,
  cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens,
  output_tokens, prompt_total_tokens, raw_usage_json, provider_miss_reason,
  provider_missed_tokens, received_at_us)
SELECT $1::text, $2::text, $3::text, $4::text, $7::text, $8::text,
  $10::bigint, $9::bigint, 1, $11::bigint, $12::bigint, $13::bigint,
  $14::bigint, $15::bigint, $16::bigint, $17::bigint, $18::text, $19::text,
  $20::bigint, $21::bigint
WHERE NOT EXISTS (SELECT 1 FROM existing)
ON CONFLICT (agent, session_id, lane, request_id, request_time_us)
  DO NOTHING)sql";

// Only a turn not classified yet (no verdict, or 'pending') takes a verdict:
// a stored final verdict is never rewritten, whatever a retry or another
// daemon brings. $7: the request time of a new row (the break's, else the
// daemon's clock).
inline constexpr const char* kPgUpsertClassification =
    CACHEWATCH_PG_FIND_TURN R"sql(,
updated AS (
  UPDATE turns SET
    expected_drop = coalesce(expected_drop, $8::text),
    verdict = $9::text, primary_reason = $10::text, break_id = $11::text,
    expected_reuse_tokens = $12::bigint,
    missed_tokens = $13::bigint)sql" CACHEWATCH_PG_THIS_TURN R"sql(
    AND (verdict IS NULL OR (verdict = 'pending' AND $9::text <> 'pending'))
  RETURNING 1)
INSERT INTO turns (
  agent, session_id, lane, request_id, request_time_us, expected_drop,
  verdict, primary_reason, break_id, expected_reuse_tokens, missed_tokens,
  received_at_us)
SELECT $1::text, $2::text, $3::text, $4::text, $7::bigint, $8::text,
  $9::text, $10::text, $11::text, $12::bigint, $13::bigint, $14::bigint
WHERE NOT EXISTS (SELECT 1 FROM existing)
ON CONFLICT (agent, session_id, lane, request_id, request_time_us)
  DO NOTHING)sql";

#undef CACHEWATCH_PG_FIND_TURN
#undef CACHEWATCH_PG_THIS_TURN

// A break, after its turn's classification: only when the turn took it (the
// break of a turn that already had its verdict is not this turn's: the
// stored verdict stands, and no break row is added beside it).
inline constexpr const char* kPgInsertBreak = R"sql(
INSERT INTO prompt_cache_breaks (
  break_id, agent, session_id, lane, provider, previous_request_id,
  request_id, previous_model, model, primary_reason, reasons, evidence,
  previous_cache_read_tokens, current_cache_read_tokens,
  expected_reuse_tokens, missed_tokens, prompt_total_tokens,
  cache_write_tokens, changed_tool_names, added_tool_names,
  removed_tool_names, reordered_tool_names, schema_changed_tool_names,
  changed_system_sections, first_changed_tool_index,
  first_changed_message_block, blocks_since_last_write, gap_seconds,
  ttl_seconds, ttl_source, estimated_extra_cost_usd,
  previous_request_time_us, request_time_us, provider_miss_reason,
  provider_missed_tokens, provider_agreement, event)
SELECT
  $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text,
  $8::text, $9::text, $10::text, $11::text, $12::text, $13::bigint,
  $14::bigint, $15::bigint, $16::bigint, $17::bigint, $18::bigint, $19::text,
  $20::text, $21::text, $22::text, $23::text, $24::text, $25::bigint,
  $26::bigint, $27::bigint, $28::double precision, $29::bigint, $30::text,
  $31::double precision, $32::bigint, $33::bigint, $34::text, $35::bigint,
  $36::text, $37::bytea
WHERE EXISTS (
  SELECT 1 FROM turns
  WHERE agent = $2::text AND session_id = $3::text AND lane = $4::text
    AND request_id = $7::text AND break_id = $1::text)
ON CONFLICT (break_id, request_time_us) DO NOTHING)sql";

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_POSTGRES_PG_WRITE_STATEMENTS_H_
