// The SQL that writes the PostgreSQL store's rows: the semantics of the
// SQLite store's upserts (daemon/store/sqlite/write_statements.h) on
// partitioned tables. PostgreSQL cannot enforce (agent, session_id, lane,
// request_id) across partitions, so the turn statement first looks each turn
// up (among rows whose request time lies in [from_us, until_us): the
// partitions its records can be in), updates the row it finds and inserts
// one only when none exists; the lanes' advisory locks, taken at the start
// of the transaction, keep another daemon from inserting the same turn
// meanwhile.
//
// A turn is looked up by turns_by_key_hash (schema version 3) and by nothing
// else: the plans of these statements are generic (made once per connection
// and remade whenever a partition is analyzed, when it may hold a handful of
// rows), and a plan that looked a turn up through turns_by_time or
// turns_by_lane_time would read the whole day or lane for every turn. So the
// lookup's only indexable condition is the key hash: the key's columns are
// compared with IS NOT DISTINCT FROM (no index can use it), the request-time
// window is written as `(t >= from OR t IS NULL)` (run-time partition pruning
// still uses it; a plain index scan cannot), and the writer's session has
// sequential, bitmap and index-only scans off (postgres_store.cc), which
// leaves the hash index as the one path whatever the statistics.
//
// Parameters are positional; every one is cast to its column's type.
#ifndef CACHEWATCH_DAEMON_STORE_POSTGRES_PG_WRITE_STATEMENTS_H_
#define CACHEWATCH_DAEMON_STORE_POSTGRES_PG_WRITE_STATEMENTS_H_

#include "daemon/store/break_columns.h"
#include "daemon/store/turn_columns.h"

namespace cachewatch {

// The expression turns_by_key_hash indexes (pg_schema.cc, migration 3) over
// four text SQL expressions: over a turns row's key columns it is the
// indexed expression, over the values a row is looked up by it is what the
// index is searched for.
#define CACHEWATCH_PG_KEY_HASH(agent, session_id, lane, request_id) \
  "hashtextextended(" agent " || E'\\x1f' || " session_id           \
  " || E'\\x1f' || " lane " || E'\\x1f' || " request_id ", 0)"
// `column` equals `value` (no index can serve IS NOT DISTINCT FROM).
#define CACHEWATCH_PG_SAME(column, value) \
  "\n      AND " column " IS NOT DISTINCT FROM " value
// Row `t` of turns has the key (agent, session_id, lane, request_id) (text
// SQL expressions), found through turns_by_key_hash alone.
#define CACHEWATCH_PG_KEY_IS(t, agent, session_id, lane, request_id)          \
  CACHEWATCH_PG_KEY_HASH(t "agent", t "session_id", t "lane", t "request_id") \
  " = " CACHEWATCH_PG_KEY_HASH(agent, session_id, lane, request_id)           \
      CACHEWATCH_PG_SAME(t "agent", agent)                                    \
          CACHEWATCH_PG_SAME(t "session_id", session_id)                      \
              CACHEWATCH_PG_SAME(t "lane", lane)                              \
                  CACHEWATCH_PG_SAME(t "request_id", request_id)

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

// Retention: up to $1 claims of lanes that have no turn left, each deleted
// only if its write_seq is still the one read (a claim renewed meanwhile
// stays: the join is checked again against the renewed row).
inline constexpr const char* kPgDeleteIdleClaims = R"sql(
DELETE FROM lane_writers AS w
USING (
  SELECT l.agent, l.session_id, l.lane, l.write_seq FROM lane_writers AS l
  WHERE NOT EXISTS (
    SELECT 1 FROM turns AS t
    WHERE t.agent = l.agent AND t.session_id = l.session_id
      AND t.lane = l.lane)
  LIMIT $1) AS idle
WHERE w.agent = idle.agent AND w.session_id = idle.session_id
  AND w.lane = idle.lane AND w.write_seq = idle.write_seq)sql";

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

