-- Fleet-wide concurrency limits: the claim under a limit's lock, the waiting executions and their
-- release (schedulerd/flow_claims.py; core/flow.py judges).

-- name: flow_lock
-- Hold these limits (advisory lock ids, core/flow.Scope.lock_id, sorted by the caller) until the
-- transaction ends: every claim and release of a limit takes its lock before it counts the
-- running rows, so the second of two replicas judging one key sees the first's claims. Always
-- in ascending order, and after any job lock, so two judges never deadlock.
SELECT pg_advisory_xact_lock(l.id) FROM unnest($1::bigint[]) WITH ORDINALITY AS l(id, n) ORDER BY l.n;

-- name: flow_running
-- What runs now, counted by (tenant, task, concurrency key) for the tenants $1 or task types $2
-- asked about: the limited running set is small (a few hundred rows a replica, executions_limited), and
-- counting the rows themselves leaves no counter to drift. A dead holder's row stays running
-- (and counted) until the sweeper reclaims its lease.
SELECT e.tenant, j.task, j.concurrency_key, count(*) AS running
FROM executions e JOIN jobs j ON j.id = e.job_id
WHERE e.lane = 'limited' AND e.status = 'running' AND (e.tenant = ANY($1::text[]) OR j.task = ANY($2::text[]))
GROUP BY e.tenant, j.task, j.concurrency_key;

-- name: flow_candidates
-- The due, unstarted executions among $1 that the fast claim left, with what their limits are
-- judged by, in due order. [$2, $3) bounds their scheduled_for. Due by $4 (the pop's instant;
-- NULL: Postgres's clock), as execution_claim_many judges.
SELECT e.id, e.tenant, e.scheduled_for, j.task, j.concurrency_key, j.concurrency_limit, j.overlap, j.enabled
FROM executions e JOIN jobs j ON j.id = e.job_id
WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $2 AND e.scheduled_for < $3
  AND e.status IN ('pending', 'queued') AND e.due_at <= coalesce($4::timestamptz, clock_timestamp())
ORDER BY e.due_at, e.id;

-- name: execution_wait_slot
-- Under flow_lock: executions whose limit is full wait for a slot: pending, reason
-- concurrency_limit, due at the far-future sentinel (so no loop picks one up, as an overlap
-- buffer's), no attempt used, until execution_release_slot. Returns the ids.
WITH locked AS (
    SELECT id, scheduled_for FROM executions
    WHERE id = ANY($1::uuid[]) AND scheduled_for >= $2 AND scheduled_for < $3 AND status IN ('pending', 'queued')
    ORDER BY id FOR NO KEY UPDATE
)
UPDATE executions e SET status = 'pending', reason = 'concurrency_limit', due_at = '9999-12-31 00:00:00+00',
       enqueued_at = NULL
FROM locked l WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id;

-- name: execution_waiting_slot
-- Executions waiting for a slot of these limits: key limits as ($1 tenants, $2 keys) pairs, task
-- types $3, tenants $4; oldest scheduled first, at most $5, with what their limits are judged by.
SELECT e.id, e.tenant, e.scheduled_for, j.task, j.concurrency_key, j.concurrency_limit
FROM executions e JOIN jobs j ON j.id = e.job_id
WHERE e.lane = 'pending' AND e.status = 'pending' AND e.reason = 'concurrency_limit'
  AND ((e.tenant, j.concurrency_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
       OR j.task = ANY($3::text[]) OR e.tenant = ANY($4::text[]))
ORDER BY e.scheduled_for, e.id
LIMIT $5;

-- name: execution_release_slot
-- Let these waiting executions start: queued, due now. A first attempt whose scheduled time is
-- more than $4 s past records late reason concurrency_limit (its wait was the limit at work, not
-- the scheduler's lag). Returns them for ZADD, scored by their scheduled time so they pop ahead
-- of work that fell due after them. [$2, $3) bounds their scheduled_for.
WITH locked AS (
    SELECT id, scheduled_for FROM executions
    WHERE id = ANY($1::uuid[]) AND scheduled_for >= $2 AND scheduled_for < $3
      AND lane = 'pending' AND status = 'pending' AND reason = 'concurrency_limit'
    ORDER BY id FOR NO KEY UPDATE
)
UPDATE executions e SET status = 'queued', due_at = clock_timestamp(), enqueued_at = clock_timestamp(),
       late_reason = coalesce(e.late_reason, CASE WHEN e.attempt = 0
           AND clock_timestamp() > e.scheduled_for + make_interval(secs => $4) THEN 'concurrency_limit' END)
FROM locked l WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id, e.scheduled_for, e.tenant, e.priority;

-- name: flow_waiting_scopes
-- The sweeper's safety net: the limits executions wait on (tenant, task, key, key limit), at
-- most $1 combinations, so a release lost with a dead worker, or a holder reclaimed, still frees them.
SELECT DISTINCT e.tenant, j.task, j.concurrency_key, j.concurrency_limit
FROM executions e JOIN jobs j ON j.id = e.job_id
WHERE e.lane = 'pending' AND e.status = 'pending' AND e.reason = 'concurrency_limit'
LIMIT $1;

-- name: execution_parked_counts
-- Executions held back unrun now, by reason: parked (queued again with a park reason and not due
-- again yet: executions_parked) and waiting for a concurrency slot (executions_waiting_slot).
SELECT reason, count(*) AS n FROM executions
WHERE lane = 'active' AND status = 'queued' AND reason IN ('task_limit', 'rate_limited', 'breaker_open', 'admit_error')
  AND due_at > clock_timestamp()
GROUP BY reason
UNION ALL
SELECT 'concurrency_limit', count(*) FROM executions WHERE lane = 'pending' AND status = 'pending' AND reason = 'concurrency_limit';
