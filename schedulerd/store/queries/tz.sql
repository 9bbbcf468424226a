-- Recomputing occurrences after a tz database change, and the record of each recompute.

-- name: tz_try_lock
-- Take the tz recompute lock for this session if it is free (true): one replica recomputes at a
-- time. Polled, not waited on with pg_advisory_lock: a wait is one statement, and every statement
-- gives up after [database].statement_timeout_s, while another replica's recompute may take longer.
SELECT pg_try_advisory_lock(hashtext('schedulerd.tz_recompute'));

-- name: tz_unlock
-- Release the tz recompute lock.
SELECT pg_advisory_unlock(hashtext('schedulerd.tz_recompute'));

-- name: job_tz_stale
-- Live cron jobs (paused too) whose occurrences were resolved with a tz database other than $1,
-- after id $2, at most $3, locked against the materialiser. Call inside a transaction.
SELECT *, clock_timestamp() AS now FROM jobs
WHERE schedule_kind = 'cron' AND deleted_at IS NULL AND tzdata_version IS DISTINCT FROM $1 AND id > $2
ORDER BY id LIMIT $3 FOR UPDATE;

-- name: execution_future_lock
-- These jobs' scheduled occurrences after $2, by job and time, for a recompute to judge. movable:
-- the occurrence never started (a first attempt, pending or queued, plain, parked by a tenant cap,
-- rate limit or breaker, or replayed late; or cancelled by a pause, which a resume would revive), and it is
-- locked (in id order) until the recompute's transaction ends, so no claim can start it while it
-- may be deleted and its new instant written: a racing claim waits, then finds it gone or kept.
-- The others (started, running, final, waiting on an overlap) are fixed: read without a lock, so
-- a row claimed between this statement's snapshot and its lock fails the re-check and is fixed.
-- FOR UPDATE, not NO KEY UPDATE: the same transaction deletes some of them. MATERIALIZED: the
-- lock is taken on every movable row, whatever plan the outer join gets.
WITH future AS (
    SELECT e.id, e.job_id, e.scheduled_for FROM executions e
    WHERE e.job_id = ANY($1::uuid[]) AND e.scheduled_for > $2 AND e.origin = 'scheduled'
), locked AS MATERIALIZED (
    SELECT e.id FROM executions e JOIN future f ON e.id = f.id AND e.scheduled_for = f.scheduled_for
    WHERE e.attempt = 0 AND e.first_started_at IS NULL
      AND (e.status IN ('pending', 'queued') AND (e.reason IS NULL OR e.reason IN ('task_limit', 'rate_limited', 'concurrency_limit', 'breaker_open', 'late_replay'))
           OR e.status = 'cancelled' AND e.reason = 'paused')
    ORDER BY e.id FOR UPDATE OF e
)
SELECT f.job_id, f.id, f.scheduled_for, l.id IS NOT NULL AS movable
FROM future f LEFT JOIN locked l ON l.id = f.id
ORDER BY f.job_id, f.scheduled_for;

-- name: execution_delete_tz_stale
-- Delete occurrences (id $1, scheduled_for $2) the new tz rules no longer produce, movable ones
-- that execution_future_lock locked in this transaction: they never started, so no history is
-- lost, and their slots are free should the rules change back. Their Redis entries need no
-- removal: the claim finds no row. Returns the ids deleted.
WITH locked AS (
    SELECT e.id, e.scheduled_for FROM executions e
    JOIN unnest($1::uuid[], $2::timestamptz[]) AS d(id, scheduled_for) ON e.id = d.id AND e.scheduled_for = d.scheduled_for
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
