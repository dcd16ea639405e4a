-- Question: which reasons break each agent's prompt cache most often in a
-- time window, and how many cached tokens (and dollars) does each cost?
--
-- Parameters (named; an unset parameter is NULL and takes its default):
--   :since_us  window start, client time in microseconds since the epoch
--              (default: 24 hours ago)
--   :until_us  window end, exclusive (default: no end)
--   :agent     only this agent (default: every agent)
--   :top       reasons listed per agent (default: 5)
--
-- Columns: agent, reason_rank (1 = most breaks), primary_reason, breaks,
--   share_of_agent_breaks (0-1, of all the agent's breaks in the window),
--   tokens_lost, avg_tokens_lost, estimated_extra_cost_usd (NULL without a
--   configured price), first_break, last_break (ISO-8601, UTC).
--
-- Example:
--   sqlite3 -cmd ".param set :agent 'claude-code'" cachewatch.db \
--     < dashboards/sql/top_reasons_per_agent.sql
WITH windowed AS (
  SELECT agent, primary_reason, missed_tokens, estimated_extra_cost_usd,
         request_time_us
  FROM prompt_cache_breaks
  WHERE request_time_us >= COALESCE(
          :since_us, CAST(strftime('%s', 'now', '-1 day') AS INTEGER) * 1000000)
    AND (:until_us IS NULL OR request_time_us < :until_us)
    AND (:agent IS NULL OR agent = :agent)
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
       CAST(ROUND(1.0 * tokens_lost / breaks) AS INTEGER) AS avg_tokens_lost,
       ROUND(cost, 4) AS estimated_extra_cost_usd,
       strftime('%Y-%m-%dT%H:%M:%SZ', first_us / 1e6, 'unixepoch') AS first_break,
       strftime('%Y-%m-%dT%H:%M:%SZ', last_us / 1e6, 'unixepoch') AS last_break
FROM ranked
WHERE reason_rank <= COALESCE(:top, 5)
ORDER BY agent, reason_rank;
