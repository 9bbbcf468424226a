-- The claim becomes a heap-only (HOT) update: no index of executions names status any more.
-- An update that changes an indexed column (a partial index's predicate included) writes an entry
-- into every index of executions for the new row version; one that changes none, on a page with
-- room, writes none and costs about a quarter as much (docs/benchmarks.md "The claim as a HOT
-- update"). The claim moved status from queued to running, and status was in seven predicates.
-- They now name lane, computed from status, which the claim of a queued execution leaves as it
-- was: pending; active (queued, or running); limited (running in a slot of a concurrency limit,
-- claimed under that limit's lock: counted at each such claim, so it keeps an index of its own,
-- and its claim is not HOT); failed; NULL for the other final states.
-- Running executions no longer have an index of their own: one is found by id, and the sweeper
-- finds expired leases among the active executions that have fallen due.
-- Executions partitions keep 30 % of each page free for the claim's row version.
-- Adding a stored generated column rewrites executions, which stays locked until the rewrite
-- ends: stop the replicas, then `schedulerd migrate` (docs/operations.md).
ALTER TABLE executions ADD COLUMN limited boolean NOT NULL DEFAULT false;
ALTER TABLE executions ADD COLUMN lane text GENERATED ALWAYS AS (
    CASE status WHEN 'pending' THEN 'pending' WHEN 'queued' THEN 'active'
                WHEN 'running' THEN CASE WHEN limited THEN 'limited' ELSE 'active' END
                WHEN 'failed' THEN 'failed' END) STORED;

DROP INDEX executions_failed, executions_parked, executions_pending_due, executions_queued_due, executions_running,
           executions_unstarted_priority, executions_waiting_slot;
CREATE INDEX executions_pending_due ON executions (due_at) WHERE lane = 'pending';
CREATE INDEX executions_active_due ON executions (due_at, id) WHERE lane = 'active';
CREATE INDEX executions_limited ON executions (tenant) WHERE lane = 'limited';
CREATE INDEX executions_failed ON executions (tenant, finished_at DESC, id DESC) WHERE lane = 'failed';
CREATE INDEX executions_parked ON executions (due_at)
    WHERE lane = 'active' AND reason IN ('task_limit', 'rate_limited', 'breaker_open', 'admit_error');
CREATE INDEX executions_unstarted_priority ON executions (priority DESC, due_at)
    WHERE lane IN ('pending', 'active') AND priority <> 5;
CREATE INDEX executions_waiting_slot ON executions (scheduled_for, id)
    WHERE lane = 'pending' AND reason = 'concurrency_limit';

DO $$
DECLARE p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'executions'::regclass LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 70)', p);
    END LOOP;
END
$$;

-- Retention counts a day's unfinished executions through the lane indexes (status alone would
-- read the whole partition while every writer waits on the lock).
CREATE OR REPLACE FUNCTION schedulerd_lock_partition(day date) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    executions_partition text := 'executions_p' || to_char(day, 'YYYYMMDD');
    unfinished bigint;
BEGIN
    LOCK TABLE ONLY executions, ONLY attempts IN ACCESS EXCLUSIVE MODE;
    IF to_regclass(executions_partition) IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT count(*) FROM %I WHERE lane IN (''pending'', ''active'', ''limited'') '
                   'AND status IN (''pending'', ''queued'', ''running'')', executions_partition)
        INTO unfinished;
    RETURN unfinished;
END
$fn$;

CREATE OR REPLACE FUNCTION schedulerd_ensure_partition(day date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    low timestamptz := day::timestamp AT TIME ZONE 'UTC';
    high timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
    parent text;
    partition text;
    columns text;
BEGIN
    IF to_regclass(format('executions_p%s', to_char(day, 'YYYYMMDD'))) IS NOT NULL THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM executions_default WHERE scheduled_for >= low AND scheduled_for < high
               AND status IN ('queued', 'running')) THEN
        RETURN NULL;  -- certainly not now; spares the hot path the lock below
    END IF;
    IF EXISTS (SELECT 1 FROM executions_default WHERE scheduled_for >= low AND scheduled_for < high)
       OR EXISTS (SELECT 1 FROM attempts_default WHERE scheduled_for >= low AND scheduled_for < high) THEN
        LOCK TABLE ONLY executions, ONLY attempts IN EXCLUSIVE MODE;
        IF EXISTS (SELECT 1 FROM executions_default WHERE scheduled_for >= low AND scheduled_for < high
                   AND status IN ('queued', 'running')) THEN
            RETURN NULL;
        END IF;
    END IF;
    FOREACH parent IN ARRAY ARRAY['executions', 'attempts'] LOOP
        partition := format('%s_p%s', parent, to_char(day, 'YYYYMMDD'));
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED)%s', partition, parent,
                       CASE WHEN parent = 'executions' THEN ' WITH (fillfactor = 70)' ELSE '' END);
        -- lane is generated: the move names every other column.
        SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO columns FROM pg_attribute
        WHERE attrelid = parent::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = '';
        EXECUTE format('WITH moved AS (DELETE FROM %I WHERE scheduled_for >= $1 AND scheduled_for < $2 RETURNING %s) '
                       'INSERT INTO %I (%s) SELECT %s FROM moved', parent || '_default', columns, partition, columns, columns)
            USING low, high;
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, partition, low, high);
    END LOOP;
    RETURN true;
END
$$;
