-- Read-only figures for operators and tenants: overview, lag, due-soon and forecast counts.

-- name: execution_overview
-- For an operator's one screen: the oldest queued due time, and the last hour's executions by
-- status (bounded by scheduled_for so it never scans the whole history).
SELECT (SELECT min(due_at) FROM executions WHERE lane = 'active' AND status = 'queued') AS oldest_queued_due_at,
       (SELECT min(due_at) FROM executions WHERE lane = 'pending' AND status = 'pending') AS oldest_pending_due_at,
       (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM (
            SELECT status, count(*) AS n FROM executions
            WHERE scheduled_for > clock_timestamp() - interval '1 hour' AND scheduled_for <= clock_timestamp()
            GROUP BY status) s) AS last_hour_by_status,
       clock_timestamp() AS now;

-- name: execution_tenant_recent_stats
-- Tenant $1's executions scheduled in the last $2 seconds: count per status, and start-lag
-- percentiles (first start minus scheduled time, in seconds) of those that started.
WITH recent AS (
    SELECT status, extract(epoch FROM first_started_at - scheduled_for) AS lag_s FROM executions
    WHERE tenant = $1 AND scheduled_for > clock_timestamp() - make_interval(secs => $2)
      AND scheduled_for <= clock_timestamp()
)
SELECT (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM (SELECT status, count(*) AS n FROM recent GROUP BY status) s)
           AS by_status,
       (SELECT percentile_cont(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (ORDER BY lag_s) FROM recent WHERE lag_s IS NOT NULL)
           AS lag_percentiles_s,
       (SELECT max(lag_s) FROM recent) AS lag_max_s,
       (SELECT count(lag_s) FROM recent) AS started;

-- name: execution_minutes_tenant
-- Tenant $1's last $2 minutes (UTC minutes of scheduled time, the current one last), each with
-- executions scheduled, started, succeeded and failed, and the start-lag p50 and p99 (seconds)
-- of those started. Minutes with nothing scheduled are rows of zeros.
WITH span AS (SELECT date_trunc('minute', clock_timestamp()) - make_interval(mins => $2 - 1) AS first_minute,
                     clock_timestamp() AS now),
recent AS (
    SELECT date_trunc('minute', scheduled_for) AS minute, status,
           extract(epoch FROM first_started_at - scheduled_for)::float8 AS lag_s
    FROM executions, span
    WHERE tenant = $1 AND scheduled_for >= span.first_minute AND scheduled_for <= span.now
)
SELECT m.minute, count(r.minute) AS scheduled, count(r.lag_s) AS started,
       count(*) FILTER (WHERE r.status = 'succeeded') AS succeeded, count(*) FILTER (WHERE r.status = 'failed') AS failed,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY r.lag_s) AS lag_p50_s,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY r.lag_s) AS lag_p99_s, span.now
FROM span CROSS JOIN generate_series(span.first_minute, date_trunc('minute', span.now), interval '1 minute') AS m(minute)
LEFT JOIN recent r ON r.minute = m.minute
GROUP BY m.minute, span.now ORDER BY m.minute;

-- name: execution_minutes_fleet
-- execution_minutes_tenant for every tenant at once (the [ops] listener): a range scan of
-- executions_scheduled_for (BRIN) over the last $1 minutes, so its cost grows with the fleet's rate.
WITH span AS (SELECT date_trunc('minute', clock_timestamp()) - make_interval(mins => $1 - 1) AS first_minute,
                     clock_timestamp() AS now),
recent AS (
    SELECT date_trunc('minute', scheduled_for) AS minute, status,
           extract(epoch FROM first_started_at - scheduled_for)::float8 AS lag_s
    FROM executions, span
    WHERE scheduled_for >= span.first_minute AND scheduled_for <= span.now
)
SELECT m.minute, count(r.minute) AS scheduled, count(r.lag_s) AS started,
       count(*) FILTER (WHERE r.status = 'succeeded') AS succeeded, count(*) FILTER (WHERE r.status = 'failed') AS failed,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY r.lag_s) AS lag_p50_s,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY r.lag_s) AS lag_p99_s, span.now
FROM span CROSS JOIN generate_series(span.first_minute, date_trunc('minute', span.now), interval '1 minute') AS m(minute)
LEFT JOIN recent r ON r.minute = m.minute
GROUP BY m.minute, span.now ORDER BY m.minute;

