-- Every statement schedulerd sends to Postgres. Each starts with "-- name: <name>" and a purpose
-- line; Store has one method per name. Times come from clock_timestamp(): one clock (Postgres's)
-- judges due times and leases, whatever the replicas' own clocks say.

-- name: job_insert
-- Record a job definition.
INSERT INTO jobs (id, tenant, name, task, params, schedule_kind, run_at, cron, timezone,
                  misfire_policy, catch_up_limit, window_s, max_attempts, backoff_base_s,
                  backoff_factor, backoff_max_s, timeout_s)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
RETURNING *;

-- name: job_get
-- One job by id.
SELECT * FROM jobs WHERE id = $1;

-- name: execution_insert
-- Record one occurrence; queued right away when it falls inside the dispatch horizon
-- ($5, seconds), so the caller can ZADD it after commit. Returns nothing on a duplicate slot.
INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at)
SELECT $1, $2, $3, $4, $4, s.status, CASE WHEN s.status = 'queued' THEN clock_timestamp() END
FROM (SELECT CASE WHEN $4 <= clock_timestamp() + make_interval(secs => $5) THEN 'queued' ELSE 'pending' END AS status) s
ON CONFLICT (job_id, scheduled_for) DO NOTHING
RETURNING *;

-- name: execution_get
-- One execution by id.
SELECT * FROM executions WHERE id = $1;

-- name: execution_list
-- Executions newest first, optionally filtered by tenant, job and status.
SELECT * FROM executions
WHERE ($1::text IS NULL OR tenant = $1)
  AND ($2::uuid IS NULL OR job_id = $2)
  AND ($3::text IS NULL OR status = $3)
ORDER BY scheduled_for DESC, id DESC
LIMIT $4;

-- name: attempt_list
-- Every finished or abandoned attempt of one execution, oldest first.
SELECT * FROM attempts WHERE execution_id = $1 ORDER BY fence;

-- name: execution_dispatch_due
-- Move pending executions due within the horizon ($1, seconds) to queued, at most $2 of them,
-- and return them for ZADD. SKIP LOCKED lets several dispatchers share the work.
UPDATE executions e SET status = 'queued', enqueued_at = clock_timestamp()
FROM (SELECT id FROM executions
      WHERE status = 'pending' AND due_at <= clock_timestamp() + make_interval(secs => $1)
      ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED) d
WHERE e.id = d.id AND e.status = 'pending'
RETURNING e.id, e.due_at;

-- name: execution_claim_many
-- Claim a batch of popped ids: only a pending/queued row whose due time has come becomes
-- running, with attempt+1, fence+1 and a fresh lease ($2 seconds) held by worker $3.
-- Ids not returned were claimed by someone else, finished, or not yet due: drop them.
UPDATE executions e SET status = 'running', attempt = e.attempt + 1, fence = e.fence + 1,
       lease_until = clock_timestamp() + make_interval(secs => $2), worker = $3,
       started_at = clock_timestamp(), first_started_at = coalesce(e.first_started_at, clock_timestamp())
FROM jobs j
WHERE e.id = ANY($1::uuid[]) AND e.status IN ('pending', 'queued') AND e.due_at <= clock_timestamp()
  AND j.id = e.job_id
RETURNING e.id, e.job_id, e.tenant, e.scheduled_for, e.attempt, e.fence, e.started_at,
          j.task, j.params, j.timeout_s, j.max_attempts, j.backoff_base_s, j.backoff_factor, j.backoff_max_s;

-- name: execution_heartbeat_many
-- Extend the leases of running executions still held at the given fences; ids not returned
-- have lost their lease (reclaimed by the sweeper) and their handlers must stop.
UPDATE executions e SET lease_until = clock_timestamp() + make_interval(secs => $3)
FROM unnest($1::uuid[], $2::bigint[]) AS h(id, fence)
WHERE e.id = h.id AND e.fence = h.fence AND e.status = 'running'
RETURNING e.id;

