-- Overlap policies at claim time: guarded jobs' executions are claimed, skipped, made to wait or
-- asked to stop under their job's row lock (schedulerd/overlap_claims.py).

-- name: job_lock_overlap
-- Lock the guarded jobs (overlap policy other than allow) of these executions, in id order so two
-- workers never deadlock. Call inside a transaction: the lock serialises every claim and release
-- of one job's executions, and the statements after it see what the previous holder committed.
-- [$2, $3) bounds the executions' scheduled_for (here and in the statements below).
SELECT j.id FROM jobs j
WHERE j.id IN (SELECT e.job_id FROM executions e
               WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $2 AND e.scheduled_for < $3)
  AND j.overlap <> 'allow'
ORDER BY j.id FOR UPDATE;

-- name: job_guarded_of
-- Which of these executions belong to guarded jobs (overlap policy other than allow), without
-- locking anything: the claim checks this before opening a transaction, so popped ids that
-- another replica claimed (allow jobs) cost one cheap statement.
SELECT e.id FROM executions e JOIN jobs j ON j.id = e.job_id
WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $2 AND e.scheduled_for < $3 AND j.overlap <> 'allow';

-- name: job_lock_many
-- Lock these jobs in id order (a release after an execution of theirs stopped). Inside a transaction.
SELECT id FROM jobs WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE;

-- name: execution_overlap_state
-- Under job_lock_overlap: the due, unstarted executions among $1 of locked (guarded) jobs, oldest
-- first per job, with the job's policy, whether it is enabled (a paused or deleted job's are not
-- judged: the claim cancels them), whether its last started execution still runs (busy, and
-- whether it was asked to stop) and which occurrence waits for it (id, scheduled_for), if one
-- still does. Due by $5,
-- the pop's instant, when given (see execution_claim_many), else by Postgres's clock.
SELECT e.id, e.job_id, e.scheduled_for, j.overlap, j.enabled, coalesce(r.status = 'running', false) AS busy,
       CASE WHEN r.status = 'running' THEN r.scheduled_for END AS running_for,
       r.cancel_requested_at IS NOT NULL AS cancel_requested,
       CASE WHEN w.status = 'pending' AND w.reason = 'overlap_buffered' THEN w.id END AS waiting_id,
       CASE WHEN w.status = 'pending' AND w.reason = 'overlap_buffered' THEN w.scheduled_for END AS waiting_for
FROM executions e JOIN jobs j ON j.id = e.job_id
LEFT JOIN executions r ON r.id = j.overlap_running AND r.scheduled_for = j.overlap_running_for
LEFT JOIN executions w ON w.id = j.overlap_waiting AND w.scheduled_for = j.overlap_waiting_for
WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $3 AND e.scheduled_for < $4
  AND e.status IN ('pending', 'queued') AND e.due_at <= coalesce($5::timestamptz, clock_timestamp())
  AND j.id = ANY($2::uuid[])
ORDER BY e.job_id, e.scheduled_for, e.id;

-- name: execution_skip_overlap
-- Under job_lock_overlap: mark occurrences an overlap verdict skipped (due meanwhile, or a waiting
-- one replaced), unless one started meanwhile, with late reason overlap (it never ran).
-- Returns the ids skipped.
WITH locked AS (
    SELECT id, scheduled_for FROM executions
    WHERE id = ANY($1::uuid[]) AND scheduled_for >= $2 AND scheduled_for < $3 AND status IN ('pending', 'queued')
    ORDER BY id FOR NO KEY UPDATE
)
UPDATE executions e SET status = 'skipped', reason = 'overlap', finished_at = clock_timestamp(),
       late_reason = coalesce(e.late_reason, 'overlap')
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id;

-- name: execution_wait_overlap
-- Under job_lock_overlap: park the occurrences an overlap verdict made wait (one per job): pending,
-- reason overlap_buffered, due at the far-future sentinel 9999-12-31 (so no loop picks it up and
-- no gauge counts it overdue) until execution_release_waiting; their jobs point at them.
WITH locked AS (
    SELECT id, scheduled_for FROM executions
    WHERE id = ANY($1::uuid[]) AND scheduled_for >= $2 AND scheduled_for < $3 AND status IN ('pending', 'queued')
    ORDER BY id FOR NO KEY UPDATE
), waiting AS (
    UPDATE executions e SET status = 'pending', reason = 'overlap_buffered',
           due_at = '9999-12-31 00:00:00+00', enqueued_at = NULL
    FROM locked l WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
    RETURNING e.id, e.job_id, e.scheduled_for
), pointed AS (
    UPDATE jobs j SET overlap_waiting = w.id, overlap_waiting_for = w.scheduled_for FROM waiting w WHERE j.id = w.job_id
)
SELECT id FROM waiting;

-- name: execution_request_cancel
-- Under job_lock_overlap: ask the running executions of these jobs (cancel_other) to stop; their
-- workers learn it from the next heartbeat. Returns the executions asked.
WITH locked AS (
    SELECT e.id, e.scheduled_for FROM executions e JOIN jobs j ON e.id = j.overlap_running AND e.scheduled_for = j.overlap_running_for
    WHERE j.id = ANY($1::uuid[]) AND e.status = 'running'
    ORDER BY e.id FOR NO KEY UPDATE OF e
)
UPDATE executions e SET cancel_requested_at = coalesce(e.cancel_requested_at, clock_timestamp())
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id;

-- name: execution_release_waiting
-- Under job_lock_many: for these jobs whose last started execution no longer runs, let the waiting
-- occurrence start now (queued, due now) and clear the pointer. Returns them (with the job's
-- policy) for ZADD.
WITH free AS (
    SELECT j.id, j.overlap_waiting, j.overlap_waiting_for, j.overlap FROM jobs j
    WHERE j.id = ANY($1::uuid[]) AND j.overlap_waiting IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM executions r WHERE r.id = j.overlap_running
                      AND r.scheduled_for = j.overlap_running_for AND r.status = 'running')
), cleared AS (
    UPDATE jobs j SET overlap_waiting = NULL, overlap_waiting_for = NULL FROM free f WHERE j.id = f.id
), locked AS (
    SELECT e.id, e.scheduled_for, f.overlap FROM executions e JOIN free f ON e.id = f.overlap_waiting AND e.scheduled_for = f.overlap_waiting_for
    WHERE e.lane = 'pending' AND e.status = 'pending' AND e.reason = 'overlap_buffered'
    ORDER BY e.id FOR NO KEY UPDATE OF e
)
UPDATE executions e SET status = 'queued', due_at = clock_timestamp(), enqueued_at = clock_timestamp()
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id, e.due_at, e.tenant, e.priority, l.overlap;

-- name: job_overlap_stalled
-- The sweeper's safety net: jobs with a waiting occurrence whose last started execution no longer
-- runs (its worker died after finishing, or it was reclaimed, parked or handed back), at most $1.
-- Oldest waiting first, in jobs_overlap_waiting's order, which no other index has: with a LIMIT,
-- walking that small index is the plan whatever the statistics say (read by a seq scan or the
-- primary key, a table of 300,000 one-off jobs cost 200 ms a pass).
SELECT j.id FROM jobs j
WHERE j.overlap_waiting IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM executions r WHERE r.id = j.overlap_running
                  AND r.scheduled_for = j.overlap_running_for AND r.status = 'running')
ORDER BY j.overlap_waiting_for, j.id LIMIT $1;
