-- Every statement schedulerd sends to Postgres. Each starts with "-- name: <name>" and a purpose
-- line; Store has one method per name. Times come from clock_timestamp(): one clock (Postgres's)
-- judges due times and leases, whatever the replicas' own clocks say.

-- name: clock_now
-- Postgres's clock: the one clock that judges due times and leases.
SELECT clock_timestamp();

-- name: job_insert
-- Record a job definition.
INSERT INTO jobs (id, tenant, name, task, params, schedule_kind, run_at, cron, timezone,
                  misfire_policy, catch_up_limit, window_s, max_attempts, backoff_base_s,
                  backoff_factor, backoff_max_s, timeout_s, dst_repeated, dst_missing, tzdata_version, overlap)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
RETURNING *;

-- name: job_get
-- One job by id (deleted ones too: their history stays visible).
SELECT * FROM jobs WHERE id = $1;

-- name: job_list
-- Jobs newest first, optionally of one tenant; deleted ones only when asked.
SELECT * FROM jobs
WHERE ($1::text IS NULL OR tenant = $1) AND ($2 OR deleted_at IS NULL)
ORDER BY created_at DESC, id DESC
LIMIT $3;

-- name: job_lock
-- Lock one live job for a change of state (pause, resume, delete, materialise on create).
SELECT * FROM jobs WHERE id = $1 AND deleted_at IS NULL FOR UPDATE;

-- name: job_set_enabled
-- Pause or resume; resuming restarts the cursor at $3 (now), so a pause is never caught up.
-- Pausing records the note ($4) and who paused ($5); resuming clears them.
UPDATE jobs SET enabled = $2, materialised_to = CASE WHEN $2 THEN $3 ELSE materialised_to END,
       paused_note = CASE WHEN $2 THEN NULL ELSE $4 END, paused_by = CASE WHEN $2 THEN NULL ELSE $5 END,
       paused_at = CASE WHEN $2 THEN NULL ELSE clock_timestamp() END,
       updated_at = clock_timestamp()
WHERE id = $1 AND deleted_at IS NULL
RETURNING *;

-- name: job_delete
-- Soft-delete: the job stops, its history stays.
UPDATE jobs SET enabled = false, deleted_at = clock_timestamp(), updated_at = clock_timestamp()
WHERE id = $1 AND deleted_at IS NULL
RETURNING *;

-- name: job_due_for_materialising
-- Enabled cron jobs whose cursor is behind now + horizon ($1 seconds), most behind first, at
-- most $2; locked with SKIP LOCKED so replicas split the work. Call inside a transaction.
SELECT *, clock_timestamp() AS now FROM jobs
WHERE schedule_kind = 'cron' AND enabled AND deleted_at IS NULL
  AND (materialised_to IS NULL OR materialised_to < clock_timestamp() + make_interval(secs => $1))
ORDER BY materialised_to NULLS FIRST
LIMIT $2 FOR UPDATE SKIP LOCKED;

-- name: job_advance_cursor_many
-- Move materialisers' cursors: every occurrence up to the new value has been written, with tz
-- database $3. A job whose rows came from another version is marked 'mixed', which differs from
-- every installed version, so the next start recomputes it (a rolling upgrade loses nothing).
UPDATE jobs j SET materialised_to = c.materialised_to,
       tzdata_version = CASE WHEN j.tzdata_version = $3 THEN $3 ELSE 'mixed' END
FROM unnest($1::uuid[], $2::timestamptz[]) AS c(id, materialised_to)
WHERE j.id = c.id;

-- name: job_horizon
-- The materialiser horizon: the least-advanced cursor of enabled cron jobs (NULL: none).
SELECT min(materialised_to) AS horizon, clock_timestamp() AS now FROM jobs
WHERE schedule_kind = 'cron' AND enabled AND deleted_at IS NULL;

-- name: execution_insert_many
-- Record occurrences (ids, job, tenant, scheduled_for, due_at) of origin $7 (scheduled | trigger
-- | backfill); those due inside the dispatch horizon ($6 seconds) are queued at once. Duplicate
-- slots (job, instant, origin) are ignored, so materialising twice (or on two replicas) never
-- makes a second execution of one occurrence, and a backfill never takes a scheduled run's slot.
INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at, origin)
SELECT o.id, o.job_id, o.tenant, o.scheduled_for, o.due_at,
       CASE WHEN o.due_at <= clock_timestamp() + make_interval(secs => $6) THEN 'queued' ELSE 'pending' END,
       CASE WHEN o.due_at <= clock_timestamp() + make_interval(secs => $6) THEN clock_timestamp() END, $7
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::timestamptz[])
     AS o(id, job_id, tenant, scheduled_for, due_at)
ON CONFLICT (job_id, scheduled_for, origin) DO NOTHING
RETURNING *;

-- name: execution_cancel_for_job
-- Cancel a job's executions that have not started (pause, delete); $2 is the reason. A pause is
-- also the late reason of each (resume clears it from the future ones it revives).
WITH locked AS (
    SELECT id, scheduled_for FROM executions WHERE job_id = $1 AND status IN ('pending', 'queued')
    ORDER BY id FOR NO KEY UPDATE
)
UPDATE executions e SET status = 'cancelled', reason = $2, finished_at = clock_timestamp(),
       late_reason = CASE WHEN $2 = 'paused' THEN coalesce(e.late_reason, 'paused') ELSE e.late_reason END
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id;

-- name: execution_revive_for_job
-- On resume, give back the future slots a pause cancelled (their unique slot would otherwise
-- block re-materialising): pending again, or queued when inside the dispatch horizon ($2 s).
WITH locked AS (
    SELECT id, scheduled_for FROM executions
    WHERE job_id = $1 AND status = 'cancelled' AND reason = 'paused' AND scheduled_for > clock_timestamp()
    ORDER BY id FOR NO KEY UPDATE
)
UPDATE executions e SET reason = NULL, finished_at = NULL, late_reason = NULL,
       status = CASE WHEN e.due_at <= clock_timestamp() + make_interval(secs => $2) THEN 'queued' ELSE 'pending' END,
       enqueued_at = CASE WHEN e.due_at <= clock_timestamp() + make_interval(secs => $2) THEN clock_timestamp() END
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.*;

-- name: execution_missed
-- Unstarted first attempts of cron jobs overdue by more than the grace ($1 seconds), grouped by
-- job, oldest first, at most $2 (of the jobs in $3 only, when given): input to the misfire policy.
-- Rows already replayed late or redriven (reason set), manual triggers and backfills (late on
-- purpose) are excluded. scheduler_down: no replica with the worker role was alive at the
-- scheduled time (none had started, or all had been silent for more than $4 seconds): the
-- replicas table is the fleet's heartbeat record.
SELECT e.id, e.job_id, e.scheduled_for, j.misfire_policy, j.catch_up_limit,
       NOT EXISTS (SELECT 1 FROM replicas r WHERE 'worker' = ANY(r.roles) AND r.started_at <= e.scheduled_for
                     AND r.last_seen_at >= e.scheduled_for - make_interval(secs => $4)) AS scheduler_down
FROM executions e JOIN jobs j ON j.id = e.job_id
WHERE e.status IN ('pending', 'queued') AND e.attempt = 0 AND e.reason IS NULL AND e.origin = 'scheduled'
  AND e.due_at < clock_timestamp() - make_interval(secs => $1) AND j.schedule_kind = 'cron'
  AND ($3::uuid[] IS NULL OR e.job_id = ANY($3))
