// The SQL that writes the PostgreSQL store's rows: the semantics of the
// SQLite store's upserts (daemon/store/write_statements.h) on partitioned
// tables. PostgreSQL cannot enforce (agent, session_id, lane, request_id)
// across partitions, so each turn statement first looks the turn up (among
// rows whose request time lies in [from_us, until_us): the partitions its
// records can be in), updates the row it finds and inserts one only when
// none exists; the lanes' advisory locks, taken at the start of the
// transaction, keep another daemon from inserting the same turn meanwhile.
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

// The turn rows of a batch are written set-based: one statement per record
// kind and batch, its records passed as arrays (one per column, element i of
// each is record i) and unnested. Within a statement a turn's first record
// counts (a retry in the same batch changes nothing; for verdicts, a final
// one before a pending one); each input row's turn is looked up among rows
// whose request time lies in [from_us, until_us), updated when found and
// inserted otherwise. Statements run snapshots, usages, then classifications:
// each sees the rows the previous ones wrote.
#define CACHEWATCH_PG_EXISTING                                             \
  "existing AS (SELECT i.ord, (SELECT t.request_time_us FROM turns AS t "  \
  "WHERE t.agent = i.agent AND t.session_id = i.session_id "               \
  "AND t.lane = i.lane AND t.request_id = i.request_id "                   \
  "AND t.request_time_us >= i.from_us AND t.request_time_us < i.until_us " \
  "LIMIT 1) AS found_us FROM input AS i) "
#define CACHEWATCH_PG_THIS_TURN                           \
  " FROM input AS i JOIN existing AS e ON e.ord = i.ord " \
  "WHERE e.found_us IS NOT NULL AND t.agent = i.agent "   \
  "AND t.session_id = i.session_id AND t.lane = i.lane "  \
  "AND t.request_id = i.request_id AND t.request_time_us = e.found_us "

// A retried snapshot changes nothing; the snapshot's provider, model and
// request time win over the usage's (the row moves to the partition of the
// snapshot's request time).
inline constexpr const char* kPgUpsertSnapshots = R"sql(
WITH input AS (
  SELECT DISTINCT ON (agent, session_id, lane, request_id) *
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
              $6::bigint[], $7::text[], $8::text[], $9::bigint[],
              $10::text[], $11::text[], $12::text[], $13::bigint[],
              $14::text[], $15::integer[], $16::integer[], $17::bigint[],
              $18::text[], $19::bytea[], $20::text[], $21::text[])
    WITH ORDINALITY AS u(agent, session_id, lane, request_id, from_us,
                         until_us, provider, model, request_time_us,
                         system_hash, system_sections, tool_list_hash,
                         tool_count, options_hash, cache_enabled,
                         cache_automatic, cache_ttl_seconds, breakpoints,
                         message_chain, expected_drop, tool_order_policy,
                         ord)
  ORDER BY agent, session_id, lane, request_id, ord),
)sql" CACHEWATCH_PG_EXISTING R"sql(,
updated AS (
  UPDATE turns AS t SET
    provider = i.provider, model = i.model,
    request_time_us = i.request_time_us, snapshot_received = 1,
    system_hash = i.system_hash, system_sections = i.system_sections,
    tool_list_hash = i.tool_list_hash, tool_count = i.tool_count,
    options_hash = i.options_hash, cache_enabled = i.cache_enabled,
    cache_automatic = i.cache_automatic,
    cache_ttl_seconds = i.cache_ttl_seconds, breakpoints = i.breakpoints,
    message_chain = i.message_chain, expected_drop = i.expected_drop,
    tool_order_policy = i.tool_order_policy)sql" CACHEWATCH_PG_THIS_TURN R"sql(
    AND t.snapshot_received = 0
  RETURNING 1)
INSERT INTO turns (
  agent, session_id, lane, request_id, provider, model, request_time_us,
  snapshot_received, system_hash, system_sections, tool_list_hash, tool_count,
  options_hash, cache_enabled, cache_automatic, cache_ttl_seconds, breakpoints,
  message_chain, expected_drop, tool_order_policy, received_at_us)
SELECT i.agent, i.session_id, i.lane, i.request_id, i.provider, i.model,
  i.request_time_us, 1, i.system_hash, i.system_sections, i.tool_list_hash,
  i.tool_count, i.options_hash, i.cache_enabled, i.cache_automatic,
  i.cache_ttl_seconds, i.breakpoints, i.message_chain, i.expected_drop,
  i.tool_order_policy, $22::bigint
FROM input AS i JOIN existing AS e ON e.ord = i.ord
WHERE e.found_us IS NULL
ON CONFLICT (agent, session_id, lane, request_id, request_time_us)
  DO NOTHING)sql";

