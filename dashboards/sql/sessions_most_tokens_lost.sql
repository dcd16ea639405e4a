-- Question: which sessions lost the most cached prompt tokens to breaks in a
-- time window, what was their main reason, and how well did their cache work
-- overall?
--
-- Parameters (named; an unset parameter is NULL and takes its default):
--   :since_us  window start, client time in microseconds since the epoch
--              (default: 24 hours ago)
--   :until_us  window end, exclusive (default: no end)
--   :agent     only this agent (default: every agent)
--   :limit     sessions listed (default: 20)
--
-- Columns: agent, session_id, lanes (lanes with breaks), breaks, tokens_lost,
--   estimated_extra_cost_usd (NULL without a configured price), top_reason
--   (the primary reason that lost the most tokens), top_reason_tokens_lost,
--   turns (classified turns of the session in the window), hit_ratio (cache
--   read / prompt tokens over those turns, 0-1), first_break, last_break
--   (ISO-8601, UTC).
--
-- Next: `cachewatch breaks --session <session_id>`, or lane_story.sql.
WITH per_session AS (
  -- breaks_by_session (agent, session_id, request_time_us, ...) covers this:
  -- the groups stream out of the index, nothing is sorted or looked up.
  SELECT agent, session_id,
         COUNT(DISTINCT lane) AS lanes,
         COUNT(*) AS breaks,
         SUM(missed_tokens) AS tokens_lost,
         SUM(estimated_extra_cost_usd) AS cost,
         MIN(request_time_us) AS first_us,
         MAX(request_time_us) AS last_us
  FROM prompt_cache_breaks
  WHERE request_time_us >= COALESCE(
          :since_us, CAST(strftime('%s', 'now', '-1 day') AS INTEGER) * 1000000)
    AND (:until_us IS NULL OR request_time_us < :until_us)
    AND (:agent IS NULL OR agent = :agent)
  GROUP BY agent, session_id
  ORDER BY tokens_lost DESC, agent, session_id
  LIMIT COALESCE(:limit, 20)
),
per_reason AS (
  -- Only for the sessions listed, each looked up in breaks_by_session.
  SELECT b.agent, b.session_id, b.primary_reason,
         SUM(b.missed_tokens) AS tokens_lost,
         ROW_NUMBER() OVER (PARTITION BY b.agent, b.session_id
                            ORDER BY SUM(b.missed_tokens) DESC,
                                     b.primary_reason) AS reason_rank
  FROM per_session s
  CROSS JOIN prompt_cache_breaks b
    ON b.agent = s.agent AND b.session_id = s.session_id
  WHERE b.request_time_us >= COALESCE(
          :since_us, CAST(strftime('%s', 'now', '-1 day') AS INTEGER) * 1000000)
    AND (:until_us IS NULL OR b.request_time_us < :until_us)
  GROUP BY b.agent, b.session_id, b.primary_reason
),
session_turns AS (
  SELECT t.agent, t.session_id,
         COUNT(*) AS turns,
         SUM(t.cache_read_tokens) AS read_tokens,
         SUM(t.prompt_total_tokens) AS prompt_tokens
  -- per_session first (CROSS JOIN fixes the order): its few sessions are
  -- each looked up in turns_by_lane_time instead of every turn being scanned.
  FROM per_session s
  CROSS JOIN turns t ON t.agent = s.agent AND t.session_id = s.session_id
  WHERE t.verdict IS NOT NULL AND t.verdict <> 'pending'
    AND t.request_time_us >= COALESCE(
          :since_us, CAST(strftime('%s', 'now', '-1 day') AS INTEGER) * 1000000)
    AND (:until_us IS NULL OR t.request_time_us < :until_us)
  GROUP BY t.agent, t.session_id
)
SELECT s.agent,
       s.session_id,
       s.lanes,
       s.breaks,
       s.tokens_lost,
       ROUND(s.cost, 4) AS estimated_extra_cost_usd,
       r.primary_reason AS top_reason,
       r.tokens_lost AS top_reason_tokens_lost,
       COALESCE(st.turns, 0) AS turns,
       ROUND(1.0 * st.read_tokens / NULLIF(st.prompt_tokens, 0), 4) AS hit_ratio,
       strftime('%Y-%m-%dT%H:%M:%SZ', s.first_us / 1e6, 'unixepoch') AS first_break,
       strftime('%Y-%m-%dT%H:%M:%SZ', s.last_us / 1e6, 'unixepoch') AS last_break
FROM per_session s
JOIN per_reason r
  ON r.agent = s.agent AND r.session_id = s.session_id AND r.reason_rank = 1
LEFT JOIN session_turns st
  ON st.agent = s.agent AND st.session_id = s.session_id
ORDER BY s.tokens_lost DESC, s.agent, s.session_id;
