-- PostgreSQL variant of lane_story.sql: the same question, parameters,
-- columns and rows (dashboards/tests/sql_both_stores_test.py checks that),
-- for a store on PostgreSQL (docs/FLEET.md). Parameters are psql variables;
-- an unset one takes its default (:break_id is required).
--
-- Example:
--   psql -X --csv -v break_id=b-… -d "$CACHEWATCH_PG" \
--     -f dashboards/sql/lane_story.pg.sql
\if :{?break_id} \else \set break_id '' \endif
\if :{?turns} \else \set turns '' \endif
\if :{?minutes} \else \set minutes '' \endif
WITH brk AS (
  SELECT agent, session_id, lane, request_id
  FROM prompt_cache_breaks
  WHERE break_id = :'break_id'
),
keyed AS (
  SELECT t.*,
         json_build_array(
           t.cache_enabled, t.cache_automatic, t.cache_ttl_seconds,
           (SELECT json_agg(bp.value)
            FROM json_array_elements(t.breakpoints::json) AS bp(value)
            WHERE bp.value->>'segment' <> 'messages'))::text AS cache_key
  FROM turns AS t
  JOIN brk AS b
    ON t.agent = b.agent AND t.session_id = b.session_id AND t.lane = b.lane
),
lane_turns AS (
  SELECT k.*,
         ROW_NUMBER() OVER w AS seq,
         LAG(k.request_time_us) OVER w AS prev_time_us,
         LAG(k.model) OVER w AS prev_model,
         LAG(k.tool_list_hash) OVER w AS prev_tool_list_hash,
         LAG(k.system_hash) OVER w AS prev_system_hash,
         LAG(k.options_hash) OVER w AS prev_options_hash,
         LAG(k.cache_key) OVER w AS prev_cache_key
  FROM keyed AS k
  WINDOW w AS (ORDER BY k.request_time_us, k.id)
),
anchor AS (
  SELECT lt.seq, lt.request_time_us
  FROM lane_turns AS lt JOIN brk AS b ON lt.request_id = b.request_id
)
SELECT lt.seq - a.seq AS turn_offset,
       to_char(to_timestamp(round(lt.request_time_us / 1000.0) / 1000) AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS request_time,
       ROUND((lt.request_time_us - lt.prev_time_us) / 1e6, 1) AS gap_s,
       lt.request_id,
       lt.model,
       lt.tool_count,
       CASE WHEN lt.seq = 1 THEN NULL ELSE trim(
         CASE WHEN lt.model IS DISTINCT FROM lt.prev_model
              THEN 'model ' ELSE '' END ||
         CASE WHEN lt.tool_list_hash IS DISTINCT FROM lt.prev_tool_list_hash
              THEN 'tools ' ELSE '' END ||
         CASE WHEN lt.system_hash IS DISTINCT FROM lt.prev_system_hash
              THEN 'system ' ELSE '' END ||
         CASE WHEN lt.options_hash IS DISTINCT FROM lt.prev_options_hash
              THEN 'options ' ELSE '' END ||
         CASE WHEN lt.cache_key IS DISTINCT FROM lt.prev_cache_key
              THEN 'cache_control' ELSE '' END)
       END AS changed,
       lt.expected_drop,
       lt.prompt_total_tokens,
       lt.cache_read_tokens,
       lt.cache_write_tokens,
       ROUND(1.0 * lt.cache_read_tokens / NULLIF(lt.prompt_total_tokens, 0), 4)
         AS hit_ratio,
       lt.verdict,
       lt.primary_reason,
       lt.missed_tokens,
       lt.break_id,
       (lt.seq = a.seq)::int AS is_this_break
FROM lane_turns AS lt, anchor AS a
WHERE abs(lt.seq - a.seq) <= COALESCE(NULLIF(:'turns', '')::bigint, 5)
   OR abs(lt.request_time_us - a.request_time_us)
        <= COALESCE(NULLIF(:'minutes', '')::bigint, 30) * 60000000
ORDER BY lt.seq;