// The turn rows of a batch are written set-based, in one statement: one
// input row per turn of the batch, its records merged (the batch's first
// snapshot, first usage and first classification of the turn, a final
// verdict before a pending one), passed as arrays (one per column, element i
// of each is turn i) and unnested. has_snapshot, has_usage,
// has_classification: which records the turn brings; the columns of a
// missing one are NULL. Each turn is looked up among rows whose request time
// lies in [from_us, until_us); a row found takes each record the way the
// SQLite store's upserts do, in their order (snapshot, usage,
// classification): a retried snapshot or usage changes nothing, the
// snapshot's provider, model and request time win over the usage's (the row
// moves to the partition of the snapshot's request time), and only a turn
// not classified yet (no verdict, or 'pending') takes a verdict: a stored
// final verdict is never rewritten, whatever a retry or another daemon
// brings. A turn not found is inserted whole at new_time_us (the snapshot's
// request time, else the usage's response time, else the break's, else the
// daemon's clock). One row version per turn: a turn whose three records
// arrive in one batch is written once, not inserted and updated twice.
//
// The insert is a plain INSERT, without an ON CONFLICT arbiter (whose
// speculative insertion, a probe of turns_key and a speculative token per
// row, every new turn would pay): no insert can conflict. A conflict needs
// a row of the turn's key at new_time_us visible to the insert or being
// inserted by another transaction. new_time_us lies in [from_us, until_us)
// (a snapshot's or usage's own window contains its time; a classification
// alone is looked up whatever its time), so the lookup, in the statement's
// snapshot, sees any such row committed; a concurrent writer of the turn
// holds its lane's advisory lock (every writer of turns takes it first, in
// this daemon and any other) until its COMMIT, so it committed before this
// statement's snapshot was taken; and the merger gives one input row per
// turn. Should one happen anyway, turns_key still enforces the key: the
// unique violation (23505) fails the batch, which is reported, not acked.
#define CACHEWATCH_PG_S "(i.has_snapshot AND t.snapshot_received = 0)"
#define CACHEWATCH_PG_U "(i.has_usage AND t.usage_received = 0)"
#define CACHEWATCH_PG_C                              \
  "(i.has_classification AND (t.verdict IS NULL OR " \
  "(t.verdict = 'pending' AND i.verdict <> 'pending')))"
