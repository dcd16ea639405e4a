-- PostgreSQL variant of top_reasons_per_agent.sql: the same question,
-- parameters, columns and rows (dashboards/tests/sql_both_stores_test.py
-- checks that), for a store on PostgreSQL (docs/FLEET.md). Parameters are
-- psql variables; an unset one takes its default.
--
-- Example:
--   psql -X --csv -v agent=claude-code -d "$CACHEWATCH_PG" \
--     -f dashboards/sql/top_reasons_per_agent.pg.sql
\if :{?since_us} \else \set since_us '' \endif
\if :{?until_us} \else \set until_us '' \endif
\if :{?agent} \else \set agent '' \endif
\if :{?top} \else \set top '' \endif
WITH windowed AS (
  SELECT agent, primary_reason, missed_tokens, estimated_extra_cost_usd,
         request_time_us
  FROM prompt_cache_breaks
  WHERE request_time_us >= COALESCE(NULLIF(:'since_us', '')::bigint,
          (extract(epoch FROM now() - interval '1 day') * 1000000)::bigint)
    AND (NULLIF(:'until_us', '') IS NULL
         OR request_time_us < NULLIF(:'until_us', '')::bigint)
    AND (NULLIF(:'agent', '') IS NULL OR agent = NULLIF(:'agent', ''))
),
per_reason AS (
  SELECT agent, primary_reason,
         COUNT(*) AS breaks,
         SUM(missed_tokens) AS tokens_lost,
         SUM(estimated_extra_cost_usd) AS cost,
         MIN(request_time_us) AS first_us,
         MAX(request_time_us) AS last_us
  FROM windowed
  GROUP BY agent, primary_reason
),
ranked AS (
  SELECT per_reason.*,
         ROW_NUMBER() OVER (PARTITION BY agent
                            ORDER BY breaks DESC, tokens_lost DESC,
                                     primary_reason) AS reason_rank,
         SUM(breaks) OVER (PARTITION BY agent) AS agent_breaks
  FROM per_reason
)
SELECT agent,
       reason_rank,
       primary_reason,
       breaks,
       ROUND(1.0 * breaks / agent_breaks, 4) AS share_of_agent_breaks,
       tokens_lost,
       CAST(ROUND(1.0 * tokens_lost / breaks) AS bigint) AS avg_tokens_lost,
       ROUND(cost::numeric, 4) AS estimated_extra_cost_usd,
       to_char(to_timestamp(round(first_us / 1000.0) / 1000) AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS first_break,
       to_char(to_timestamp(round(last_us / 1000.0) / 1000) AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS last_break
FROM ranked
WHERE reason_rank <= COALESCE(NULLIF(:'top', '')::bigint, 5)
ORDER BY agent, reason_rank;
