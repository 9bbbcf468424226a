-- Executions and attempts partitioned by UTC day of scheduled_for, so retention drops whole
-- partitions (never deletes row by row) and each day's indexes stay that day's size.
--
-- The retention loop (schedulerd/retention.py) creates each day's partitions ahead and drops
-- those past the retention; rows for a day without a partition (a one-off due next year) wait in
-- the default partition and move into their day's partition when it is created.
--
-- Execution ids carry scheduled_for (schedulerd/core/ids.py; schedulerd_execution_id below), so
-- a statement given only ids can still be told which partitions to visit.
--
-- This rewrites both tables in one transaction: on a large installation, run `schedulerd
-- migrate` in a quiet hour before upgrading the replicas.

ALTER TABLE attempts RENAME TO attempts_unpartitioned;
ALTER TABLE executions RENAME TO executions_unpartitioned;
-- Free the names the new tables' indexes take.
ALTER TABLE attempts_unpartitioned DROP CONSTRAINT attempts_pkey, DROP CONSTRAINT attempts_execution_id_fkey,
    DROP CONSTRAINT attempts_outcome_check;
ALTER TABLE executions_unpartitioned DROP CONSTRAINT executions_pkey, DROP CONSTRAINT executions_job_id_scheduled_for_key,
    DROP CONSTRAINT executions_status_check, DROP CONSTRAINT executions_job_id_fkey;
DROP INDEX executions_pending_due, executions_queued_due, executions_running_lease, executions_tenant_recent,
    executions_scheduled_for;

CREATE TABLE executions (
    id               uuid NOT NULL,
    job_id           uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    tenant           text NOT NULL,
    scheduled_for    timestamptz NOT NULL,
    due_at           timestamptz NOT NULL,
    status           text NOT NULL CHECK (status IN ('pending', 'queued', 'running', 'succeeded', 'failed', 'skipped', 'cancelled')),
    attempt          integer NOT NULL DEFAULT 0,
    fence            bigint NOT NULL DEFAULT 0,
    lease_until      timestamptz,
    worker           text,
    enqueued_at      timestamptz,
    first_started_at timestamptz,
    started_at       timestamptz,
    finished_at      timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    reason           text
) PARTITION BY RANGE (scheduled_for);
CREATE TABLE executions_default PARTITION OF executions DEFAULT;

-- Attempts carry their execution's scheduled_for so they live and die with its partition.
-- There is no foreign key to executions: a partition is dropped with its attempts' partition.
CREATE TABLE attempts (
    execution_id  uuid NOT NULL,
    attempt       integer NOT NULL,
    fence         bigint NOT NULL,
    worker        text,
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz NOT NULL,
    outcome       text NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'timed_out', 'lease_expired', 'handed_back')),
    error         text,
    detail        text,
    scheduled_for timestamptz NOT NULL
) PARTITION BY RANGE (scheduled_for);
CREATE TABLE attempts_default PARTITION OF attempts DEFAULT;

-- A fresh execution id carrying `scheduled_for` (same layout as schedulerd.core.ids.execution_id).
CREATE FUNCTION schedulerd_execution_id(scheduled_for timestamptz) RETURNS uuid
LANGUAGE sql VOLATILE AS $$
    SELECT encode(substring(int8send(floor(extract(epoch FROM scheduled_for) * 1000)::bigint) FROM 3)
                  || set_byte(tail, 0, (get_byte(tail, 0) & 15) | 128), 'hex')::uuid  -- version 8
    FROM (SELECT substring(uuid_send(gen_random_uuid()) FROM 7) AS tail) random_part
$$;

-- Create the executions and attempts partitions of one UTC day unless they exist, moving in any
-- rows of that day waiting in the default partitions. LIKE + ATTACH (not CREATE ... PARTITION
-- OF) so the parent is never locked against the workers' updates. True when created.
CREATE FUNCTION schedulerd_ensure_partition(day date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    low timestamptz := day::timestamp AT TIME ZONE 'UTC';
    high timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
    parent text;
    partition text;
BEGIN
    IF to_regclass(format('executions_p%s', to_char(day, 'YYYYMMDD'))) IS NOT NULL THEN
        RETURN false;
    END IF;
    FOREACH parent IN ARRAY ARRAY['executions', 'attempts'] LOOP
        partition := format('%s_p%s', parent, to_char(day, 'YYYYMMDD'));
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', partition, parent);
        EXECUTE format('WITH moved AS (DELETE FROM %I WHERE scheduled_for >= $1 AND scheduled_for < $2 RETURNING *) '
                       'INSERT INTO %I SELECT * FROM moved', parent || '_default', partition) USING low, high;
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, partition, low, high);
    END LOOP;
    RETURN true;
END
$$;

-- Drop one UTC day's executions and attempts partitions (retention).
CREATE FUNCTION schedulerd_drop_partition(day date) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DROP TABLE IF EXISTS %I, %I', 'attempts_p' || to_char(day, 'YYYYMMDD'),
                   'executions_p' || to_char(day, 'YYYYMMDD'));
END
$$;

DO $$ BEGIN  -- PERFORM, not SELECT: yoyo would print the result set
    PERFORM schedulerd_ensure_partition(day) FROM (
        SELECT DISTINCT (scheduled_for AT TIME ZONE 'UTC')::date AS day FROM executions_unpartitioned
        UNION SELECT (now() AT TIME ZONE 'UTC')::date + n FROM generate_series(0, 3) n
    ) days ORDER BY day;
END $$;

INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, attempt, fence, lease_until, worker,
                        enqueued_at, first_started_at, started_at, finished_at, last_error, created_at, reason)
SELECT id, job_id, tenant, scheduled_for, due_at, status, attempt, fence, lease_until, worker,
       enqueued_at, first_started_at, started_at, finished_at, last_error, created_at, reason
FROM executions_unpartitioned;
INSERT INTO attempts (execution_id, attempt, fence, worker, started_at, finished_at, outcome, error, detail, scheduled_for)
SELECT a.execution_id, a.attempt, a.fence, a.worker, a.started_at, a.finished_at, a.outcome, a.error, a.detail, e.scheduled_for
FROM attempts_unpartitioned a JOIN executions_unpartitioned e ON e.id = a.execution_id;
DROP TABLE attempts_unpartitioned, executions_unpartitioned;

-- Constraints and indexes after the copy (faster than maintaining them row by row); on the
-- parents they cascade to every partition, present and future.
ALTER TABLE executions ADD PRIMARY KEY (id, scheduled_for), ADD UNIQUE (job_id, scheduled_for);
CREATE INDEX executions_pending_due ON executions (due_at) WHERE status = 'pending';
CREATE INDEX executions_queued_due ON executions (due_at) WHERE status = 'queued';
CREATE INDEX executions_running_lease ON executions (lease_until) WHERE status = 'running';
CREATE INDEX executions_tenant_recent ON executions (tenant, scheduled_for DESC, id DESC);
CREATE INDEX executions_scheduled_for ON executions (scheduled_for);
ALTER TABLE attempts ADD PRIMARY KEY (execution_id, fence, scheduled_for);