ORDER BY e.job_id, e.scheduled_for
LIMIT $2;

-- name: execution_skip_many
-- Mark missed occurrences skipped by the misfire policy, unless one was claimed meanwhile, each
-- with its late reason ($2). Returns the ids skipped and the late reason each carries. [$3, $4)
-- bounds their scheduled_for (the partitions to visit).
WITH locked AS (
    SELECT e.id, e.scheduled_for, s.late_reason FROM executions e JOIN unnest($1::uuid[], $2::text[]) AS s(id, late_reason) ON e.id = s.id
    WHERE e.status IN ('pending', 'queued') AND e.attempt = 0 AND e.scheduled_for >= $3 AND e.scheduled_for < $4
    ORDER BY e.id FOR NO KEY UPDATE OF e
)
UPDATE executions e SET status = 'skipped', reason = 'misfire_skip', finished_at = clock_timestamp(),
       late_reason = coalesce(e.late_reason, l.late_reason)
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id, e.late_reason;

-- name: execution_replay_many
-- Let missed occurrences run late, spread by the given delays (seconds) so a recovery is not a
-- second outage, each with its late reason ($3). Returns them for ZADD at their new due times.
-- [$4, $5) bounds scheduled_for.
WITH locked AS (
    SELECT e.id, e.scheduled_for, r.delay_s, r.late_reason
    FROM executions e JOIN unnest($1::uuid[], $2::float8[], $3::text[]) AS r(id, delay_s, late_reason) ON e.id = r.id
    WHERE e.status IN ('pending', 'queued') AND e.attempt = 0 AND e.scheduled_for >= $4 AND e.scheduled_for < $5
    ORDER BY e.id FOR NO KEY UPDATE OF e
)
UPDATE executions e SET status = 'queued', reason = 'late_replay', enqueued_at = clock_timestamp(),
       due_at = clock_timestamp() + make_interval(secs => l.delay_s), late_reason = coalesce(e.late_reason, l.late_reason)
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id, e.due_at, e.tenant, e.late_reason;

-- name: execution_get
-- One execution by id; [$2, $3) bounds its scheduled_for (from the id, when it carries it).
SELECT * FROM executions WHERE id = $1 AND scheduled_for >= $2 AND scheduled_for < $3;

-- name: execution_list
-- Executions newest first (by scheduled time), optionally filtered by tenant, job and status.
SELECT * FROM executions
WHERE ($1::text IS NULL OR tenant = $1)
  AND ($2::uuid IS NULL OR job_id = $2)
  AND ($3::text IS NULL OR status = $3)
ORDER BY scheduled_for DESC, id DESC
LIMIT $4;

-- name: attempt_list
-- Every finished or abandoned attempt of one execution, oldest first.
SELECT * FROM attempt_history WHERE execution_id = $1 AND scheduled_for >= $2 AND scheduled_for < $3 ORDER BY fence;

-- name: execution_dispatch_due
-- Move pending executions due within the horizon ($1, seconds) to queued, at most $2 of them,
-- and return them for ZADD. SKIP LOCKED lets several dispatchers share the work.
UPDATE executions e SET status = 'queued', enqueued_at = clock_timestamp()
FROM (SELECT id, scheduled_for FROM executions
      WHERE status = 'pending' AND due_at <= clock_timestamp() + make_interval(secs => $1)
      ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED) d
WHERE e.id = d.id AND e.scheduled_for = d.scheduled_for AND e.status = 'pending'
RETURNING e.id, e.due_at, e.tenant;

-- name: execution_claim_many
-- Claim a batch of popped ids: only a pending/queued row whose due time has come becomes
-- running, with attempt+1, fence+1 and a fresh lease ($2 seconds) held by worker $3.
-- Only jobs whose overlap policy is allow: the others go through execution_claim_guarded under
-- their job's lock. Ids not returned were claimed by someone else, finished, not yet due, or
-- belong to a guarded job (the worker passes those on). [$4, $5) bounds their scheduled_for, so
-- only their partitions are visited. A first attempt starting more than $6 s after it was due
-- records why it was late (schedulerd_late_reason, $7: the replica silence that counts as down);
-- marked_late returns the reason recorded now, for the metric. With $8 (adopt), rows already
-- running under worker $3 are taken again, attempt and fence unchanged: a claim whose reply was
-- lost to a broken connection committed nonetheless, and only this worker can know it holds none
-- of them in memory (it never claims an id it holds), so that fence has no other holder.
-- Rows are locked in id order (the `locked` CTE), as by every statement that writes several
-- executions, so no two such statements can deadlock. The CTE looks rows up by id alone (no join
-- to jobs): a join let the planner walk the (job_id, scheduled_for) index over a spike's single
-- instant, 200,000 rows filtered against 256 ids per claim (100 ms a batch).
WITH locked AS (
    SELECT e.id, e.scheduled_for,
           schedulerd_late_at_claim(e.attempt, e.late_reason, e.due_at, e.reason, e.scheduled_for, $6, $7) AS marked_late
    FROM executions e
    WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $4 AND e.scheduled_for < $5
      AND (e.status IN ('pending', 'queued') AND e.due_at <= clock_timestamp()
           OR $8 AND e.status = 'running' AND e.worker = $3)
    ORDER BY e.id FOR NO KEY UPDATE
)
UPDATE executions e SET status = 'running', attempt = e.attempt + (e.status <> 'running')::int,
       fence = e.fence + (e.status <> 'running')::int,
       lease_until = clock_timestamp() + make_interval(secs => $2), worker = $3,
       started_at = clock_timestamp(), first_started_at = coalesce(e.first_started_at, clock_timestamp()),
       late_reason = coalesce(l.marked_late, e.late_reason)
FROM locked l, jobs j
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for AND j.id = e.job_id AND j.overlap = 'allow'
RETURNING e.id, e.job_id, e.tenant, e.scheduled_for, e.due_at, e.attempt, e.fence, e.started_at,
          j.task, j.params, j.timeout_s, j.max_attempts, j.backoff_base_s, j.backoff_factor, j.backoff_max_s,
          j.overlap, l.marked_late;

-- name: execution_claim_due
-- The fallback while Redis is unreachable: claim up to $1 due executions straight from
-- Postgres, oldest first, like execution_claim_many (lease $2 s, worker $3, late after $4 s,
-- down after $5 s). SKIP LOCKED lets every worker poll at once without waiting on each other (so
-- it can never be part of a deadlock). Due executions of guarded jobs are returned unclaimed
-- (guarded = true, the other columns NULL) for execution_claim_guarded.
WITH d AS (
    SELECT id, scheduled_for, job_id,
           schedulerd_late_at_claim(attempt, late_reason, due_at, reason, scheduled_for, $4, $5) AS marked_late
    FROM executions
    WHERE status IN ('pending', 'queued') AND due_at <= clock_timestamp()
    ORDER BY due_at LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED
), claimed AS (
    UPDATE executions e SET status = 'running', attempt = e.attempt + 1, fence = e.fence + 1,
           lease_until = clock_timestamp() + make_interval(secs => $2), worker = $3,
           started_at = clock_timestamp(), first_started_at = coalesce(e.first_started_at, clock_timestamp()),
           late_reason = coalesce(d.marked_late, e.late_reason)
    FROM d, jobs j
    WHERE e.id = d.id AND e.scheduled_for = d.scheduled_for AND j.id = e.job_id AND j.overlap = 'allow'
    RETURNING e.id, e.job_id, e.tenant, e.scheduled_for, e.due_at, e.attempt, e.fence, e.started_at,
              j.task, j.params, j.timeout_s, j.max_attempts, j.backoff_base_s, j.backoff_factor, j.backoff_max_s,
              j.overlap, d.marked_late
)
SELECT claimed.*, false AS guarded FROM claimed
UNION ALL
SELECT d.id, d.job_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, j.overlap, NULL, true
FROM d JOIN jobs j ON j.id = d.job_id WHERE j.overlap <> 'allow';

