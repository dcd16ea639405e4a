-- Question: when the cache expired (primary reason ttl_expired), how long had
-- the lane been idle? Gaps bucketed per TTL in force: mostly just over 5 min
-- suggests a 1 h TTL (or a keep-alive) would pay; hours suggests nothing would.
--
-- Parameters (named; an unset parameter is NULL and takes its default):
--   :since_us  window start, client time in microseconds since the epoch
--              (default: 24 hours ago)
--   :until_us  window end, exclusive (default: no end)
--   :agent     only this agent (default: every agent)
--
-- Columns: ttl_seconds (TTL assumed for the break), gap_bucket (label),
--   bucket_start_s, bucket_end_s (NULL: open-ended), breaks (0 for empty
--   buckets), share_of_ttl_breaks (0-1, of this TTL's ttl_expired breaks),
--   tokens_lost, min_gap_s, max_gap_s, avg_over_ttl_s (mean of gap - TTL).
--   One row per bucket for every TTL that occurs, empty buckets included.
WITH buckets (bucket_order, gap_bucket, bucket_start_s, bucket_end_s) AS (
  VALUES (1, '< 5 min', 0, 300),
         (2, '5-10 min', 300, 600),
         (3, '10-15 min', 600, 900),
         (4, '15-30 min', 900, 1800),
         (5, '30-60 min', 1800, 3600),
         (6, '1-2 h', 3600, 7200),
         (7, '2-6 h', 7200, 21600),
         (8, '>= 6 h', 21600, NULL)
),
expired AS (
  -- breaks_by_reason_time covers this (reason, time, agent, TTL, gap, tokens).
  SELECT ttl_seconds, gap_seconds, missed_tokens
  FROM prompt_cache_breaks
  WHERE primary_reason = 'ttl_expired'
    AND request_time_us >= COALESCE(
          :since_us, CAST(strftime('%s', 'now', '-1 day') AS INTEGER) * 1000000)
    AND (:until_us IS NULL OR request_time_us < :until_us)
    AND (:agent IS NULL OR agent = :agent)
),
per_bucket AS (
  -- One pass: each break into its bucket, then one row per (TTL, bucket).
  SELECT e.ttl_seconds, bk.bucket_order,
         COUNT(e.gap_seconds) AS breaks,
         SUM(e.missed_tokens) AS tokens_lost,
         MIN(e.gap_seconds) AS min_gap_s,
         MAX(e.gap_seconds) AS max_gap_s,
         AVG(e.gap_seconds - e.ttl_seconds) AS avg_over_ttl_s
  FROM expired AS e
  JOIN buckets AS bk
    ON e.gap_seconds >= bk.bucket_start_s
   AND (bk.bucket_end_s IS NULL OR e.gap_seconds < bk.bucket_end_s)
  GROUP BY e.ttl_seconds, bk.bucket_order
),
ttls AS (
  SELECT ttl_seconds, COUNT(*) AS ttl_breaks FROM expired GROUP BY ttl_seconds
)
SELECT tt.ttl_seconds,
       bk.gap_bucket,
       bk.bucket_start_s,
       bk.bucket_end_s,
       COALESCE(pb.breaks, 0) AS breaks,
       ROUND(1.0 * COALESCE(pb.breaks, 0) / tt.ttl_breaks, 4)
         AS share_of_ttl_breaks,
       COALESCE(pb.tokens_lost, 0) AS tokens_lost,
       ROUND(pb.min_gap_s, 1) AS min_gap_s,
       ROUND(pb.max_gap_s, 1) AS max_gap_s,
       ROUND(pb.avg_over_ttl_s, 1) AS avg_over_ttl_s
FROM ttls AS tt
CROSS JOIN buckets AS bk
LEFT JOIN per_bucket AS pb
  ON pb.ttl_seconds IS tt.ttl_seconds AND pb.bucket_order = bk.bucket_order
ORDER BY tt.ttl_seconds, bk.bucket_order;
