-- Executions from insert to queued: write occurrences, cancel or revive them with their job,
-- dispatch them, read and page them, and find queued ones Redis may have lost.

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

-- name: execution_dispatch_due
-- Move pending executions due within the horizon ($1, seconds) to queued, at most $2 of them,
-- and return them for ZADD. SKIP LOCKED lets several dispatchers share the work.
UPDATE executions e SET status = 'queued', enqueued_at = clock_timestamp()
FROM (SELECT id, scheduled_for FROM executions
      WHERE status = 'pending' AND due_at <= clock_timestamp() + make_interval(secs => $1)
      ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED) d
WHERE e.id = d.id AND e.scheduled_for = d.scheduled_for AND e.status = 'pending'
RETURNING e.id, e.due_at, e.tenant;

-- name: execution_queued_overdue
-- Queued executions overdue by more than $1 seconds, in (due_at, id) order after the key
-- ($3, $4), at most $2: candidates for a lost Redis entry (the sweeper checks which are missing
-- from the delay queue), paged by keyset so a backlog larger than a page is walked past.
SELECT id, due_at, tenant FROM executions
WHERE status = 'queued' AND due_at < clock_timestamp() - make_interval(secs => $1)
  AND due_at >= $3 AND (due_at, id) > ($3, $4)
ORDER BY due_at, id LIMIT $2;

-- name: execution_queued_early
-- Of popped ids the claim left, the queued ones not yet due at $4 (the pop's instant): their
-- Redis entry was earlier than their due time (a stale score), so the worker gives each back at
-- its due time rather than drop it. [$2, $3) bounds scheduled_for.
SELECT id, due_at, tenant FROM executions
WHERE id = ANY($1::uuid[]) AND scheduled_for >= $2 AND scheduled_for < $3 AND status = 'queued' AND due_at > $4;

-- name: execution_queued_page
-- All queued executions in (due_at, id) order after the given key: a full reconcile after
-- Redis lost its data pages through them.
SELECT id, due_at, tenant FROM executions
WHERE status = 'queued' AND (due_at, id) > ($1, $2)
ORDER BY due_at, id LIMIT $3;

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

-- name: execution_committed
-- Which of these executions (ids, with their tenants) exist and still wait to start: after an
-- application's transaction, the ones it committed (a rolled-back enqueue left none).
SELECT e.id, e.due_at, e.tenant FROM executions e
WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $2 AND e.scheduled_for < $3 AND e.status IN ('pending', 'queued');
