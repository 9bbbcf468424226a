-- Cancels on request: one execution, the executions matching a filter, and the record of bulk
-- actions (job_actions). The outcome of a running one is written by the worker's finish, the
-- sweeper's reclaim, a hand-back or a park (leases.sql), which read cancelled_by.

-- name: execution_cancel
-- Cancel execution $1 of tenant $2 (NULL: any) on behalf of $3, in one statement that locks its row: pending
-- or queued (a retry waiting for its backoff too) becomes cancelled now (reason cancelled);
-- running gets a stop request (cancel_requested_at, cancelled_by), which its worker learns at the
-- next heartbeat and every later write of that attempt honours. Returns the row as it is now with
-- was, its status before; no row: missing, another tenant's, or already settled (read it to say
-- which). A second cancel of a running one keeps the first request. [$4, $5) bounds scheduled_for.
WITH locked AS (
    SELECT id, scheduled_for, status FROM executions
    WHERE id = $1 AND ($2::text IS NULL OR tenant = $2) AND scheduled_for >= $4 AND scheduled_for < $5
      AND status IN ('pending', 'queued', 'running')
    ORDER BY id FOR NO KEY UPDATE
)
UPDATE executions e SET
    status = CASE WHEN l.status = 'running' THEN 'running' ELSE 'cancelled' END,
    reason = CASE WHEN l.status = 'running' THEN e.reason ELSE 'cancelled' END,
    finished_at = CASE WHEN l.status = 'running' THEN e.finished_at ELSE clock_timestamp() END,
    cancel_requested_at = coalesce(e.cancel_requested_at, clock_timestamp()),
    cancelled_by = coalesce(e.cancelled_by, $3)
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.*, l.status AS was;

-- name: execution_cancel_page
-- Cancel up to $7 executions of tenant $1 matching a filter, locked in id order: statuses $2
-- (among pending, queued, running), job $3, jobs labelled $4 (a selector: labels @> $4), due in
-- [$5, $6) (each NULL: any), on behalf of $8. Pending and queued ones are cancelled now (reason
-- cancelled), running ones asked to stop (see execution_cancel). Rows already asked are left out,
-- so calling it again takes the next page; returns the rows it changed with their status before.
-- The page is picked first, then locked in id order with its status checked again (a row claimed
-- or finished meanwhile is left out of the page, not judged on what it was).
WITH picked AS (
    SELECT e.id, e.scheduled_for FROM executions e
    WHERE e.tenant = $1 AND e.status = ANY($2::text[]) AND e.cancelled_by IS NULL
      AND ($3::uuid IS NULL OR e.job_id = $3)
      AND ($4::jsonb IS NULL OR e.job_id IN (SELECT j.id FROM jobs j WHERE j.tenant = $1 AND j.labels @> $4::jsonb))
      AND ($5::timestamptz IS NULL OR e.due_at >= $5) AND ($6::timestamptz IS NULL OR e.due_at < $6)
    ORDER BY e.id LIMIT $7
), locked AS (
    SELECT e.id, e.scheduled_for, e.status FROM executions e JOIN picked p ON e.id = p.id AND e.scheduled_for = p.scheduled_for
    WHERE e.status = ANY($2::text[]) AND e.cancelled_by IS NULL
    ORDER BY e.id FOR NO KEY UPDATE OF e
)
UPDATE executions e SET
    status = CASE WHEN l.status = 'running' THEN 'running' ELSE 'cancelled' END,
    reason = CASE WHEN l.status = 'running' THEN e.reason ELSE 'cancelled' END,
    finished_at = CASE WHEN l.status = 'running' THEN e.finished_at ELSE clock_timestamp() END,
    cancel_requested_at = coalesce(e.cancel_requested_at, clock_timestamp()),
    cancelled_by = $8
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id, e.tenant, l.status AS was;

-- name: execution_cancel_plan
-- What execution_cancel_page would take, without writing: how many match (the same filter, $1 to
-- $6), by status, and up to $7 of them (id order) as a sample.
WITH matching AS (
    SELECT e.id, e.job_id, e.status, e.scheduled_for, e.due_at FROM executions e
    WHERE e.tenant = $1 AND e.status = ANY($2::text[]) AND e.cancelled_by IS NULL
      AND ($3::uuid IS NULL OR e.job_id = $3)
      AND ($4::jsonb IS NULL OR e.job_id IN (SELECT j.id FROM jobs j WHERE j.tenant = $1 AND j.labels @> $4::jsonb))
      AND ($5::timestamptz IS NULL OR e.due_at >= $5) AND ($6::timestamptz IS NULL OR e.due_at < $6)
)
SELECT (SELECT count(*) FROM matching) AS total,
       (SELECT count(*) FROM matching WHERE status = 'running') AS running,
       (SELECT coalesce(jsonb_agg(s ORDER BY s.id), '[]') FROM
            (SELECT id, job_id, status, scheduled_for, due_at FROM matching ORDER BY id LIMIT $7) s) AS sample;

-- name: job_selected_page
-- Ids of tenant $1's jobs labelled $2 (labels @> $2) that a bulk action may act on, after id $3
-- (NULL: from the start), in id order, at most $4: not deleted; $5 narrows by state (enabled:
-- running jobs, paused: paused ones, NULL: both).
SELECT id FROM jobs
WHERE tenant = $1 AND labels @> $2::jsonb AND deleted_at IS NULL
  AND ($3::uuid IS NULL OR id > $3)
  AND ($5::boolean IS NULL OR enabled = $5)
ORDER BY id LIMIT $4;

-- name: job_selected_count
-- How many jobs job_selected_page would list ($1, $2, $3 as its $1, $2, $5), and how many
-- unstarted (pending or queued) executions they have: a bulk action's dry run.
WITH selected AS (
    SELECT id FROM jobs
    WHERE tenant = $1 AND labels @> $2::jsonb AND deleted_at IS NULL AND ($3::boolean IS NULL OR enabled = $3)
)
SELECT (SELECT count(*) FROM selected) AS jobs,
       (SELECT count(*) FROM executions e WHERE e.tenant = $1 AND e.job_id IN (SELECT id FROM selected)
            AND e.status IN ('pending', 'queued')) AS unstarted;

-- name: job_action_insert
-- Record a bulk action: id $1, tenant $2, action $3, selector $4, filter $5, jobs $6 and
-- executions $7 it touched, actor $8. Returns the row with its time (Postgres's clock).
INSERT INTO job_actions (id, tenant, action, selector, filter, jobs_count, executions_count, actor)
VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6, $7, $8)
RETURNING *;

-- name: job_action_list
-- Tenant $1's bulk actions, newest first, before (at, id) $2/$3 (NULL: from the newest), at most $4.
SELECT * FROM job_actions
WHERE tenant = $1 AND ($2::timestamptz IS NULL OR (at, id) < ($2, $3::uuid))
ORDER BY at DESC, id DESC LIMIT $4;
