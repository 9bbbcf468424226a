-- Executions from insert to queued: write occurrences, cancel or revive them with their job,
-- dispatch them, read and page them, and find queued ones Redis may have lost.

-- name: execution_insert_many
-- Record occurrences (ids, job, tenant, scheduled_for, due_at) of origin $7 (scheduled | trigger
-- | backfill); those due inside the dispatch horizon ($6 seconds) are queued at once. Duplicate
-- slots (job, instant, origin) are ignored, so materialising twice (or on two replicas) never
-- makes a second execution of one occurrence, and a backfill never takes a scheduled run's slot.
-- Each records its job's version as this transaction sees it (job_version), so every insert path
-- (materialise, trigger, backfill, edit, tz recompute) says which spec wrote the row, and carries
-- its job's priority as that version has it.
INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at, origin, job_version, priority)
SELECT o.id, o.job_id, o.tenant, o.scheduled_for, o.due_at,
       CASE WHEN o.due_at <= clock_timestamp() + make_interval(secs => $6) THEN 'queued' ELSE 'pending' END,
       CASE WHEN o.due_at <= clock_timestamp() + make_interval(secs => $6) THEN clock_timestamp() END, $7,
       (SELECT j.version FROM jobs j WHERE j.id = o.job_id),
       coalesce((SELECT j.priority FROM jobs j WHERE j.id = o.job_id), 5)
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

-- name: execution_edit_lock
-- A job's occurrences of origin scheduled after $2, by time, for an edit to judge (Jobs.update).
-- movable: never started (a first attempt, pending or queued, plain, parked by a tenant cap, rate
-- limit or breaker, waiting for a concurrency slot (kept, it is queued and judged again at its
-- claim), or replayed late; or cancelled by a pause or an earlier edit, which may be given back),
-- and locked in id order until the edit's transaction ends, so a racing claim waits and then finds
-- the row cancelled or kept. The others (started, running, a retry, final, waiting on an overlap)
-- are fixed: read without a lock; a row claimed between this statement's snapshot and its lock
-- fails the re-check and is fixed. MATERIALIZED: the lock is taken on every movable row.
WITH future AS (
    SELECT e.id, e.scheduled_for, e.status, e.reason FROM executions e
    WHERE e.job_id = $1 AND e.scheduled_for > $2 AND e.origin = 'scheduled'
), locked AS MATERIALIZED (
    SELECT e.id FROM executions e JOIN future f ON e.id = f.id AND e.scheduled_for = f.scheduled_for
    WHERE e.attempt = 0 AND e.first_started_at IS NULL
      AND (e.status IN ('pending', 'queued') AND (e.reason IS NULL OR e.reason IN ('task_limit', 'rate_limited', 'concurrency_limit', 'breaker_open', 'late_replay'))
           OR e.status = 'cancelled' AND e.reason IN ('paused', 'edited'))
    ORDER BY e.id FOR NO KEY UPDATE OF e
)
SELECT f.id, f.scheduled_for, f.status, f.reason, l.id IS NOT NULL AS movable
FROM future f LEFT JOIN locked l ON l.id = f.id
ORDER BY f.scheduled_for;

-- name: execution_edit_many
-- Apply an edit to occurrences execution_edit_lock locked in this transaction: (id $1,
-- scheduled_for $2, action $3, due_at $4). cancel: an unstarted one the new spec does not produce
-- (reason edited). keep: one it produces at the same instant keeps its row (id), takes its due
-- time ($4: the new smearing), version $5 and priority $7. revive: a slot a pause or an earlier edit cancelled
-- that the new spec produces again, given back (pending, or queued inside the dispatch horizon
-- $6 s). paused / edited: a cancelled slot re-labelled, so a resume revives exactly what the new
-- spec produces. Rows in id order. Returns the rows kept or revived.
WITH locked AS (
    SELECT e.id, e.scheduled_for, d.action, d.due_at FROM executions e
    JOIN unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::timestamptz[]) AS d(id, scheduled_for, action, due_at)
      ON e.id = d.id AND e.scheduled_for = d.scheduled_for
    WHERE CASE WHEN d.action IN ('cancel', 'keep') THEN e.status IN ('pending', 'queued') ELSE e.status = 'cancelled' END
    ORDER BY e.id FOR NO KEY UPDATE OF e
), edited AS (
    UPDATE executions e SET
        status = CASE l.action WHEN 'cancel' THEN 'cancelled'
                     WHEN 'keep' THEN CASE WHEN e.status = 'queued' OR l.due_at <= clock_timestamp() + make_interval(secs => $6)
                                           THEN 'queued' ELSE 'pending' END
                     WHEN 'revive' THEN CASE WHEN l.due_at <= clock_timestamp() + make_interval(secs => $6)
                                             THEN 'queued' ELSE 'pending' END
                     ELSE e.status END,
        enqueued_at = CASE WHEN l.action IN ('keep', 'revive') AND l.due_at <= clock_timestamp() + make_interval(secs => $6)
                           THEN coalesce(CASE WHEN l.action = 'keep' THEN e.enqueued_at END, clock_timestamp())
                           WHEN l.action = 'revive' THEN NULL ELSE e.enqueued_at END,
        due_at = CASE WHEN l.action IN ('keep', 'revive') THEN l.due_at ELSE e.due_at END,
        job_version = CASE WHEN l.action IN ('keep', 'revive') THEN $5 ELSE e.job_version END,
        priority = CASE WHEN l.action IN ('keep', 'revive') THEN $7::smallint ELSE e.priority END,
        reason = CASE l.action WHEN 'cancel' THEN 'edited' WHEN 'revive' THEN NULL WHEN 'keep' THEN e.reason ELSE l.action END,
        finished_at = CASE l.action WHEN 'cancel' THEN clock_timestamp() WHEN 'revive' THEN NULL ELSE e.finished_at END,
        late_reason = CASE WHEN l.action = 'revive' THEN NULL ELSE e.late_reason END
    FROM locked l
    WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
    RETURNING e.*, l.action
)
SELECT * FROM edited WHERE action IN ('keep', 'revive');

