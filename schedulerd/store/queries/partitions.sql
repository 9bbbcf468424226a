-- Retention: daily partitions created ahead, exported and dropped, one replica at a time.

-- name: maintenance_lock
-- Retention runs on one replica at a time: a transaction-scoped advisory lock (held: false when
-- another replica has it). In the same transaction DDL waits at most $1 for a table lock and then
-- fails, rather than queueing every worker's update behind it.
SELECT set_config('lock_timeout', $1, true) AS lock_timeout,
       pg_try_advisory_xact_lock(hashtext('schedulerd.retention')) AS held;

-- name: partition_ensure
-- Create UTC day $1's executions and attempts partitions (moving in rows waiting in the default
-- partitions); true when created, false when they existed, NULL when the day's rows in the
-- default partition include queued or running ones (it waits there until they are final).
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

-- name: partition_lock
-- Inside a transaction: lock UTC day $1's partitions against writers until the commit and count
-- its executions not yet final (NULL: no partition). Drop in the same transaction when 0.
SELECT schedulerd_lock_partition($1);

-- name: partition_drop
-- Drop UTC day $1's executions and attempts partitions.
SELECT schedulerd_drop_partition($1);

-- name: execution_unfinished_between
-- Executions scheduled in [$1, $2) not yet final (the partial indexes answer).
SELECT (SELECT count(*) FROM executions WHERE lane = 'pending' AND status = 'pending' AND scheduled_for >= $1 AND scheduled_for < $2)
     + (SELECT count(*) FROM executions WHERE lane = 'active' AND status = 'queued' AND scheduled_for >= $1 AND scheduled_for < $2)
     + (SELECT count(*) FROM executions WHERE status = 'running' AND scheduled_for >= $1 AND scheduled_for < $2);

-- name: partition_export_executions
-- One day's executions for export before its partition is dropped: every column but the claim's
-- bookkeeping (limited, lane), so an archive table made from an earlier export still takes it.
SELECT id, job_id, tenant, scheduled_for, due_at, status, attempt, fence, lease_until, worker, enqueued_at,
       first_started_at, started_at, finished_at, last_error, created_at, reason, cancel_requested_at, origin,
       redrives, late_reason, detail, job_version, cancelled_by, priority, traceparent
FROM executions WHERE scheduled_for >= $1 AND scheduled_for < $2 ORDER BY scheduled_for, id;

-- name: partition_export_attempts
-- One day's attempts for export before its partition is dropped.
SELECT * FROM attempt_history WHERE scheduled_for >= $1 AND scheduled_for < $2 ORDER BY scheduled_for, execution_id, fence;
