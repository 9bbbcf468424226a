-- Failed executions: the dead-letter list, redrive, and each execution's redrive record.

-- name: execution_failed_page
-- The dead-letter list: failed executions, most recently failed first, of tenant $1 (NULL: every
-- tenant, for an operator), optionally of job $2 and task $3, whose last error contains $4
-- (case-insensitive), failed in [$5, $6), strictly after the cursor ($7 finished_at, $8 id).
SELECT e.*, j.task FROM executions e JOIN jobs j ON j.id = e.job_id
WHERE e.lane = 'failed' AND e.status = 'failed' AND ($1::text IS NULL OR e.tenant = $1)
  AND ($2::uuid IS NULL OR e.job_id = $2) AND ($3::text IS NULL OR j.task = $3)
  AND ($4::text IS NULL OR strpos(lower(coalesce(e.last_error, '')), lower($4)) > 0)
  AND e.finished_at >= $5 AND e.finished_at < $6
  AND (e.finished_at, e.id) < ($7, $8)
ORDER BY e.finished_at DESC, e.id DESC
LIMIT $9;

-- name: execution_redrive_many
-- Give failed executions ($1, in order; of tenant $2 unless NULL; of jobs neither paused nor
-- deleted) a new attempt budget: same id,
-- attempt back to 0, fence raised, due one after another at $3 per second from now (queued when
-- inside the dispatch horizon, $4 seconds). reason 'redrive' keeps a redriven cron occurrence from
-- being judged a misfire. A stop request its last attempt had is cleared: the new budget runs.
-- Each redrive is recorded in redrives by $5. Returns them for ZADD.
WITH locked AS (  -- in id order, as every statement writing several executions
    SELECT e.id, e.attempt, e.last_error, t.n
    FROM unnest($1::uuid[]) WITH ORDINALITY AS t(id, n) JOIN executions e ON e.id = t.id JOIN jobs j ON j.id = e.job_id
    WHERE e.lane = 'failed' AND e.status = 'failed' AND ($2::text IS NULL OR e.tenant = $2) AND j.enabled
    ORDER BY e.id FOR NO KEY UPDATE OF e
), target AS (
    SELECT id, attempt, last_error, row_number() OVER (ORDER BY n) - 1 AS n FROM locked
), redriven AS (
    UPDATE executions e SET
        status = CASE WHEN t.n / $3 <= $4 THEN 'queued' ELSE 'pending' END,
        enqueued_at = CASE WHEN t.n / $3 <= $4 THEN clock_timestamp() END,
        due_at = clock_timestamp() + make_interval(secs => t.n / $3),
        attempt = 0, fence = e.fence + 1, redrives = e.redrives + 1, reason = 'redrive',
        finished_at = NULL, lease_until = NULL, cancel_requested_at = NULL, cancelled_by = NULL
    FROM target t
    WHERE e.id = t.id AND e.lane = 'failed' AND e.status = 'failed'
    RETURNING e.id, e.fence, e.status, e.due_at, e.tenant, e.priority, t.attempt AS attempts_before, t.last_error AS error_before
), recorded AS (
    INSERT INTO redrives (execution_id, fence, redriven_by, attempts_before, error_before)
    SELECT id, fence, $5, attempts_before, error_before FROM redriven
)
SELECT id, status, due_at, tenant, priority FROM redriven;

-- name: redrive_list
-- Every redrive of one execution, oldest first.
SELECT * FROM redrives WHERE execution_id = $1 ORDER BY fence;