-- name: execution_finish_many
-- Record the outcome of a batch of attempts, each only if its fence still holds. Per row:
-- $4 status to move to (succeeded | queued | pending | failed), $5 the attempt's outcome,
-- $6 its error, $7 the retry delay in seconds (NULL when not retrying). Writes the attempt row
-- in the same statement. Returns the rows that took effect, with due_at for re-enqueueing.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::float8[])
        AS i(id, fence, status, outcome, error, retry_delay_s)
), finished AS (
    UPDATE executions e SET
        status = i.status,
        due_at = CASE WHEN i.retry_delay_s IS NULL THEN e.due_at
                      ELSE clock_timestamp() + make_interval(secs => i.retry_delay_s) END,
        enqueued_at = CASE WHEN i.status = 'queued' THEN clock_timestamp() ELSE e.enqueued_at END,
        finished_at = CASE WHEN i.status IN ('succeeded', 'failed') THEN clock_timestamp() END,
        lease_until = NULL,
        last_error = coalesce(i.error, e.last_error)
    FROM input i
    WHERE e.id = i.id AND e.fence = i.fence AND e.status = 'running'
    RETURNING e.id, e.fence, e.attempt, e.worker, e.started_at, e.status, e.due_at
), recorded AS (
    INSERT INTO attempts (execution_id, attempt, fence, worker, started_at, finished_at, outcome, error)
    SELECT f.id, f.attempt, f.fence, f.worker, f.started_at, clock_timestamp(), i.outcome, i.error
    FROM finished f JOIN input i ON i.id = f.id
)
SELECT id, status, due_at FROM finished;

-- name: execution_reclaim_expired
-- Hand back executions whose lease expired (their worker died or froze): queued again, due now,
-- or failed when attempts are spent. Guarded by status, lease expiry and the fence read in the
-- same statement, so a completion that lands first is never undone. Records the lost attempt.
WITH expired AS (
    SELECT e.id, e.fence, j.max_attempts FROM executions e JOIN jobs j ON j.id = e.job_id
    WHERE e.status = 'running' AND e.lease_until < clock_timestamp()
    ORDER BY e.lease_until LIMIT $1 FOR UPDATE OF e SKIP LOCKED
), reclaimed AS (
    UPDATE executions e SET
        status = CASE WHEN e.attempt >= x.max_attempts THEN 'failed' ELSE 'queued' END,
        due_at = CASE WHEN e.attempt >= x.max_attempts THEN e.due_at ELSE clock_timestamp() END,
        enqueued_at = clock_timestamp(),
        finished_at = CASE WHEN e.attempt >= x.max_attempts THEN clock_timestamp() END,
        lease_until = NULL,
        last_error = 'lease expired: worker ' || coalesce(e.worker, '?') || ' stopped heartbeating'
    FROM expired x
    WHERE e.id = x.id AND e.fence = x.fence AND e.status = 'running' AND e.lease_until < clock_timestamp()
    RETURNING e.id, e.attempt, e.fence, e.worker, e.started_at, e.status, e.due_at, e.last_error
), recorded AS (
    INSERT INTO attempts (execution_id, attempt, fence, worker, started_at, finished_at, outcome, error)
    SELECT id, attempt, fence, worker, started_at, clock_timestamp(), 'lease_expired', last_error FROM reclaimed
)
SELECT id, status, due_at FROM reclaimed;

-- name: execution_queued_overdue
-- Queued executions overdue by more than $1 seconds, oldest first: candidates for a lost
-- Redis entry (the sweeper checks which are missing from the delay queue).
SELECT id, due_at FROM executions
WHERE status = 'queued' AND due_at < clock_timestamp() - make_interval(secs => $1)
ORDER BY due_at LIMIT $2;

-- name: execution_queued_page
-- All queued executions in (due_at, id) order after the given key: a full reconcile after
-- Redis lost its data pages through them.
SELECT id, due_at FROM executions
WHERE status = 'queued' AND (due_at, id) > ($1, $2)
ORDER BY due_at, id LIMIT $3;
