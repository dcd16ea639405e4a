-- PostgreSQL variant of order_flips_by_mcp_server.sql: the same question,
-- parameters, columns and rows (dashboards/tests/sql_both_stores_test.py
-- checks that), for a store on PostgreSQL (docs/FLEET.md). Parameters are
-- psql variables; an unset one takes its default.
--
-- Example:
--   psql -X --csv -d "$CACHEWATCH_PG" \
--     -f dashboards/sql/order_flips_by_mcp_server.pg.sql
\if :{?since_us} \else \set since_us '' \endif
\if :{?until_us} \else \set until_us '' \endif
\if :{?agent} \else \set agent '' \endif
WITH moved AS (
  SELECT b.break_id AS break_row, b.primary_reason, b.missed_tokens,
         b.request_time_us, t.value COLLATE "C" AS tool
  FROM prompt_cache_breaks AS b
  CROSS JOIN LATERAL
    json_array_elements_text(b.reordered_tool_names::json) AS t(value)
  WHERE b.reordered_tool_names <> '[]'
    AND b.request_time_us >= COALESCE(NULLIF(:'since_us', '')::bigint,
          (extract(epoch FROM now() - interval '1 day') * 1000000)::bigint)
    AND (NULLIF(:'until_us', '') IS NULL
         OR b.request_time_us < NULLIF(:'until_us', '')::bigint)
    AND (NULLIF(:'agent', '') IS NULL OR b.agent = NULLIF(:'agent', ''))
),
tool_servers AS (
  SELECT tool,
         CASE
           WHEN tool LIKE 'mcp\_\_%' ESCAPE '\'
                AND strpos(substr(tool, 6), '__') > 1
             THEN substr(tool, 6, strpos(substr(tool, 6), '__') - 1)
           ELSE '(builtin)'
         END AS mcp_server
  FROM (SELECT DISTINCT tool FROM moved) AS distinct_tools
),
per_break AS (
  SELECT s.mcp_server, m.break_row, m.primary_reason, m.missed_tokens,
         m.request_time_us, COUNT(*) AS tools
  FROM moved AS m
  JOIN tool_servers AS s ON s.tool = m.tool
  GROUP BY s.mcp_server, m.break_row, m.primary_reason, m.missed_tokens,
           m.request_time_us
),
per_server AS (
  SELECT mcp_server, COUNT(*) AS distinct_tools
  FROM tool_servers
  GROUP BY mcp_server
)
SELECT p.mcp_server,
       COUNT(*) AS breaks,
       SUM((p.primary_reason = 'tools_order_changed')::int)
         AS as_primary_reason,
       SUM(p.tools) AS tool_moves,
       s.distinct_tools,
       SUM(p.missed_tokens) AS tokens_lost_in_these_breaks,
       to_char(to_timestamp(round(MAX(p.request_time_us) / 1000.0) / 1000) AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS last_flip
FROM per_break AS p
JOIN per_server AS s ON s.mcp_server = p.mcp_server
GROUP BY p.mcp_server, s.distinct_tools
ORDER BY breaks DESC, p.mcp_server;