-- name: execution_heartbeat_many
-- Extend the leases of running executions still held at the given fences; ids not returned
-- have lost their lease (reclaimed by the sweeper) and their handlers must stop; cancel_requested
-- says an overlap policy (cancel_other) asked the handler to stop. [$4, $5) bounds their
-- scheduled_for. Locks in id order (see execution_claim_many).
WITH locked AS (
    SELECT e.id, e.scheduled_for FROM executions e JOIN unnest($1::uuid[], $2::bigint[]) AS h(id, fence) ON e.id = h.id
    WHERE e.fence = h.fence AND e.status = 'running' AND e.scheduled_for >= $4 AND e.scheduled_for < $5
    ORDER BY e.id FOR NO KEY UPDATE OF e
)
UPDATE executions e SET lease_until = clock_timestamp() + make_interval(secs => $3)
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id, e.cancel_requested_at IS NOT NULL AS cancel_requested;

-- name: execution_finish_many
-- Record the outcome of a batch of attempts, each only if its fence still holds. Per row:
-- $3 status to move to (succeeded | queued | pending | failed | cancelled), $4 the attempt's outcome,
-- $5 its error, $6 the retry delay in seconds (NULL when not retrying), $7 its detail (what the
-- handler returned, JSON text). Writes the attempt row in the same statement, except for a
-- success: the execution row records that attempt (with its detail; see attempt_history).
-- Returns the rows that took effect, with due_at for re-enqueueing. [$8, $9) bounds their scheduled_for.
-- Locks in id order (see execution_claim_many).
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::float8[], $7::text[])
        AS i(id, fence, status, outcome, error, retry_delay_s, detail)
), locked AS (
    SELECT e.id, e.scheduled_for, i.status, i.outcome, i.error, i.retry_delay_s, i.detail
    FROM executions e JOIN input i ON e.id = i.id
    WHERE e.fence = i.fence AND e.status = 'running' AND e.scheduled_for >= $8 AND e.scheduled_for < $9
    ORDER BY e.id FOR NO KEY UPDATE OF e
), finished AS (
    UPDATE executions e SET
        status = l.status,
        due_at = CASE WHEN l.retry_delay_s IS NULL THEN e.due_at
                      ELSE clock_timestamp() + make_interval(secs => l.retry_delay_s) END,
        enqueued_at = CASE WHEN l.status = 'queued' THEN clock_timestamp() ELSE e.enqueued_at END,
        finished_at = CASE WHEN l.status IN ('succeeded', 'failed', 'cancelled') THEN clock_timestamp() END,
        lease_until = NULL,
        last_error = coalesce(l.error, e.last_error),
        reason = CASE WHEN l.status = 'cancelled' THEN 'overlap' ELSE e.reason END,
        detail = CASE WHEN l.outcome = 'succeeded' THEN l.detail END
    FROM locked l
    WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
    RETURNING e.id, e.fence, e.attempt, e.worker, e.started_at, e.status, e.due_at, e.tenant, e.scheduled_for,
              l.outcome, l.error, l.detail
), recorded AS (
    INSERT INTO attempts (execution_id, attempt, fence, worker, started_at, finished_at, outcome, error, detail, scheduled_for)
    SELECT id, attempt, fence, worker, started_at, clock_timestamp(), outcome, error, detail, scheduled_for FROM finished
    WHERE outcome <> 'succeeded'
)
SELECT id, status, due_at, tenant FROM finished;

-- name: execution_hand_back_many
-- A worker shutting down gives back executions it holds (fences in $2) that did not finish in
-- the grace: queued again, due now, and the attempt is not counted (the claim will count it
-- again). The interrupted attempt is recorded as 'handed_back'. [$3, $4) bounds scheduled_for.
-- Locks in id order (see execution_claim_many).
WITH locked AS (
    SELECT e.id, e.scheduled_for FROM executions e JOIN unnest($1::uuid[], $2::bigint[]) AS h(id, fence) ON e.id = h.id
    WHERE e.fence = h.fence AND e.status = 'running' AND e.scheduled_for >= $3 AND e.scheduled_for < $4
    ORDER BY e.id FOR NO KEY UPDATE OF e
), back AS (
    UPDATE executions e SET status = 'queued', attempt = e.attempt - 1, due_at = clock_timestamp(),
           enqueued_at = clock_timestamp(), lease_until = NULL
    FROM locked l
    WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
    RETURNING e.id, e.attempt + 1 AS attempt, e.fence, e.worker, e.started_at, e.due_at, e.tenant, e.scheduled_for
), recorded AS (
    INSERT INTO attempts (execution_id, attempt, fence, worker, started_at, finished_at, outcome, error, scheduled_for)
    SELECT id, attempt, fence, worker, started_at, clock_timestamp(), 'handed_back',
           'worker ' || coalesce(worker, '?') || ' shut down; handed back without using up an attempt', scheduled_for
    FROM back
)
SELECT id, due_at, tenant FROM back;

-- name: execution_reclaim_expired
-- Hand back executions whose lease expired (their worker died or froze): queued again after the
-- job's retry delay (full jitter, as after a failure), or failed when attempts are spent. The
-- jitter matters: executions that died together must not all come back at the same instant and
-- be claimed in one batch again, or a task that kills its worker would take the others in flight
-- beside it down with it, attempt after attempt. Guarded by status, lease expiry and the fence
-- read in the same statement, so a completion that lands first is never undone. Records the lost
-- attempt. An execution an overlap policy asked to stop (cancel_other) is cancelled, not retried.
-- A lease held by a replica that still reports itself alive (replicas.last_seen_at within $3 s)
-- is left to it for $2 s more: its writes are slow (a lock, a flaky connection), not gone, and
-- the outcome it holds would otherwise be thrown away and its handler run again.
WITH expired AS (
    SELECT e.id, e.scheduled_for, e.fence, j.max_attempts, j.backoff_base_s, j.backoff_factor, j.backoff_max_s
    FROM executions e JOIN jobs j ON j.id = e.job_id
    WHERE e.status = 'running' AND e.lease_until < clock_timestamp()
      AND (e.lease_until < clock_timestamp() - make_interval(secs => $2)
           OR NOT EXISTS (SELECT 1 FROM replicas r WHERE r.worker_id = e.worker
                          AND r.last_seen_at > clock_timestamp() - make_interval(secs => $3)))
    ORDER BY e.lease_until LIMIT $1 FOR UPDATE OF e SKIP LOCKED
), reclaimed AS (
    UPDATE executions e SET
        status = CASE WHEN e.cancel_requested_at IS NOT NULL THEN 'cancelled'
                      WHEN e.attempt >= x.max_attempts THEN 'failed' ELSE 'queued' END,
        reason = CASE WHEN e.cancel_requested_at IS NOT NULL THEN 'overlap' ELSE e.reason END,
        due_at = CASE WHEN e.attempt >= x.max_attempts OR e.cancel_requested_at IS NOT NULL THEN e.due_at
                      ELSE clock_timestamp() + make_interval(secs => random() * least(x.backoff_max_s,
                               x.backoff_base_s * power(x.backoff_factor, least(e.attempt - 1, 64)))) END,
        enqueued_at = clock_timestamp(),
        finished_at = CASE WHEN e.attempt >= x.max_attempts OR e.cancel_requested_at IS NOT NULL THEN clock_timestamp() END,
        lease_until = NULL,
        last_error = 'lease expired: worker ' || coalesce(e.worker, '?') || ' stopped heartbeating'
    FROM expired x
    WHERE e.id = x.id AND e.scheduled_for = x.scheduled_for AND e.fence = x.fence AND e.status = 'running'
      AND e.lease_until < clock_timestamp()
    RETURNING e.id, e.job_id, e.tenant, e.attempt, e.fence, e.worker, e.started_at, e.status, e.due_at, e.last_error,
              e.scheduled_for
), recorded AS (
    INSERT INTO attempts (execution_id, attempt, fence, worker, started_at, finished_at, outcome, error, scheduled_for)
    SELECT id, attempt, fence, worker, started_at, clock_timestamp(), 'lease_expired', last_error, scheduled_for
    FROM reclaimed
)
SELECT id, job_id, tenant, attempt, fence, worker, status, due_at FROM reclaimed;