// A retried usage changes nothing. response_time_us: NULL when absent;
// new_time_us: the request time of a new row (the response time, else the
// daemon's clock).
inline constexpr const char* kPgUpsertUsages = R"sql(
WITH input AS (
  SELECT DISTINCT ON (agent, session_id, lane, request_id) *
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
              $6::bigint[], $7::text[], $8::text[], $9::bigint[],
              $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[],
              $14::bigint[], $15::bigint[], $16::bigint[], $17::bigint[],
              $18::text[], $19::text[], $20::bigint[])
    WITH ORDINALITY AS u(agent, session_id, lane, request_id, from_us,
                         until_us, provider, model, response_time_us,
                         new_time_us, uncached_input_tokens,
                         cache_read_tokens, cache_write_tokens,
                         cache_write_5m_tokens, cache_write_1h_tokens,
                         output_tokens, prompt_total_tokens, raw_usage_json,
                         provider_miss_reason, provider_missed_tokens, ord)
  ORDER BY agent, session_id, lane, request_id, ord),
)sql" CACHEWATCH_PG_EXISTING R"sql(,
updated AS (
  UPDATE turns AS t SET
    provider = coalesce(t.provider, i.provider),
    model = coalesce(t.model, i.model),
    response_time_us = i.response_time_us, usage_received = 1,
    uncached_input_tokens = i.uncached_input_tokens,
    cache_read_tokens = i.cache_read_tokens,
    cache_write_tokens = i.cache_write_tokens,
    cache_write_5m_tokens = i.cache_write_5m_tokens,
    cache_write_1h_tokens = i.cache_write_1h_tokens,
    output_tokens = i.output_tokens,
    prompt_total_tokens = i.prompt_total_tokens,
    raw_usage_json = i.raw_usage_json,
    provider_miss_reason = i.provider_miss_reason,
    provider_missed_tokens = i.provider_missed_tokens)sql" CACHEWATCH_PG_THIS_TURN
                                               R"sql(
    AND t.usage_received = 0
  RETURNING 1)
INSERT INTO turns (
  agent, session_id, lane, request_id, provider, model, request_time_us,
  response_time_us, usage_received, uncached_input_tokens, cache_read_tokens,
  cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens,
  output_tokens, prompt_total_tokens, raw_usage_json, provider_miss_reason,
  provider_missed_tokens, received_at_us)
SELECT i.agent, i.session_id, i.lane, i.request_id, i.provider, i.model,
  i.new_time_us, i.response_time_us, 1, i.uncached_input_tokens,
  i.cache_read_tokens, i.cache_write_tokens, i.cache_write_5m_tokens,
  i.cache_write_1h_tokens, i.output_tokens, i.prompt_total_tokens,
  i.raw_usage_json, i.provider_miss_reason, i.provider_missed_tokens,
  $21::bigint
FROM input AS i JOIN existing AS e ON e.ord = i.ord
WHERE e.found_us IS NULL
ON CONFLICT (agent, session_id, lane, request_id, request_time_us)
  DO NOTHING)sql";

// Only a turn not classified yet (no verdict, or 'pending') takes a verdict:
// a stored final verdict is never rewritten, whatever a retry or another
// daemon brings. A classification's turn is looked up whatever its time (a
// row made by a record without a time of its own is at the daemon's clock);
// new_time_us: the request time of a new row (the break's, else the
// daemon's clock).
inline constexpr const char* kPgUpsertClassifications = R"sql(
WITH input AS (
  SELECT DISTINCT ON (agent, session_id, lane, request_id) *
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
              $6::bigint[], $7::bigint[], $8::text[], $9::text[], $10::text[],
              $11::text[], $12::bigint[], $13::bigint[])
    WITH ORDINALITY AS u(agent, session_id, lane, request_id, from_us,
                         until_us, new_time_us, expected_drop, verdict,
                         primary_reason, break_id, expected_reuse_tokens,
                         missed_tokens, ord)
  ORDER BY agent, session_id, lane, request_id, verdict = 'pending', ord),
)sql" CACHEWATCH_PG_EXISTING R"sql(,
updated AS (
  UPDATE turns AS t SET
    expected_drop = coalesce(t.expected_drop, i.expected_drop),
    verdict = i.verdict, primary_reason = i.primary_reason,
    break_id = i.break_id, expected_reuse_tokens = i.expected_reuse_tokens,
    missed_tokens = i.missed_tokens)sql" CACHEWATCH_PG_THIS_TURN R"sql(
    AND (t.verdict IS NULL OR (t.verdict = 'pending' AND i.verdict <> 'pending'))
  RETURNING 1)
INSERT INTO turns (
  agent, session_id, lane, request_id, request_time_us, expected_drop,
  verdict, primary_reason, break_id, expected_reuse_tokens, missed_tokens,
  received_at_us)
SELECT i.agent, i.session_id, i.lane, i.request_id, i.new_time_us,
  i.expected_drop, i.verdict, i.primary_reason, i.break_id,
  i.expected_reuse_tokens, i.missed_tokens, $14::bigint
FROM input AS i JOIN existing AS e ON e.ord = i.ord
WHERE e.found_us IS NULL
ON CONFLICT (agent, session_id, lane, request_id, request_time_us)
  DO NOTHING)sql";

#undef CACHEWATCH_PG_EXISTING
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
