-- PostgreSQL variant of tools_schema_changes.sql: the same question,
-- parameters, columns and rows (dashboards/tests/sql_both_stores_test.py
-- checks that), for a store on PostgreSQL (docs/FLEET.md). Parameters are
-- psql variables; an unset one takes its default.
--
-- Example:
--   psql -X --csv -d "$CACHEWATCH_PG" \
--     -f dashboards/sql/tools_schema_changes.pg.sql
\if :{?since_us} \else \set since_us '' \endif
\if :{?until_us} \else \set until_us '' \endif
\if :{?agent} \else \set agent '' \endif
\if :{?limit} \else \set limit '' \endif
SELECT t.value COLLATE "C" AS tool,
       COUNT(*) AS changes,
       SUM((b.primary_reason = 'tools_schema_changed')::int)
         AS as_primary_reason,
       COUNT(DISTINCT b.agent) AS agents,
       COUNT(DISTINCT b.agent || '/' || b.session_id) AS sessions,
       SUM(b.missed_tokens) AS tokens_lost_in_these_breaks,
       to_char(to_timestamp(round(MAX(b.request_time_us) / 1000.0) / 1000) AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS last_change
FROM prompt_cache_breaks AS b
CROSS JOIN LATERAL
  json_array_elements_text(b.schema_changed_tool_names::json) AS t(value)
WHERE b.schema_changed_tool_names <> '[]'
  AND b.request_time_us >= COALESCE(NULLIF(:'since_us', '')::bigint,
        (extract(epoch FROM now() - interval '1 day') * 1000000)::bigint)
  AND (NULLIF(:'until_us', '') IS NULL
       OR b.request_time_us < NULLIF(:'until_us', '')::bigint)
  AND (NULLIF(:'agent', '') IS NULL OR b.agent = NULLIF(:'agent', ''))
GROUP BY t.value COLLATE "C"
ORDER BY changes DESC, tool
LIMIT COALESCE(NULLIF(:'limit', '')::bigint, 20);