-- name: execution_queued_overdue
-- Queued executions overdue by more than $1 seconds, oldest first: candidates for a lost
-- Redis entry (the sweeper checks which are missing from the delay queue).
SELECT id, due_at, tenant FROM executions
WHERE status = 'queued' AND due_at < clock_timestamp() - make_interval(secs => $1)
ORDER BY due_at LIMIT $2;

-- name: execution_queued_page
-- All queued executions in (due_at, id) order after the given key: a full reconcile after
-- Redis lost its data pages through them.
SELECT id, due_at, tenant FROM executions
WHERE status = 'queued' AND (due_at, id) > ($1, $2)
ORDER BY due_at, id LIMIT $3;

-- name: execution_overview
-- For an operator's one screen: the oldest queued due time, and the last hour's executions by
-- status (bounded by scheduled_for so it never scans the whole history).
SELECT (SELECT min(due_at) FROM executions WHERE status = 'queued') AS oldest_queued_due_at,
       (SELECT min(due_at) FROM executions WHERE status = 'pending') AS oldest_pending_due_at,
       (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM (
            SELECT status, count(*) AS n FROM executions
            WHERE scheduled_for > clock_timestamp() - interval '1 hour' AND scheduled_for <= clock_timestamp()
            GROUP BY status) s) AS last_hour_by_status,
       clock_timestamp() AS now;

-- name: tenant_insert
-- Register a tenant; returns nothing when the name is taken.
INSERT INTO tenants (name) VALUES ($1) ON CONFLICT DO NOTHING RETURNING name, created_at;

-- name: token_insert
-- Record a token's hash ($3) for tenant $2 under id $1; returns nothing when there is no such tenant.
INSERT INTO api_tokens (id, tenant, token_hash)
SELECT $1, name, $3 FROM tenants WHERE name = $2
RETURNING id;

-- name: token_authenticate
-- The live token with this hash: its id and tenant. Notes its use, at most once a minute so a
-- busy client does not turn every read into a write.
WITH found AS (
    SELECT id, tenant, last_used_at FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL
), touched AS (
    UPDATE api_tokens t SET last_used_at = clock_timestamp() FROM found f
    WHERE t.id = f.id AND (f.last_used_at IS NULL OR f.last_used_at < clock_timestamp() - interval '1 minute')
)
SELECT id, tenant FROM found;

-- name: token_list
-- Tenant $1's tokens, newest first: id, when made, last used (to the minute), revoked.
SELECT id, tenant, created_at, last_used_at, revoked_at FROM api_tokens
WHERE tenant = $1
ORDER BY created_at DESC, id DESC;

-- name: token_revoke
-- Revoke token $1 (only tenant $2's when $2 is not null); returns it, or nothing when there is no
-- such token. Revoking a revoked token keeps its first revocation time.
UPDATE api_tokens SET revoked_at = coalesce(revoked_at, clock_timestamp())
WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)
RETURNING id, tenant, created_at, last_used_at, revoked_at;

-- name: idempotency_prune
-- Delete up to $2 idempotency keys older than $1 seconds (they replay nothing any more); returns
-- how many went, so the caller repeats while a batch comes back full.
WITH expired AS (
    SELECT tenant, key FROM idempotency_keys
    WHERE created_at <= clock_timestamp() - make_interval(secs => $1)
    ORDER BY created_at
    LIMIT $2
)
DELETE FROM idempotency_keys k USING expired e
WHERE k.tenant = e.tenant AND k.key = e.key
  AND k.created_at <= clock_timestamp() - make_interval(secs => $1);

-- name: idempotency_get
-- The recorded first result of tenant $1's create with key $2, if younger than $3 seconds.
SELECT request_hash, job_id, response FROM idempotency_keys
WHERE tenant = $1 AND key = $2 AND created_at > clock_timestamp() - make_interval(secs => $3);

-- name: idempotency_insert
-- Record a create's key ($2), request hash, job and response for tenant $1; an entry older than
-- $6 seconds is replaced. Returns nothing when a live entry holds the key (a concurrent
-- duplicate waits here on the key's row lock until the first commits).
INSERT INTO idempotency_keys (tenant, key, request_hash, job_id, response)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant, key) DO UPDATE
    SET request_hash = excluded.request_hash, job_id = excluded.job_id, response = excluded.response,
        created_at = clock_timestamp()
    WHERE idempotency_keys.created_at <= clock_timestamp() - make_interval(secs => $6)
RETURNING key;

-- name: job_page
-- One tenant's jobs newest first, after the cursor ($3 created_at, $4 id); deleted ones when $2.
SELECT * FROM jobs
WHERE tenant = $1 AND ($2 OR deleted_at IS NULL) AND (created_at, id) < ($3, $4)
ORDER BY created_at DESC, id DESC
LIMIT $5;

-- name: job_last_executions
-- For each job in $1, its latest execution that started or was skipped (the "last outcome").
SELECT j.id AS job_id, l.id, l.status, l.scheduled_for, l.finished_at
FROM unnest($1::uuid[]) AS j(id)
CROSS JOIN LATERAL (
    SELECT e.id, e.status, e.scheduled_for, e.finished_at FROM executions e
    WHERE e.job_id = j.id AND e.status IN ('running', 'succeeded', 'failed', 'skipped')
    ORDER BY e.scheduled_for DESC LIMIT 1
) l;

-- name: execution_page
-- One tenant's executions newest first (scheduled_for, id), strictly after the cursor ($6, $7),
-- optionally of one job ($2) and status ($3), scheduled in [$4, $5), and only past ones when $9:
-- started or settled (not pending or queued) and scheduled by now (a claim needs the row due, so
-- every started one is), so a paused job's cancelled future slots do not lead. The "by now" bound
-- is an index condition (now() is stable): the scan starts at the present, not the horizon.
-- Keyset pagination on executions_tenant_recent: a row inserted meanwhile never shifts a later page.
SELECT * FROM executions
WHERE tenant = $1 AND ($2::uuid IS NULL OR job_id = $2) AND ($3::text IS NULL OR status = $3)
  AND scheduled_for >= $4 AND scheduled_for < $5
  AND (scheduled_for, id) < ($6, $7)
  AND scheduled_for <= CASE WHEN $9::boolean THEN now() ELSE 'infinity'::timestamptz END
  AND (NOT $9::boolean OR status NOT IN ('pending', 'queued'))
