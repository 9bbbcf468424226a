-- Retention judges a partition under the lock it acts under, so what it counts is what it moves
-- or drops, and it never moves a row that a worker may be holding.
--
-- schedulerd_ensure_partition: a day whose rows wait in the default partition moves only when
-- none of them is queued or running; otherwise the day stays in the default partition (NULL)
-- until they are final. Moving a pending row is safe only while no writer can be planning a
-- statement against the old partition layout, so the parents are locked (ONLY: not their
-- partitions) in EXCLUSIVE mode first: every writer, and every SELECT ... FOR UPDATE, waits at its
-- parse, then plans with the new partition and a snapshot that sees the moved row. Plain reads
-- go on. A day with nothing to move takes no parent lock (the ATTACH proves the default holds none).
--
-- schedulerd_lock_partition: before retention counts an expired day's unfinished executions it
-- takes the lock its DROP takes anyway (ACCESS EXCLUSIVE on the parents: dropping a partition
-- needs it), so from the count to the DROP no statement can make one of the day's executions
-- live: a redrive waits, then finds no row and says so. Parents first, as every statement locks
-- them before their partitions, so the wait cannot deadlock with the hot path; the stall is one
-- count on the expired partition's partial indexes longer than the DROP's.

DROP FUNCTION schedulerd_ensure_partition(date);

-- True when created, false when it existed, NULL when its rows in the default partition include
-- queued or running ones (the day waits there until they are final).
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
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', partition, parent);
        EXECUTE format('WITH moved AS (DELETE FROM %I WHERE scheduled_for >= $1 AND scheduled_for < $2 RETURNING *) '
                       'INSERT INTO %I SELECT * FROM moved', parent || '_default', partition) USING low, high;
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, partition, low, high);
    END LOOP;
    RETURN true;
END
$$;

-- Lock the parents against every statement until the commit and count UTC day $1's executions
-- not yet final: NULL when the day has no partition. The caller drops (schedulerd_drop_partition)
-- in the same transaction only when the count is 0.
CREATE FUNCTION schedulerd_lock_partition(day date) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    executions_partition text := 'executions_p' || to_char(day, 'YYYYMMDD');
    unfinished bigint;
BEGIN
    LOCK TABLE ONLY executions, ONLY attempts IN ACCESS EXCLUSIVE MODE;
    IF to_regclass(executions_partition) IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT count(*) FROM %I WHERE status IN (''pending'', ''queued'', ''running'')', executions_partition)
        INTO unfinished;
    RETURN unfinished;
END
$$;
