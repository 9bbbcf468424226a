-- Debounced creates: a burst of creates with one (tenant, key) yields one execution, due a window
-- after the last create, carrying the last create's params (schedulerd/intake.py).

-- name: debounce_make_many
-- Inside the create's transaction: a row for each (tenant, key) not seen before, in key order. A
-- second create of a new key waits here, on the unique index, until the first one ends.
INSERT INTO debounces (tenant, key)
SELECT t, k FROM unnest($1::text[], $2::text[]) AS d(t, k) ORDER BY t, k
ON CONFLICT DO NOTHING;

-- name: debounce_lock_many
-- Inside the create's transaction, after debounce_make_many: the keys' rows, locked in key order
-- until the commit, with the execution each points to (none for a key made now).
SELECT d.tenant, d.key, d.job_id, d.execution_id, d.scheduled_for
FROM debounces d JOIN unnest($1::text[], $2::text[]) AS w(t, k) ON d.tenant = w.t AND d.key = w.k
ORDER BY d.tenant, d.key FOR UPDATE OF d;

-- name: debounce_get_many
-- What these keys share now: a create whose commit outcome was unknown reads back its answer.
SELECT d.tenant, d.key, d.job_id, d.execution_id FROM debounces d
JOIN unnest($1::text[], $2::text[]) AS w(t, k) ON d.tenant = w.t AND d.key = w.k
WHERE d.execution_id IS NOT NULL;

-- name: debounce_extend_many
-- Under the keys' locks: move these executions to their new due instants ($3) and the latest
-- create's trace context ($7: its traceparent, or NULL), and their jobs to the latest params ($4,
-- JSON text) and run_at, only while the execution has not started (pending or queued, not
-- waiting under an overlap policy): a claim that won the row first keeps it, and the create then
-- makes a new execution. Rows locked in id order. [$5, $6) bounds scheduled_for.
-- Returns the executions moved, with their status (queued ones go back into Redis at the new due).
WITH moves AS (
    SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::text[], $7::text[])
        AS m(id, scheduled_for, due_at, params, traceparent)
), locked AS (
    SELECT e.id, e.scheduled_for FROM executions e
    WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $5 AND e.scheduled_for < $6
      AND e.status IN ('pending', 'queued') AND e.reason IS DISTINCT FROM 'overlap_buffered'
    ORDER BY e.id FOR NO KEY UPDATE
), moved AS (
    UPDATE executions e SET due_at = m.due_at, traceparent = m.traceparent
    FROM locked l JOIN moves m ON m.id = l.id AND m.scheduled_for = l.scheduled_for
    WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
    RETURNING e.id, e.job_id, e.tenant, e.status, e.due_at
), repointed AS (
    UPDATE jobs j SET params = m.params::jsonb, run_at = m.due_at
    FROM moved mv JOIN moves m ON m.id = mv.id WHERE j.id = mv.job_id
)
SELECT id, job_id, tenant, status, due_at FROM moved;

-- name: debounce_point_many
-- Under the keys' locks: the executions the keys share now (new ones, or the same ones moved).
UPDATE debounces d SET job_id = p.job_id, execution_id = p.execution_id, scheduled_for = p.scheduled_for,
       updated_at = clock_timestamp()
FROM unnest($1::text[], $2::text[], $3::uuid[], $4::uuid[], $5::timestamptz[]) AS p(t, k, job_id, execution_id, scheduled_for)
WHERE d.tenant = p.t AND d.key = p.k;

-- name: debounce_forget_old
-- Retention: keys not used for $1 seconds whose execution has started or ended (or never came).
DELETE FROM debounces d
WHERE d.updated_at < clock_timestamp() - make_interval(secs => $1)
  AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.id = d.execution_id AND e.scheduled_for = d.scheduled_for
                  AND e.status IN ('pending', 'queued'));