ORDER BY scheduled_for DESC, id DESC
LIMIT $8;

-- name: execution_page_upcoming
-- One tenant's executions not yet started (pending or queued, retries included), soonest
-- scheduled first, strictly after the cursor ($6, $7); optionally of one job ($2) and status ($3),
-- scheduled in [$4, $5). The same index as execution_page, read forwards.
SELECT * FROM executions
WHERE tenant = $1 AND ($2::uuid IS NULL OR job_id = $2) AND ($3::text IS NULL OR status = $3)
  AND status IN ('pending', 'queued')
  AND scheduled_for >= $4 AND scheduled_for < $5
  AND (scheduled_for, id) > ($6, $7)
ORDER BY scheduled_for, id
LIMIT $8;

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
-- executions_scheduled_for over the last $1 minutes, so its cost grows with the fleet's rate.
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
SELECT least((SELECT min(due_at) FROM executions WHERE status = 'queued'),
             (SELECT min(due_at) FROM executions WHERE status = 'pending')) AS oldest_due_at,
       clock_timestamp() AS now;

-- name: replica_report
-- A replica says it is alive (every observer pass); rows of replicas gone for a day are removed.
WITH gone AS (DELETE FROM replicas WHERE last_seen_at < clock_timestamp() - interval '1 day')
INSERT INTO replicas (worker_id, hostname, pid, roles, version, started_at, last_seen_at)
VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp())
ON CONFLICT (worker_id) DO UPDATE SET hostname = excluded.hostname, pid = excluded.pid, roles = excluded.roles,
    version = excluded.version, started_at = excluded.started_at, last_seen_at = excluded.last_seen_at;

-- name: replica_list
-- Replicas seen within the last $1 seconds, most recently started first.
SELECT *, clock_timestamp() - last_seen_at AS seen_ago FROM replicas
WHERE last_seen_at > clock_timestamp() - make_interval(secs => $1)
ORDER BY started_at DESC;

-- name: execution_due_soon
-- Executions not yet started that fall due within $1 seconds (pending or queued; retries included).
SELECT (SELECT count(*) FROM executions WHERE status = 'pending' AND due_at <= clock_timestamp() + make_interval(secs => $1))
     + (SELECT count(*) FROM executions WHERE status = 'queued' AND due_at <= clock_timestamp() + make_interval(secs => $1));

-- name: execution_recent_lag
-- Start-lag percentiles (seconds) of first attempts started in the last $1 seconds, and failures
-- (terminal) finished in the last hour.
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY lag) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY lag) AS p95,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY lag) AS p99,
       count(*) AS started,
       (SELECT count(*) FROM executions WHERE status = 'failed' AND finished_at > clock_timestamp() - interval '1 hour'
           AND scheduled_for > clock_timestamp() - interval '1 day') AS failed_last_hour
FROM (SELECT extract(epoch FROM first_started_at - scheduled_for) AS lag FROM executions
      WHERE scheduled_for > clock_timestamp() - make_interval(secs => $1) - interval '1 hour'
        AND first_started_at > clock_timestamp() - make_interval(secs => $1)) recent;

-- name: migration_applied
-- Migrations recorded by yoyo: /readyz compares them with the ones this code ships.
SELECT migration_id FROM _yoyo_migration;

-- name: execution_park_many
-- Hand back claimed executions (fences in $2) without running them: a task over its concurrency
-- limit, or an open circuit breaker. Queued again, due after their delay ($3 seconds), attempt not
-- used up, no attempt recorded; reason $4 (task_limit | breaker_open) says why, and keeps a parked
-- cron occurrence from being judged a misfire. A first attempt's start time is cleared: it never
-- started (a redriven execution's attempt 1 is not its first: it keeps it).
-- A first attempt whose new due time is past its grace ($5 s, counted from scheduled_for plus the
-- job's smearing window: repeated parks do not drift) gets late reason $6 if it has none;
-- newly_late says which did, for the metric. [$7, $8) bounds scheduled_for.
-- Locks in id order (see execution_claim_many).
WITH locked AS (
    SELECT e.id, e.scheduled_for, p.delay_s,
           CASE WHEN e.late_reason IS NULL AND e.attempt = 1
                 AND clock_timestamp() + make_interval(secs => p.delay_s) > e.scheduled_for + make_interval(secs => j.window_s + $5)
                THEN $6 END AS newly_late
    FROM executions e JOIN unnest($1::uuid[], $2::bigint[], $3::float8[]) AS p(id, fence, delay_s) ON e.id = p.id
         JOIN jobs j ON j.id = e.job_id
    WHERE e.fence = p.fence AND e.status = 'running' AND e.scheduled_for >= $7 AND e.scheduled_for < $8
    ORDER BY e.id FOR NO KEY UPDATE OF e
)
UPDATE executions e SET status = 'queued', attempt = e.attempt - 1, reason = $4,
       due_at = clock_timestamp() + make_interval(secs => l.delay_s), enqueued_at = clock_timestamp(),
       lease_until = NULL, first_started_at = CASE WHEN e.attempt = 1 AND e.redrives = 0 THEN NULL ELSE e.first_started_at END,
       late_reason = coalesce(e.late_reason, l.newly_late)
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id, e.due_at, e.tenant, l.newly_late IS NOT NULL AS newly_late;

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
-- another replica claimed (allow jobs) cost one cheap statement, as before.
SELECT e.id FROM executions e JOIN jobs j ON j.id = e.job_id
WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $2 AND e.scheduled_for < $3 AND j.overlap <> 'allow';

-- name: job_lock_many
-- Lock these jobs in id order (a release after an execution of theirs stopped). Inside a transaction.
SELECT id FROM jobs WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE;

-- name: execution_overlap_state
-- Under job_lock_overlap: the due, unstarted executions among $1 of locked (guarded) jobs, oldest
-- first per job, with the job's policy, whether its last started execution still runs (busy, and
-- whether it was asked to stop) and which occurrence waits for it, if one still does.
SELECT e.id, e.job_id, e.scheduled_for, j.overlap, coalesce(r.status = 'running', false) AS busy,
       CASE WHEN r.status = 'running' THEN r.scheduled_for END AS running_for,
       r.cancel_requested_at IS NOT NULL AS cancel_requested,
       CASE WHEN w.status = 'pending' AND w.reason = 'overlap_buffered' THEN w.id END AS waiting_id
FROM executions e JOIN jobs j ON j.id = e.job_id
LEFT JOIN executions r ON r.id = j.overlap_running AND r.scheduled_for = j.overlap_running_for
LEFT JOIN executions w ON w.id = j.overlap_waiting AND w.scheduled_for = j.overlap_waiting_for
WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $3 AND e.scheduled_for < $4
  AND e.status IN ('pending', 'queued') AND e.due_at <= clock_timestamp() AND j.id = ANY($2::uuid[])
ORDER BY e.job_id, e.scheduled_for, e.id;

-- name: execution_claim_guarded
-- Under job_lock_overlap: claim executions an overlap verdict started (as execution_claim_many:
-- lease $2 s, worker $3, late after $6 s, down after $7 s) and record each as its job's running
-- execution. Locks in id order (see execution_claim_many).
WITH locked AS (
    SELECT e.id, e.scheduled_for,
           schedulerd_late_at_claim(e.attempt, e.late_reason, e.due_at, e.reason, e.scheduled_for, $6, $7) AS marked_late
    FROM executions e
    WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $4 AND e.scheduled_for < $5
      AND e.status IN ('pending', 'queued') AND e.due_at <= clock_timestamp()
    ORDER BY e.id FOR NO KEY UPDATE OF e
), claimed AS (
    UPDATE executions e SET status = 'running', attempt = e.attempt + 1, fence = e.fence + 1,
           lease_until = clock_timestamp() + make_interval(secs => $2), worker = $3,
           started_at = clock_timestamp(), first_started_at = coalesce(e.first_started_at, clock_timestamp()),
           late_reason = coalesce(l.marked_late, e.late_reason)
    FROM locked l, jobs j
    WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for AND j.id = e.job_id
    RETURNING e.id, e.job_id, e.tenant, e.scheduled_for, e.due_at, e.attempt, e.fence, e.started_at,
              j.task, j.params, j.timeout_s, j.max_attempts, j.backoff_base_s, j.backoff_factor, j.backoff_max_s,
              j.overlap, l.marked_late
), held AS (
    UPDATE jobs j SET overlap_running = c.id, overlap_running_for = c.scheduled_for FROM claimed c WHERE j.id = c.job_id
)
SELECT * FROM claimed;

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
    WHERE e.status = 'pending' AND e.reason = 'overlap_buffered'
    ORDER BY e.id FOR NO KEY UPDATE OF e
)
UPDATE executions e SET status = 'queued', due_at = clock_timestamp(), enqueued_at = clock_timestamp()
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id, e.due_at, e.tenant, l.overlap;