// column = value when `test` holds, else unchanged.
#define CACHEWATCH_PG_SET(test, column, value) \
#column " = CASE WHEN " test " THEN " value " ELSE t." #column " END"
#define CACHEWATCH_PG_SNAPSHOT(column) \
  CACHEWATCH_PG_SET(CACHEWATCH_PG_S, column, "i." #column) ",\n"
#define CACHEWATCH_PG_USAGE(column) \
  CACHEWATCH_PG_SET(CACHEWATCH_PG_U, column, "i." #column) ",\n"
#define CACHEWATCH_PG_CLASSIFICATION(column) \
  CACHEWATCH_PG_SET(CACHEWATCH_PG_C, column, "i." #column) ",\n"
// provider and model: the snapshot's, else the stored one, else the usage's.
#define CACHEWATCH_PG_SNAPSHOT_THEN_USAGE(column)                           \
#column " = CASE WHEN " CACHEWATCH_PG_U                                   \
          " THEN coalesce(CASE WHEN " CACHEWATCH_PG_S " THEN i.s_" #column  \
          " ELSE t." #column " END, i.u_" #column ") WHEN " CACHEWATCH_PG_S \
          " THEN i.s_" #column " ELSE t." #column " END,\n"

// The element types of kPgUpsertTurns' arrays $1..$44, a character each:
// t text, 8 bigint, 4 integer, b boolean, y bytea.
inline constexpr char kPgUpsertTurnsTypes[] =
    "tttt888bbb"       // Key, window, new_time_us, which records.
    "tt8ttt8t448tytt"  // The snapshot's.
    "tt88888888tt8"    // The usage's.
    "tttt88";          // The classification's.

inline constexpr const char* kPgUpsertTurns = R"sql(
WITH input AS (
  SELECT * FROM unnest(
    $1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
    $6::bigint[], $7::bigint[], $8::boolean[], $9::boolean[], $10::boolean[],
    $11::text[], $12::text[], $13::bigint[], $14::text[], $15::text[],
    $16::text[], $17::bigint[], $18::text[], $19::integer[], $20::integer[],
    $21::bigint[], $22::text[], $23::bytea[], $24::text[], $25::text[],
    $26::text[], $27::text[], $28::bigint[], $29::bigint[], $30::bigint[],
    $31::bigint[], $32::bigint[], $33::bigint[], $34::bigint[], $35::bigint[],
    $36::text[], $37::text[], $38::bigint[], $39::text[], $40::text[],
    $41::text[], $42::text[], $43::bigint[], $44::bigint[])
    WITH ORDINALITY AS u(
      agent, session_id, lane, request_id, from_us, until_us, new_time_us,
      has_snapshot, has_usage, has_classification,
      s_provider, s_model, s_request_time_us, system_hash, system_sections,
      tool_list_hash, tool_count, options_hash, cache_enabled,
      cache_automatic, cache_ttl_seconds, breakpoints, message_chain,
      expected_drop, tool_order_policy,
      u_provider, u_model, response_time_us, uncached_input_tokens,
      cache_read_tokens, cache_write_tokens, cache_write_5m_tokens,
      cache_write_1h_tokens, output_tokens, prompt_total_tokens,
      raw_usage_json, provider_miss_reason, provider_missed_tokens,
      c_expected_drop, verdict, primary_reason, break_id,
      expected_reuse_tokens, missed_tokens, ord)),
existing AS (
  SELECT i.ord, (
    SELECT t.request_time_us FROM turns AS t
    WHERE )sql" CACHEWATCH_PG_KEY_IS("t.", "i.agent", "i.session_id", "i.lane",
                                     "i.request_id") R"sql(
      AND (t.request_time_us >= i.from_us OR t.request_time_us IS NULL)
      AND (t.request_time_us < i.until_us OR t.request_time_us IS NULL)
    LIMIT 1) AS found_us
  FROM input AS i),
updated AS (
  UPDATE turns AS t SET
)sql" CACHEWATCH_PG_SNAPSHOT_THEN_USAGE(provider)
    CACHEWATCH_PG_SNAPSHOT_THEN_USAGE(model) CACHEWATCH_PG_SET(
        CACHEWATCH_PG_S, request_time_us,
        "i.s_request_time_us") ",\n" CACHEWATCH_PG_SET(CACHEWATCH_PG_S,
                                                       snapshot_received,
                                                       "1") ",\n"
    CACHEWATCH_PG_SNAPSHOT(system_hash) CACHEWATCH_PG_SNAPSHOT(system_sections)
        CACHEWATCH_PG_SNAPSHOT(tool_list_hash) CACHEWATCH_PG_SNAPSHOT(
            tool_count) CACHEWATCH_PG_SNAPSHOT(options_hash)
            CACHEWATCH_PG_SNAPSHOT(cache_enabled) CACHEWATCH_PG_SNAPSHOT(
                cache_automatic) CACHEWATCH_PG_SNAPSHOT(cache_ttl_seconds)
                CACHEWATCH_PG_SNAPSHOT(breakpoints) CACHEWATCH_PG_SNAPSHOT(
                    message_chain) CACHEWATCH_PG_SNAPSHOT(tool_order_policy)
    // expected_drop: the snapshot's, else the classification's.
    "expected_drop = CASE WHEN " CACHEWATCH_PG_C " THEN coalesce(CASE WHEN "
    CACHEWATCH_PG_S " THEN i.expected_drop ELSE t.expected_drop END, "
    "i.c_expected_drop) WHEN " CACHEWATCH_PG_S " THEN i.expected_drop ELSE "
    "t.expected_drop END,\n" CACHEWATCH_PG_SET(CACHEWATCH_PG_U, usage_received,
                                               "1") ",\n"
    CACHEWATCH_PG_USAGE(response_time_us) CACHEWATCH_PG_USAGE(
        uncached_input_tokens) CACHEWATCH_PG_USAGE(cache_read_tokens)
        CACHEWATCH_PG_USAGE(cache_write_tokens) CACHEWATCH_PG_USAGE(
            cache_write_5m_tokens) CACHEWATCH_PG_USAGE(cache_write_1h_tokens)
            CACHEWATCH_PG_USAGE(output_tokens) CACHEWATCH_PG_USAGE(
                prompt_total_tokens) CACHEWATCH_PG_USAGE(raw_usage_json)
                CACHEWATCH_PG_USAGE(provider_miss_reason) CACHEWATCH_PG_USAGE(
                    provider_missed_tokens) CACHEWATCH_PG_CLASSIFICATION(verdict)
                    CACHEWATCH_PG_CLASSIFICATION(primary_reason)
                        CACHEWATCH_PG_CLASSIFICATION(break_id)
                            CACHEWATCH_PG_CLASSIFICATION(expected_reuse_tokens)
                                CACHEWATCH_PG_SET(CACHEWATCH_PG_C,
                                                  missed_tokens,
                                                  "i.missed_tokens") R"sql(
  FROM input AS i JOIN existing AS e ON e.ord = i.ord
  WHERE e.found_us IS NOT NULL AND t.agent = i.agent
    AND t.session_id = i.session_id AND t.lane = i.lane
    AND t.request_id = i.request_id AND t.request_time_us = e.found_us
    AND ()sql" CACHEWATCH_PG_S " OR " CACHEWATCH_PG_U " OR " CACHEWATCH_PG_C
                                                   R"sql()
  RETURNING 1)