-- name: execution_oldest_due
-- Fleet-wide: the earliest due time among executions not yet started (both partial indexes
-- answer with one index probe each), and Postgres's now.
SELECT least((SELECT min(due_at) FROM executions WHERE lane = 'active' AND status = 'queued'),
             (SELECT min(due_at) FROM executions WHERE lane = 'pending' AND status = 'pending')) AS oldest_due_at,
       clock_timestamp() AS now;

-- name: execution_oldest_due_tenant
-- One tenant's ($1) earliest due time among its executions due and not yet started (NULL: none
-- due), and Postgres's now. The "due" bound (now() is stable: an index condition) keeps the walk
-- of the partial indexes to what is overdue fleet-wide, not every queued row.
SELECT least((SELECT min(due_at) FROM executions WHERE lane = 'active' AND status = 'queued' AND due_at <= now() AND tenant = $1),
             (SELECT min(due_at) FROM executions WHERE lane = 'pending' AND status = 'pending' AND due_at <= now() AND tenant = $1))
           AS oldest_due_at,
       clock_timestamp() AS now;

-- name: execution_due_soon
-- Executions not yet started that fall due within $1 seconds (pending or queued; retries
-- included), counted up to $2: each counted row is a heap visit (status is not in the lane
-- indexes), and an observer measures every few seconds on every replica, so the count stops
-- where the gauge stops telling anything new (mid-spike: 33 ms a pass to count 10,000, 179 to
-- count 131,274).
-- now(), not clock_timestamp(): an index condition, so rows past the window are never read.
SELECT least($2, (SELECT count(*) FROM (SELECT FROM executions WHERE lane = 'pending' AND status = 'pending'
                                        AND due_at <= now() + make_interval(secs => $1) LIMIT $2) p)
               + (SELECT count(*) FROM (SELECT FROM executions WHERE lane = 'active' AND status = 'queued'
                                        AND due_at <= now() + make_interval(secs => $1) LIMIT $2) q));

-- name: execution_recent_lag
-- Start-lag percentiles (seconds) of first attempts started in the last $1 seconds, and failures
-- (terminal) finished in the last hour.
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY lag) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY lag) AS p95,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY lag) AS p99,
       count(*) AS started,
       (SELECT count(*) FROM executions WHERE lane = 'failed' AND status = 'failed' AND finished_at > clock_timestamp() - interval '1 hour'
           AND scheduled_for > clock_timestamp() - interval '1 day') AS failed_last_hour
FROM (SELECT extract(epoch FROM first_started_at - scheduled_for) AS lag FROM executions
      WHERE scheduled_for > clock_timestamp() - make_interval(secs => $1) - interval '1 hour'
        AND first_started_at > clock_timestamp() - make_interval(secs => $1)) recent;

-- name: execution_due_forecast
-- Known future load: executions not yet started (pending or queued, retries included) falling
-- due in the next $1, $2, $3 and $4 seconds ($4 the widest), per tenant (only tenant $5 when
-- given). One range scan of each partial due index.
WITH now AS (SELECT clock_timestamp() AS t),
due AS (
    SELECT tenant, due_at FROM executions, now
    WHERE lane = 'pending' AND status = 'pending' AND due_at > now.t AND due_at <= now.t + make_interval(secs => $4)
      AND ($5::text IS NULL OR tenant = $5)
    UNION ALL
    SELECT tenant, due_at FROM executions, now
    WHERE lane = 'active' AND status = 'queued' AND due_at > now.t AND due_at <= now.t + make_interval(secs => $4)
      AND ($5::text IS NULL OR tenant = $5)
)
SELECT due.tenant,
       count(due.due_at) FILTER (WHERE due.due_at <= now.t + make_interval(secs => $1)) AS within_1,
       count(due.due_at) FILTER (WHERE due.due_at <= now.t + make_interval(secs => $2)) AS within_2,
       count(due.due_at) FILTER (WHERE due.due_at <= now.t + make_interval(secs => $3)) AS within_3,
       count(due.due_at) AS within_4,
       now.t AS now
FROM now LEFT JOIN due ON true  -- nothing due: one row with no tenant, zero counts and the time
GROUP BY due.tenant, now.t;