-- name: job_overlap_stalled
-- The sweeper's safety net: jobs with a waiting occurrence whose last started execution no longer
-- runs (its worker died after finishing, or it was reclaimed, parked or handed back), at most $1.
SELECT j.id FROM jobs j
WHERE j.overlap_waiting IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM executions r WHERE r.id = j.overlap_running
                  AND r.scheduled_for = j.overlap_running_for AND r.status = 'running')
LIMIT $1;

-- name: job_recent_durations
-- For each job in $1, the durations (seconds) of the attempts of its latest started executions
-- that ran their course (succeeded, failed, timed out), newest first, at most $2 per job: the
-- overrun warning's sample. Walks the (job_id, scheduled_for) index backwards from now (now(), not
-- clock_timestamp(): a stable value is an index condition, so the 6 h of future rows are skipped).
SELECT j.id AS job_id, d.duration_s
FROM unnest($1::uuid[]) AS j(id)
CROSS JOIN LATERAL (
    SELECT extract(epoch FROM a.finished_at - a.started_at)::float8 AS duration_s
    FROM executions e JOIN attempt_history a ON a.execution_id = e.id AND a.scheduled_for = e.scheduled_for
    WHERE e.job_id = j.id AND e.scheduled_for <= now()
      AND a.outcome IN ('succeeded', 'failed', 'timed_out')
    ORDER BY e.scheduled_for DESC, a.fence DESC
    LIMIT $2
) d;

-- name: maintenance_lock
-- Retention runs on one replica at a time: a transaction-scoped advisory lock (held: false when
-- another replica has it). In the same transaction DDL waits at most $1 for a table lock and then
-- fails, rather than queueing every worker's update behind it.
SELECT set_config('lock_timeout', $1, true) AS lock_timeout,
       pg_try_advisory_xact_lock(hashtext('schedulerd.retention')) AS held;

-- name: partition_ensure
-- Create UTC day $1's executions and attempts partitions (moving in rows waiting in the default
-- partitions); true when created, false when they existed.
SELECT schedulerd_ensure_partition($1);

-- name: partition_days
-- The UTC days that have their own partition, oldest first.
SELECT to_date(substring(c.relname FROM 13), 'YYYYMMDD') AS day
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'executions'::regclass AND c.relname ~ '^executions_p[0-9]{8}$'
ORDER BY 1;

-- name: partition_default_days
-- UTC days before $1 whose executions wait in the default partition: they need their own now.
SELECT DISTINCT (scheduled_for AT TIME ZONE 'UTC')::date AS day FROM executions_default
WHERE scheduled_for < ($1::date)::timestamp AT TIME ZONE 'UTC'
ORDER BY 1;

-- name: partition_drop
-- Drop UTC day $1's executions and attempts partitions.
SELECT schedulerd_drop_partition($1);

-- name: execution_unfinished_between
-- Executions scheduled in [$1, $2) not yet final (the partial indexes answer).
SELECT (SELECT count(*) FROM executions WHERE status = 'pending' AND scheduled_for >= $1 AND scheduled_for < $2)
     + (SELECT count(*) FROM executions WHERE status = 'queued' AND scheduled_for >= $1 AND scheduled_for < $2)
     + (SELECT count(*) FROM executions WHERE status = 'running' AND scheduled_for >= $1 AND scheduled_for < $2);

-- name: partition_export_executions
-- One day's executions for export before its partition is dropped.
SELECT * FROM executions WHERE scheduled_for >= $1 AND scheduled_for < $2 ORDER BY scheduled_for, id;

-- name: partition_export_attempts
-- One day's attempts for export before its partition is dropped.
SELECT * FROM attempt_history WHERE scheduled_for >= $1 AND scheduled_for < $2 ORDER BY scheduled_for, execution_id, fence;

-- name: execution_failed_page
-- The dead-letter list: failed executions, most recently failed first, of tenant $1 (NULL: every
-- tenant, for an operator), optionally of job $2 and task $3, whose last error contains $4
-- (case-insensitive), failed in [$5, $6), strictly after the cursor ($7 finished_at, $8 id).
SELECT e.*, j.task FROM executions e JOIN jobs j ON j.id = e.job_id
WHERE e.status = 'failed' AND ($1::text IS NULL OR e.tenant = $1)
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
-- being judged a misfire. Each redrive is recorded in redrives by $5. Returns them for ZADD.
WITH locked AS (  -- in id order, as every statement writing several executions
    SELECT e.id, e.attempt, e.last_error, t.n
    FROM unnest($1::uuid[]) WITH ORDINALITY AS t(id, n) JOIN executions e ON e.id = t.id JOIN jobs j ON j.id = e.job_id
    WHERE e.status = 'failed' AND ($2::text IS NULL OR e.tenant = $2) AND j.enabled
    ORDER BY e.id FOR NO KEY UPDATE OF e
), target AS (
    SELECT id, attempt, last_error, row_number() OVER (ORDER BY n) - 1 AS n FROM locked
), redriven AS (
    UPDATE executions e SET
        status = CASE WHEN t.n / $3 <= $4 THEN 'queued' ELSE 'pending' END,
        enqueued_at = CASE WHEN t.n / $3 <= $4 THEN clock_timestamp() END,
        due_at = clock_timestamp() + make_interval(secs => t.n / $3),
        attempt = 0, fence = e.fence + 1, redrives = e.redrives + 1, reason = 'redrive',
        finished_at = NULL, lease_until = NULL
    FROM target t
    WHERE e.id = t.id AND e.status = 'failed'
    RETURNING e.id, e.fence, e.status, e.due_at, e.tenant, t.attempt AS attempts_before, t.last_error AS error_before
), recorded AS (
    INSERT INTO redrives (execution_id, fence, redriven_by, attempts_before, error_before)
    SELECT id, fence, $5, attempts_before, error_before FROM redriven
)
SELECT id, status, due_at, tenant FROM redriven;

