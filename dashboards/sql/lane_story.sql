-- Question: what happened, turn by turn, in the lane of one break? The turns
-- of the break's lane (agent, session_id, lane) around it, with what changed
-- from each turn to the next and how the cache responded.
--
-- Parameters (named; an unset parameter is NULL and takes its default):
--   :break_id  the break (required; from `cachewatch breaks` or
--              top_reasons_per_agent.sql / prompt_cache_breaks.break_id)
--   :turns     include turns up to this many turns before and after the
--              break (default: 5)
--   :minutes   ... and every turn up to this many minutes before and after
--              the break (default: 30); 0 limits the story to :turns
--
-- Columns: turn_offset (0 = the break's turn, -1 = the turn it was compared
--   with), request_time (ISO-8601, UTC), gap_s (seconds since the lane's
--   previous turn), request_id, model, tool_count, changed (what differs from
--   the previous turn: model, tools, system, options, cache_control (enabled,
--   TTL or the tools/system breakpoints; message breakpoints move every turn
--   and are ignored); empty: nothing), expected_drop (the agent's hint), prompt_total_tokens,
--   cache_read_tokens, cache_write_tokens, hit_ratio (0-1), verdict,
--   primary_reason, missed_tokens, break_id, is_this_break (1 on the break's
--   turn).
--
-- Example:
--   sqlite3 -header -column -cmd ".param set :break_id 'b-…'" cachewatch.db \
--     < dashboards/sql/lane_story.sql
WITH brk AS (
  SELECT agent, session_id, lane, request_id
  FROM prompt_cache_breaks
  WHERE break_id = :break_id
),
keyed AS (
  -- What of cache_control keys the cache (as the classifier compares it):
  -- enabled, automatic, TTL and the tools/system breakpoints. Message
  -- breakpoints advance every turn by design and are left out.
  SELECT t.*,
         json_array(t.cache_enabled, t.cache_automatic, t.cache_ttl_seconds,
                    (SELECT json_group_array(json(bp.value))
                     FROM json_each(t.breakpoints) AS bp
                     WHERE json_extract(bp.value, '$.segment') <> 'messages'))
           AS cache_key
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
       strftime('%Y-%m-%dT%H:%M:%fZ', lt.request_time_us / 1e6, 'unixepoch')
         AS request_time,
       ROUND((lt.request_time_us - lt.prev_time_us) / 1e6, 1) AS gap_s,
       lt.request_id,
       lt.model,
       lt.tool_count,
       CASE WHEN lt.seq = 1 THEN NULL ELSE trim(
         CASE WHEN lt.model IS NOT lt.prev_model THEN 'model ' ELSE '' END ||
         CASE WHEN lt.tool_list_hash IS NOT lt.prev_tool_list_hash
              THEN 'tools ' ELSE '' END ||
         CASE WHEN lt.system_hash IS NOT lt.prev_system_hash
              THEN 'system ' ELSE '' END ||
         CASE WHEN lt.options_hash IS NOT lt.prev_options_hash
              THEN 'options ' ELSE '' END ||
         CASE WHEN lt.cache_key IS NOT lt.prev_cache_key
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
       lt.seq = a.seq AS is_this_break
FROM lane_turns AS lt, anchor AS a
WHERE abs(lt.seq - a.seq) <= COALESCE(:turns, 5)
   OR abs(lt.request_time_us - a.request_time_us)
        <= COALESCE(:minutes, 30) * 60000000
ORDER BY lt.seq;
