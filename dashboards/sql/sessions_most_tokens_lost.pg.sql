-- PostgreSQL variant of sessions_most_tokens_lost.sql: the same question,
-- parameters, columns and rows (dashboards/tests/sql_both_stores_test.py
-- checks that), for a store on PostgreSQL (docs/FLEET.md). Parameters are
-- psql variables; an unset one takes its default.
--
-- Example:
--   psql -X --csv -v limit=10 -d "$CACHEWATCH_PG" \
--     -f dashboards/sql/sessions_most_tokens_lost.pg.sql
\if :{?since_us} \else \set since_us '' \endif
\if :{?until_us} \else \set until_us '' \endif
\if :{?agent} \else \set agent '' \endif
\if :{?limit} \else \set limit '' \endif
WITH per_session AS (
  SELECT agent, session_id,
         COUNT(DISTINCT lane) AS lanes,
         COUNT(*) AS breaks,
         SUM(missed_tokens) AS tokens_lost,
         SUM(estimated_extra_cost_usd) AS cost,
         MIN(request_time_us) AS first_us,
         MAX(request_time_us) AS last_us
  FROM prompt_cache_breaks
  WHERE request_time_us >= COALESCE(NULLIF(:'since_us', '')::bigint,
          (extract(epoch FROM now() - interval '1 day') * 1000000)::bigint)
    AND (NULLIF(:'until_us', '') IS NULL
         OR request_time_us < NULLIF(:'until_us', '')::bigint)
    AND (NULLIF(:'agent', '') IS NULL OR agent = NULLIF(:'agent', ''))
  GROUP BY agent, session_id
  ORDER BY tokens_lost DESC, agent, session_id
  LIMIT COALESCE(NULLIF(:'limit', '')::bigint, 20)
),
per_reason AS (
  SELECT b.agent, b.session_id, b.primary_reason,
         SUM(b.missed_tokens) AS tokens_lost,
         ROW_NUMBER() OVER (PARTITION BY b.agent, b.session_id
                            ORDER BY SUM(b.missed_tokens) DESC,
                                     b.primary_reason) AS reason_rank
  FROM per_session s
  JOIN prompt_cache_breaks b
    ON b.agent = s.agent AND b.session_id = s.session_id
  WHERE b.request_time_us >= COALESCE(NULLIF(:'since_us', '')::bigint,
          (extract(epoch FROM now() - interval '1 day') * 1000000)::bigint)
    AND (NULLIF(:'until_us', '') IS NULL
         OR b.request_time_us < NULLIF(:'until_us', '')::bigint)
  GROUP BY b.agent, b.session_id, b.primary_reason
),
session_turns AS (
  SELECT t.agent, t.session_id,
         COUNT(*) AS turns,
         SUM(t.cache_read_tokens) AS read_tokens,
         SUM(t.prompt_total_tokens) AS prompt_tokens
  FROM per_session s
  JOIN turns t ON t.agent = s.agent AND t.session_id = s.session_id
  WHERE t.verdict IS NOT NULL AND t.verdict <> 'pending'
    AND t.request_time_us >= COALESCE(NULLIF(:'since_us', '')::bigint,
          (extract(epoch FROM now() - interval '1 day') * 1000000)::bigint)
    AND (NULLIF(:'until_us', '') IS NULL
         OR t.request_time_us < NULLIF(:'until_us', '')::bigint)
  GROUP BY t.agent, t.session_id
)
SELECT s.agent,
       s.session_id,
       s.lanes,
       s.breaks,
       s.tokens_lost,
       ROUND(s.cost::numeric, 4) AS estimated_extra_cost_usd,
       r.primary_reason AS top_reason,
       r.tokens_lost AS top_reason_tokens_lost,
       COALESCE(st.turns, 0) AS turns,
       ROUND(1.0 * st.read_tokens / NULLIF(st.prompt_tokens, 0), 4) AS hit_ratio,
       to_char(to_timestamp(round(s.first_us / 1000.0) / 1000) AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS first_break,
       to_char(to_timestamp(round(s.last_us / 1000.0) / 1000) AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS last_break
FROM per_session s
JOIN per_reason r
  ON r.agent = s.agent AND r.session_id = s.session_id AND r.reason_rank = 1
LEFT JOIN session_turns st
  ON st.agent = s.agent AND st.session_id = s.session_id
ORDER BY s.tokens_lost DESC, s.agent, s.session_id;