-- name: redrive_list
-- Every redrive of one execution, oldest first.
SELECT * FROM redrives WHERE execution_id = $1 ORDER BY fence;



-- name: execution_late_page
-- Occurrences that did not start within their grace ($1 s), newest scheduled first, scheduled in
-- [$4, now - grace), optionally of tenant $2, job $3 and late reason $5, at most $6: rows with a
-- recorded late reason (executions_late index), then first attempts still waiting past their
-- grace with none recorded yet (the due indexes), given the reason they would get now ($7: the
-- replica silence that counts as down, seconds). The waiting ones are cut to $6 before their
-- reason is worked out, unless that reason is the filter: a backlog of 100,000 costs a top-N sort.
WITH bounds AS (SELECT clock_timestamp() - make_interval(secs => $1) AS late_before),
waiting AS (
    SELECT * FROM (
        SELECT e.* FROM executions e, bounds b
        WHERE e.status = 'pending' AND e.due_at < b.late_before AND e.attempt = 0 AND e.late_reason IS NULL
          AND e.scheduled_for >= $4 AND ($2::text IS NULL OR e.tenant = $2) AND ($3::uuid IS NULL OR e.job_id = $3)
        UNION ALL
        SELECT e.* FROM executions e, bounds b
        WHERE e.status = 'queued' AND e.due_at < b.late_before AND e.attempt = 0 AND e.late_reason IS NULL
          AND e.scheduled_for >= $4 AND ($2::text IS NULL OR e.tenant = $2) AND ($3::uuid IS NULL OR e.job_id = $3)
    ) w
    ORDER BY scheduled_for DESC, id DESC
    LIMIT CASE WHEN $5::text IS NULL OR $5 IN ('breaker_open', 'tenant_cap') THEN $6::bigint END  -- NULL: no limit
)
SELECT * FROM (
    SELECT e.*, e.late_reason AS why FROM executions e, bounds b
    WHERE e.late_reason IS NOT NULL AND e.scheduled_for >= $4 AND e.scheduled_for < b.late_before
      AND ($2::text IS NULL OR e.tenant = $2) AND ($3::uuid IS NULL OR e.job_id = $3)
      AND ($5::text IS NULL OR e.late_reason = $5)
    UNION ALL
    SELECT * FROM (
        SELECT w.*, schedulerd_late_reason(w.reason, w.scheduled_for, $7) AS why
        FROM waiting w
    ) judged WHERE ($5::text IS NULL OR judged.why = $5)
) late
ORDER BY scheduled_for DESC, id DESC
LIMIT $6;

-- name: execution_near
-- Job $1's execution scheduled closest to $2 within $3 seconds either side (an earlier one wins
-- a tie), for "why didn't job X run at T?".
SELECT * FROM executions
WHERE job_id = $1 AND scheduled_for >= $2::timestamptz - make_interval(secs => $3)
  AND scheduled_for <= $2::timestamptz + make_interval(secs => $3)
ORDER BY abs(extract(epoch FROM scheduled_for - $2::timestamptz)), scheduled_for
LIMIT 1;

-- name: execution_due_forecast
-- Known future load: executions not yet started (pending or queued, retries included) falling
-- due in the next $1, $2, $3 and $4 seconds ($4 the widest), per tenant (only tenant $5 when
-- given). One range scan of each partial due index.
WITH now AS (SELECT clock_timestamp() AS t),
due AS (
    SELECT tenant, due_at FROM executions, now
    WHERE status = 'pending' AND due_at > now.t AND due_at <= now.t + make_interval(secs => $4)
      AND ($5::text IS NULL OR tenant = $5)
    UNION ALL
    SELECT tenant, due_at FROM executions, now
    WHERE status = 'queued' AND due_at > now.t AND due_at <= now.t + make_interval(secs => $4)
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

-- name: execution_late_counts
-- Late or missed occurrences with a recorded late reason scheduled in the last $1 seconds, per
-- reason (schedulerd status): a range scan of the executions_late index.
SELECT late_reason, count(*) AS n FROM executions
WHERE late_reason IS NOT NULL AND scheduled_for > clock_timestamp() - make_interval(secs => $1)
GROUP BY late_reason;
-- name: tz_lock
-- Hold the tz recompute lock for this session (waits): one replica recomputes at a time.
SELECT pg_advisory_lock(hashtext('schedulerd.tz_recompute'));

-- name: tz_unlock
-- Release the tz recompute lock.
SELECT pg_advisory_unlock(hashtext('schedulerd.tz_recompute'));

-- name: job_tz_stale
-- Live cron jobs (paused too) whose occurrences were resolved with a tz database other than $1,
-- after id $2, at most $3, locked against the materialiser. Call inside a transaction.
SELECT *, clock_timestamp() AS now FROM jobs
WHERE schedule_kind = 'cron' AND deleted_at IS NULL AND tzdata_version IS DISTINCT FROM $1 AND id > $2
ORDER BY id LIMIT $3 FOR UPDATE;

-- name: execution_future_unstarted
-- These jobs' occurrences scheduled after $2 and never started (pending or queued first
-- attempts; also those a pause cancelled, which a resume would revive), by job and time.
SELECT job_id, id, scheduled_for FROM executions
WHERE job_id = ANY($1::uuid[]) AND scheduled_for > $2 AND attempt = 0
  AND ((status IN ('pending', 'queued') AND reason IS NULL) OR (status = 'cancelled' AND reason = 'paused'))
ORDER BY job_id, scheduled_for;

-- name: execution_delete_tz_stale
-- Delete occurrences (id $1, scheduled_for $2) the new tz rules no longer produce. They never
-- started, so no history is lost, and their slots are free should the rules change back. A row
-- claimed meanwhile is left alone. Their Redis entries need no removal: the claim finds no row.
-- Returns the ids deleted.
WITH locked AS (
    SELECT e.id, e.scheduled_for FROM executions e
    JOIN unnest($1::uuid[], $2::timestamptz[]) AS d(id, scheduled_for) ON e.id = d.id AND e.scheduled_for = d.scheduled_for
    WHERE e.attempt = 0
      AND ((e.status IN ('pending', 'queued') AND e.reason IS NULL) OR (e.status = 'cancelled' AND e.reason = 'paused'))
    ORDER BY e.id FOR UPDATE OF e
)
DELETE FROM executions e USING locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id;

-- name: job_set_tzdata_version
-- Record that these jobs' written occurrences now match tz database $2.
UPDATE jobs SET tzdata_version = $2 WHERE id = ANY($1::uuid[]);

-- name: tz_recompute_insert
-- Start the record of a recompute with tz database $1 (from $2) by worker $3.
INSERT INTO tz_recomputes (tzdata_version, tzdata_source, worker) VALUES ($1, $2, $3) RETURNING *;

-- name: tz_recompute_finish
-- Close a recompute's record with its counts.
UPDATE tz_recomputes SET finished_at = clock_timestamp(), jobs_checked = $2, jobs_moved = $3 WHERE id = $1;

