// The SQL that writes the PostgreSQL store's rows: the semantics of the
// SQLite store's upserts (daemon/store/sqlite/write_statements.h) on
// partitioned tables. PostgreSQL cannot enforce (agent, session_id, lane,
// request_id) across partitions, so a batch first looks each of its turns
// up (kPgFindTurns, among rows whose request time lies in [from_us,
// until_us): the partitions its records can be in), then inserts those not
// found (kPgCopyTurns) and updates those found (kPgUpdateTurns); the lanes'
// advisory locks, taken at the start of the transaction, keep another
// daemon from inserting the same turn meanwhile.
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

// A batch's turns are written in three steps, each turn's records merged
// first into one row (the batch's first snapshot, first usage and first
// classification of the turn, a final verdict before a pending one):
// kPgFindTurns looks every turn up, kPgCopyTurns inserts those not found and
// kPgUpdateTurns updates those found. A turn is looked up among rows whose
// request time lies in [from_us, until_us): the union of the windows of its
// snapshot and usage in the batch (a day either side of their times), or
// every time for a classification alone. One row version per turn: a turn
// whose three records arrive in one batch is written once, not inserted and
// then updated.
//
// No insert can conflict. A conflict needs a row of the turn's key at its
// new request time visible to the COPY or being inserted by another
// transaction. That time lies in the turn's window, so kPgFindTurns would
// have found any such row committed before its snapshot; a concurrent
// writer of the turn holds its lane's advisory lock (kPgLockLanes: every
// writer of turns takes it first, in this daemon and any other) until its
// COMMIT, and this batch took the same lock before kPgFindTurns, so that
// writer committed before the lookup's snapshot; and the merger gives one
// row per turn. Should one happen anyway, turns_key still enforces the key:
// the unique violation (23505) fails the batch, which is reported, not
// acked.

// The request time of the stored row of the turn in row `i` (a table alias
// and a dot) with columns agent, session_id, lane, request_id, from_us and
// until_us; NULL if there is none. A scalar subquery, so that the planner
// probes turns_by_key_hash once per turn instead of joining (a join may
// hash whole partitions).
#define CACHEWATCH_PG_FOUND_US(i)                              \
  "(\n    SELECT t.request_time_us FROM turns AS t\n    "      \
  "WHERE " CACHEWATCH_PG_KEY_IS(                               \
      "t.", i "agent", i "session_id", i "lane",               \
      i "request_id") "\n      AND (t.request_time_us >= " i   \
                      "from_us OR "                            \
                      "t.request_time_us IS NULL)\n      AND " \
                      "(t.request_time_us < " i                \
                      "until_us OR t.request_time_us IS NULL)\n    LIMIT 1)"

// The turns of a batch that have a row: the 1-based position (ord) of each
// and its row's request time (found_us). $1..$4: text[] of the turns' keys
// (agent, session_id, lane, request_id); $5, $6: bigint[] of their windows
// (from_us, until_us). OFFSET 0 keeps the lookup from being pulled up into
// the outer query, where it would run twice (filter and select list).
inline constexpr const char* kPgFindTurns = R"sql(
SELECT ord, found_us FROM (
  SELECT u.ord, )sql" CACHEWATCH_PG_FOUND_US("u.") R"sql( AS found_us
  FROM unnest(
      $1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
      $6::bigint[])
    WITH ORDINALITY AS u(agent, session_id, lane, request_id, from_us,
                         until_us, ord)
  OFFSET 0) AS f
WHERE found_us IS NOT NULL)sql";

// The element types of kPgFindTurns' arrays, a character each: t text,
// 8 bigint, 4 integer, b boolean, y bytea (pg_binary_rows.h).
inline constexpr char kPgFindTurnsTypes[] = "tttt88";

// The turns not found, in COPY's binary format (pg_binary_rows.h), a row
// each: inserted whole at the snapshot's request time, else the usage's
// response time, else the break's, else the daemon's clock; provider and
// model the snapshot's, else the usage's; expected_drop the snapshot's, else
// the classification's. COPY inserts rows many to a page (the heap's
// multi-insert) where an INSERT ... SELECT inserts them one at a time.
inline constexpr const char* kPgCopyTurns =
    "COPY turns (" CACHEWATCH_TURN_INSERT_COLUMNS
    ") FROM STDIN (FORMAT binary)";

// The types of kPgCopyTurns' columns (as kPgFindTurnsTypes).
inline constexpr char kPgCopyTurnsTypes[] =
    "tttttt84"      // Key, provider, model, request time, snapshot_received.
    "ttt8t448tytt"  // The snapshot's (expected_drop: else the verdict's).
    "848888888tt8"  // response_time_us, usage_received, the usage's.
    "ttt888";       // The classification's, received_at_us.

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

// The turns kPgFindTurns found, updated set-based in one statement: one
// input row per turn, passed as arrays (one per column, element i of each
// is turn i) and unnested. found_us: the request time of the turn's row
// (its key and that time are turns_key: one row). has_snapshot, has_usage,
// has_classification: which records the turn brings; the columns of a
// missing one are NULL. The row takes each record the way the SQLite
// store's upserts do, in their order (snapshot, usage, classification): a
// retried snapshot or usage changes nothing, the snapshot's provider, model
// and request time win over the usage's (the row moves to the partition of
// the snapshot's request time), and only a turn not classified yet (no
// verdict, or 'pending') takes a verdict: a stored final verdict is never
// rewritten, whatever a retry or another daemon brings.
//
// The row stays as found until COMMIT: the lane's advisory lock keeps
// other writers of turns out. Retention deletes old rows under no lane
// lock; a row it deletes between the lookup and the update is not updated,
// as a row it deletes just after the COMMIT would be gone too.
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

// The element types of kPgUpdateTurns' arrays $1..$42 (as
// kPgFindTurnsTypes).
inline constexpr char kPgUpdateTurnsTypes[] =
    "tttt8bbb"         // Key, found_us, which records.
    "tt8ttt8t448tytt"  // The snapshot's.
    "tt88888888tt8"    // The usage's.
    "tttt88";          // The classification's.

inline constexpr const char* kPgUpdateTurns = R"sql(
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
FROM unnest(
    $1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
    $6::boolean[], $7::boolean[], $8::boolean[],
    $9::text[], $10::text[], $11::bigint[], $12::text[], $13::text[],
    $14::text[], $15::bigint[], $16::text[], $17::integer[], $18::integer[],
    $19::bigint[], $20::text[], $21::bytea[], $22::text[], $23::text[],
    $24::text[], $25::text[], $26::bigint[], $27::bigint[], $28::bigint[],
    $29::bigint[], $30::bigint[], $31::bigint[], $32::bigint[], $33::bigint[],
    $34::text[], $35::text[], $36::bigint[], $37::text[], $38::text[],
    $39::text[], $40::text[], $41::bigint[], $42::bigint[])
  AS i(
    agent, session_id, lane, request_id, found_us,
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
    expected_reuse_tokens, missed_tokens)
WHERE t.agent = i.agent AND t.session_id = i.session_id AND t.lane = i.lane
  AND t.request_id = i.request_id AND t.request_time_us = i.found_us
  AND ()sql" CACHEWATCH_PG_S " OR " CACHEWATCH_PG_U " OR " CACHEWATCH_PG_C ")";

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

#undef CACHEWATCH_PG_FOUND_US
#undef CACHEWATCH_PG_KEY_IS
#undef CACHEWATCH_PG_SAME
#undef CACHEWATCH_PG_KEY_HASH

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_POSTGRES_PG_WRITE_STATEMENTS_H_
