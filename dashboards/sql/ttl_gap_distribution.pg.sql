-- PostgreSQL variant of ttl_gap_distribution.sql: the same question,
-- parameters, columns and rows (dashboards/tests/sql_both_stores_test.py
-- checks that), for a store on PostgreSQL (docs/FLEET.md). Parameters are
-- psql variables; an unset one takes its default.
--
-- Example:
--   psql -X --csv -d "$CACHEWATCH_PG" \
--     -f dashboards/sql/ttl_gap_distribution.pg.sql
\if :{?since_us} \else \set since_us '' \endif
\if :{?until_us} \else \set until_us '' \endif
\if :{?agent} \else \set agent '' \endif
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
  SELECT ttl_seconds, gap_seconds, missed_tokens
  FROM prompt_cache_breaks
  WHERE primary_reason = 'ttl_expired'
    AND request_time_us >= COALESCE(NULLIF(:'since_us', '')::bigint,
          (extract(epoch FROM now() - interval '1 day') * 1000000)::bigint)
    AND (NULLIF(:'until_us', '') IS NULL
         OR request_time_us < NULLIF(:'until_us', '')::bigint)
    AND (NULLIF(:'agent', '') IS NULL OR agent = NULLIF(:'agent', ''))
),
per_bucket AS (
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
       ROUND(pb.min_gap_s::numeric, 1) AS min_gap_s,
       ROUND(pb.max_gap_s::numeric, 1) AS max_gap_s,
       ROUND(pb.avg_over_ttl_s::numeric, 1) AS avg_over_ttl_s
FROM ttls AS tt
CROSS JOIN buckets AS bk
LEFT JOIN per_bucket AS pb
  ON pb.ttl_seconds IS NOT DISTINCT FROM tt.ttl_seconds
 AND pb.bucket_order = bk.bucket_order
ORDER BY tt.ttl_seconds, bk.bucket_order;