-- name: execution_revive_for_job
-- On resume, give back the future slots a pause cancelled (their unique slot would otherwise
-- block re-materialising): pending again, or queued when inside the dispatch horizon ($2 s), at the
-- job's priority now (an edit while paused only relabels the cancelled slots).
WITH locked AS (
    SELECT id, scheduled_for FROM executions
    WHERE job_id = $1 AND status = 'cancelled' AND reason = 'paused' AND scheduled_for > clock_timestamp()
    ORDER BY id FOR NO KEY UPDATE
)
UPDATE executions e SET reason = NULL, finished_at = NULL, late_reason = NULL,
       priority = (SELECT j.priority FROM jobs j WHERE j.id = $1),
       status = CASE WHEN e.due_at <= clock_timestamp() + make_interval(secs => $2) THEN 'queued' ELSE 'pending' END,
       enqueued_at = CASE WHEN e.due_at <= clock_timestamp() + make_interval(secs => $2) THEN clock_timestamp() END
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.*;

-- name: execution_get
-- One execution by id; [$2, $3) bounds its scheduled_for (from the id, when it carries it).
SELECT * FROM executions WHERE id = $1 AND scheduled_for >= $2 AND scheduled_for < $3;

-- name: execution_list
-- Executions newest first (by scheduled time), optionally filtered by tenant, job and status, and
-- scheduled at or after $5 (Store.execution_list widens it step by step for every tenant's
-- executions, which no b-tree orders: each step reads one time range through the BRIN index).
SELECT * FROM executions
WHERE ($1::text IS NULL OR tenant = $1)
  AND ($2::uuid IS NULL OR job_id = $2)
  AND ($3::text IS NULL OR status = $3)
  AND scheduled_for >= $5
ORDER BY scheduled_for DESC, id DESC
LIMIT $4;

-- name: execution_dispatch_due
-- Move pending executions due within the horizon ($1, seconds) to queued, at most $2 of them,
-- and return them for ZADD. SKIP LOCKED lets several dispatchers share the work. The horizon is
-- counted from now() (the transaction's start, a moment ago), not clock_timestamp(): a stable
-- bound is an index condition, so the walk ends at the horizon. Against the volatile one every
-- pass read every pending row past it (a cron fleet materialised hours ahead: all of them, each
-- second). Run by Store._fetch_walking_index, as execution_queued_overdue and _page are. The
-- rows locked are pending until the commit, so the UPDATE does not filter on the lane again:
-- that filter let the planner read the whole pending lane to join it to the batch.
UPDATE executions e SET status = 'queued', enqueued_at = clock_timestamp()
FROM (SELECT id, scheduled_for FROM executions
      WHERE lane = 'pending' AND status = 'pending' AND due_at <= now() + make_interval(secs => $1)
      ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED) d
WHERE e.id = d.id AND e.scheduled_for = d.scheduled_for
RETURNING e.id, e.due_at, e.tenant, e.priority;

-- name: execution_queued_overdue
-- Queued executions overdue by more than $1 seconds, in (due_at, id) order after the key
-- ($3, $4), at most $2: candidates for a lost Redis entry (the sweeper checks which are missing
-- from the delay queue), paged by keyset so a backlog larger than a page is walked past.
-- now(), not clock_timestamp(): an index condition (see execution_dispatch_due).
SELECT id, due_at, tenant, priority FROM executions
WHERE lane = 'active' AND status = 'queued' AND due_at < now() - make_interval(secs => $1)
  AND due_at >= $3 AND (due_at, id) > ($3, $4)
ORDER BY due_at, id LIMIT $2;

-- name: execution_queued_early
-- Of popped ids the claim left, the queued ones not yet due at $4 (the pop's instant): their
-- Redis entry was earlier than their due time (a stale score), so the worker gives each back at
-- its due time rather than drop it. [$2, $3) bounds scheduled_for.
SELECT id, due_at, tenant, priority FROM executions
WHERE id = ANY($1::uuid[]) AND scheduled_for >= $2 AND scheduled_for < $3 AND lane = 'active' AND status = 'queued' AND due_at > $4;

-- name: execution_queued_page
-- All queued executions in (due_at, id) order after the given key: a full reconcile after
-- Redis lost its data pages through them.
SELECT id, due_at, tenant, priority FROM executions
WHERE lane = 'active' AND status = 'queued' AND (due_at, id) > ($1, $2)
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

-- name: execution_of_jobs
-- Every execution of these jobs (id, due instant, status): what a create whose commit outcome was
-- unknown wrote, read back once it is known to have committed.
SELECT e.id, e.job_id, e.due_at, e.status FROM executions e WHERE e.job_id = ANY($1::uuid[]) ORDER BY e.job_id, e.scheduled_for;

-- name: execution_committed
-- Which of these executions (ids, with their tenants) exist and still wait to start: after an
-- application's transaction, the ones it committed (a rolled-back enqueue left none).
SELECT e.id, e.due_at, e.tenant, e.priority FROM executions e
WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $2 AND e.scheduled_for < $3 AND e.status IN ('pending', 'queued');
