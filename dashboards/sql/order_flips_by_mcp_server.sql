-- Question: whose tools move when the tool order flips? Breaks with reordered
-- tools, grouped by the MCP server of the moved tools: the `<server>` of a
-- `mcp__<server>__<tool>` name, `(builtin)` for every other tool. Servers
-- that connect in racy order show up here; a deterministic tool order (sort
-- the tool list before each request) removes every one of these breaks.
--
-- Parameters (named; an unset parameter is NULL and takes its default):
--   :since_us  window start, client time in microseconds since the epoch
--              (default: 24 hours ago)
--   :until_us  window end, exclusive (default: no end)
--   :agent     only this agent (default: every agent)
--
-- Columns: mcp_server, breaks (breaks that moved at least one of its tools),
--   as_primary_reason (those whose primary reason is tools_order_changed),
--   tool_moves (moved tools summed over those breaks), distinct_tools,
--   tokens_lost_in_these_breaks, last_flip (ISO-8601, UTC). A break that
--   moved tools of several servers counts for each.
WITH moved AS (
  SELECT b.rowid AS break_row, b.primary_reason, b.missed_tokens,
         b.request_time_us, t.value AS tool
  FROM prompt_cache_breaks AS b, json_each(b.reordered_tool_names) AS t
  -- Lets breaks_with_reorders (only breaks that moved tools) cover this.
  WHERE b.reordered_tool_names <> '[]'
    AND b.request_time_us >= COALESCE(
          :since_us, CAST(strftime('%s', 'now', '-1 day') AS INTEGER) * 1000000)
    AND (:until_us IS NULL OR b.request_time_us < :until_us)
    AND (:agent IS NULL OR b.agent = :agent)
),
tool_servers AS (
  -- The server of each distinct tool, worked out once per tool, not per move.
  SELECT tool,
         CASE
           WHEN tool LIKE 'mcp\_\_%' ESCAPE '\'
                AND instr(substr(tool, 6), '__') > 1
             THEN substr(tool, 6, instr(substr(tool, 6), '__') - 1)
           ELSE '(builtin)'
         END AS mcp_server
  FROM (SELECT DISTINCT tool FROM moved)
),
per_break AS (
  SELECT s.mcp_server, m.break_row, m.primary_reason, m.missed_tokens,
         m.request_time_us, COUNT(*) AS tools
  -- CROSS JOIN keeps this order: each move looks its tool up in the few
  -- tool_servers rows, instead of the moves being indexed by tool.
  FROM moved AS m
  CROSS JOIN tool_servers AS s ON s.tool = m.tool
  GROUP BY s.mcp_server, m.break_row
),
per_server AS (
  SELECT mcp_server, COUNT(*) AS distinct_tools
  FROM tool_servers
  GROUP BY mcp_server
)
SELECT p.mcp_server,
       COUNT(*) AS breaks,
       SUM(p.primary_reason = 'tools_order_changed') AS as_primary_reason,
       SUM(p.tools) AS tool_moves,
       s.distinct_tools,
       SUM(p.missed_tokens) AS tokens_lost_in_these_breaks,
       strftime('%Y-%m-%dT%H:%M:%SZ', MAX(p.request_time_us) / 1e6, 'unixepoch')
         AS last_flip
FROM per_break AS p
JOIN per_server AS s ON s.mcp_server = p.mcp_server
GROUP BY p.mcp_server
ORDER BY breaks DESC, p.mcp_server;
