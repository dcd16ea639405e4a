-- Question: which tools change their JSON schema most often (same name,
-- different schema hash: an edited description, a grown enum), breaking the
-- prompt cache each time? Counts every break that saw the change, also when
-- an earlier change in the prefix (e.g. model_changed) is its primary reason.
--
-- Parameters (named; an unset parameter is NULL and takes its default):
--   :since_us  window start, client time in microseconds since the epoch
--              (default: 24 hours ago)
--   :until_us  window end, exclusive (default: no end)
--   :agent     only this agent (default: every agent)
--   :limit     tools listed (default: 20)
--
-- Columns: tool, changes (breaks in which its schema changed),
--   as_primary_reason (those whose primary reason is tools_schema_changed),
--   agents, sessions, tokens_lost_in_these_breaks (a break that changed
--   several tools counts for each), last_change (ISO-8601, UTC).
SELECT t.value AS tool,
       COUNT(*) AS changes,
       SUM(b.primary_reason = 'tools_schema_changed') AS as_primary_reason,
       COUNT(DISTINCT b.agent) AS agents,
       COUNT(DISTINCT b.agent || '/' || b.session_id) AS sessions,
       SUM(b.missed_tokens) AS tokens_lost_in_these_breaks,
       strftime('%Y-%m-%dT%H:%M:%SZ', MAX(b.request_time_us) / 1e6, 'unixepoch')
         AS last_change
FROM prompt_cache_breaks AS b, json_each(b.schema_changed_tool_names) AS t
-- Lets breaks_with_schema_changes (only breaks that changed one) cover this.
WHERE b.schema_changed_tool_names <> '[]'
  AND b.request_time_us >= COALESCE(
        :since_us, CAST(strftime('%s', 'now', '-1 day') AS INTEGER) * 1000000)
  AND (:until_us IS NULL OR b.request_time_us < :until_us)
  AND (:agent IS NULL OR b.agent = :agent)
GROUP BY t.value
ORDER BY changes DESC, tool
LIMIT COALESCE(:limit, 20);