-- name: tz_moved_job_insert_many
-- Record the jobs a recompute moved: (job, tenant, old version, removed, added, moves JSON).
INSERT INTO tz_moved_jobs (recompute_id, job_id, tenant, old_version, removed, added, moves)
SELECT $1, m.job_id, m.tenant, m.old_version, m.removed, m.added, m.moves::jsonb
FROM unnest($2::uuid[], $3::text[], $4::text[], $5::int[], $6::int[], $7::text[])
     AS m(job_id, tenant, old_version, removed, added, moves);

-- name: tz_recompute_last
-- The latest recompute (that found jobs to check).
SELECT * FROM tz_recomputes ORDER BY id DESC LIMIT 1;

-- name: tz_moved_job_list
-- The jobs recompute $1 moved, of tenant $2 only when given, at most $3.
SELECT * FROM tz_moved_jobs
WHERE recompute_id = $1 AND ($2::text IS NULL OR tenant = $2)
ORDER BY tenant, job_id LIMIT $3;

-- name: job_tzdata_versions
-- Live cron jobs per recorded tz database version (NULL: never recorded).
SELECT tzdata_version, count(*) AS jobs FROM jobs
WHERE schedule_kind = 'cron' AND deleted_at IS NULL
GROUP BY tzdata_version ORDER BY tzdata_version NULLS FIRST;

-- name: job_insert_many
-- Record many job definitions in one statement (the front door's batches): one array per column,
-- params as JSON text, all created at $22 (the batch's instant on Postgres's clock, which the
-- caller read), so nothing needs to come back.
INSERT INTO jobs (id, tenant, name, task, params, schedule_kind, run_at, cron, timezone,
                  misfire_policy, catch_up_limit, window_s, max_attempts, backoff_base_s,
                  backoff_factor, backoff_max_s, timeout_s, dst_repeated, dst_missing, tzdata_version, overlap,
                  created_at, updated_at)
SELECT j.id, j.tenant, j.name, j.task, j.params::jsonb, j.schedule_kind, j.run_at, j.cron, j.timezone,
       j.misfire_policy, j.catch_up_limit, j.window_s, j.max_attempts, j.backoff_base_s,
       j.backoff_factor, j.backoff_max_s, j.timeout_s, j.dst_repeated, j.dst_missing, j.tzdata_version, j.overlap,
       $22, $22
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::text[],
            $9::text[], $10::text[], $11::int[], $12::float8[], $13::int[], $14::float8[], $15::float8[],
            $16::float8[], $17::float8[], $18::text[], $19::text[], $20::text[], $21::text[])
     AS j(id, tenant, name, task, params, schedule_kind, run_at, cron, timezone, misfire_policy, catch_up_limit,
          window_s, max_attempts, backoff_base_s, backoff_factor, backoff_max_s, timeout_s, dst_repeated,
          dst_missing, tzdata_version, overlap);

-- name: execution_insert_first_many
-- The one execution of each new one-off job: (id, job, tenant, instant) rows, scheduled and due at
-- that instant. Those due inside the dispatch horizon ($5 s) are queued for the caller's ZADD
-- after its commit, unless $6 is false: inside an application's own transaction the commit is
-- not ours to see, so they stay pending and the dispatcher enqueues them once they are visible.
INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at)
SELECT o.id, o.job_id, o.tenant, o.at, o.at,
       CASE WHEN $6 AND o.at <= clock_timestamp() + make_interval(secs => $5) THEN 'queued' ELSE 'pending' END,
       CASE WHEN $6 AND o.at <= clock_timestamp() + make_interval(secs => $5) THEN clock_timestamp() END
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[]) AS o(id, job_id, tenant, at)
RETURNING id, status;

-- name: execution_committed
-- Which of these executions (ids, with their tenants) exist and still wait to start: after an
-- application's transaction, the ones it committed (a rolled-back enqueue left none).
SELECT e.id, e.due_at, e.tenant FROM executions e
WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $2 AND e.scheduled_for < $3 AND e.status IN ('pending', 'queued');

-- name: idempotency_claim_many
-- Take idempotency keys for new jobs: (tenant, key, request hash, job, response JSON text) per
-- row. A key held by a live entry (younger than $6 s) is not taken; an older one is replaced.
-- Returns the (tenant, key) pairs taken. A concurrent claim of the same key waits on its row
-- lock until the first transaction ends.
INSERT INTO idempotency_keys (tenant, key, request_hash, job_id, response)
SELECT k.tenant, k.key, k.request_hash, k.job_id, k.response::jsonb
FROM unnest($1::text[], $2::text[], $3::bytea[], $4::uuid[], $5::text[]) AS k(tenant, key, request_hash, job_id, response)
ON CONFLICT (tenant, key) DO UPDATE
    SET request_hash = excluded.request_hash, job_id = excluded.job_id, response = excluded.response,
        created_at = clock_timestamp()
    WHERE idempotency_keys.created_at <= clock_timestamp() - make_interval(secs => $6)
RETURNING tenant, key;

-- name: idempotency_get_many
-- The live entries (younger than $3 s) of these (tenant, key) pairs.
SELECT i.tenant, i.key, i.request_hash, i.job_id, i.response FROM idempotency_keys i
JOIN unnest($1::text[], $2::text[]) AS k(tenant, key) ON i.tenant = k.tenant AND i.key = k.key
WHERE i.created_at > clock_timestamp() - make_interval(secs => $3);

-- name: task_type_report
-- A replica with the worker role says which task types it runs (at start and every observer pass).
INSERT INTO task_types (name, worker_id, last_seen_at)
SELECT n, $2, clock_timestamp() FROM unnest($1::text[]) AS n
ON CONFLICT (name) DO UPDATE SET worker_id = excluded.worker_id, last_seen_at = excluded.last_seen_at;

-- name: task_type_live
-- Task types some worker replica reported within the last $1 seconds: what producers may enqueue.
SELECT name FROM task_types WHERE last_seen_at > clock_timestamp() - make_interval(secs => $1) ORDER BY name;

-- name: job_create_one_off
-- Record a one-off job ($1-$21 as job_insert) with its one execution ($22: its id) in one
-- statement, so a single create costs one round trip and no BEGIN/COMMIT. The execution is
-- queued when due inside the dispatch horizon ($23 s). Returns the job row with the execution's
-- status, enqueued_at and created_at (the caller knows its other values).
WITH job AS (
    INSERT INTO jobs (id, tenant, name, task, params, schedule_kind, run_at, cron, timezone,
                      misfire_policy, catch_up_limit, window_s, max_attempts, backoff_base_s,
                      backoff_factor, backoff_max_s, timeout_s, dst_repeated, dst_missing, tzdata_version, overlap)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
    RETURNING *
), execution AS (
    INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at)
    SELECT $22, job.id, job.tenant, job.run_at, job.run_at,
           CASE WHEN job.run_at <= clock_timestamp() + make_interval(secs => $23) THEN 'queued' ELSE 'pending' END,
           CASE WHEN job.run_at <= clock_timestamp() + make_interval(secs => $23) THEN clock_timestamp() END
    FROM job
    RETURNING status, enqueued_at, created_at
)
SELECT job.*, execution.status AS execution_status, execution.enqueued_at AS execution_enqueued_at,
       execution.created_at AS execution_created_at
FROM job, execution;