INSERT INTO turns (
  )sql" CACHEWATCH_TURN_INSERT_COLUMNS R"sql()
SELECT i.agent, i.session_id, i.lane, i.request_id,
  coalesce(i.s_provider, i.u_provider), coalesce(i.s_model, i.u_model),
  i.new_time_us, i.has_snapshot::integer, i.system_hash, i.system_sections,
  i.tool_list_hash, i.tool_count, i.options_hash, i.cache_enabled,
  i.cache_automatic, i.cache_ttl_seconds, i.breakpoints, i.message_chain,
  coalesce(i.expected_drop, i.c_expected_drop), i.tool_order_policy,
  i.response_time_us, i.has_usage::integer, i.uncached_input_tokens,
  i.cache_read_tokens, i.cache_write_tokens, i.cache_write_5m_tokens,
  i.cache_write_1h_tokens, i.output_tokens, i.prompt_total_tokens,
  i.raw_usage_json, i.provider_miss_reason, i.provider_missed_tokens,
  i.verdict, i.primary_reason, i.break_id, i.expected_reuse_tokens,
  i.missed_tokens, $45::bigint
FROM input AS i JOIN existing AS e ON e.ord = i.ord
WHERE e.found_us IS NULL)sql";

#undef CACHEWATCH_PG_S
#undef CACHEWATCH_PG_U
#undef CACHEWATCH_PG_C
#undef CACHEWATCH_PG_SET
#undef CACHEWATCH_PG_SNAPSHOT
#undef CACHEWATCH_PG_USAGE
#undef CACHEWATCH_PG_CLASSIFICATION
#undef CACHEWATCH_PG_SNAPSHOT_THEN_USAGE

// A break, after its turn's classification: only when the turn took it (the
// break of a turn that already had its verdict is not this turn's: the
// stored verdict stands, and no break row is added beside it).
inline constexpr const char* kPgInsertBreak = R"sql(
INSERT INTO prompt_cache_breaks (
  )sql" CACHEWATCH_BREAK_COLUMNS R"sql()
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
  WHERE )sql" CACHEWATCH_PG_KEY_IS("", "$2::text", "$3::text", "$4::text",
                                   "$7::text") R"sql(
    AND break_id = $1::text)
ON CONFLICT (break_id, request_time_us) DO NOTHING)sql";

#undef CACHEWATCH_PG_KEY_IS
#undef CACHEWATCH_PG_SAME
#undef CACHEWATCH_PG_KEY_HASH

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_POSTGRES_PG_WRITE_STATEMENTS_H_
