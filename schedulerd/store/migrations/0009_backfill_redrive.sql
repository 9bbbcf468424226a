-- Backfill, dead-letter redrive and pause notes (issue 9).
-- * executions.origin says where an occurrence came from; the slot key becomes
--   (job_id, scheduled_for, origin), so a backfilled or triggered run of an instant never takes
--   (or is blocked by) the scheduled run of the same instant. It keeps scheduled_for, so it stays
--   valid once executions is partitioned by scheduled_for (0007).
-- * redrives records every redrive of a failed execution (no foreign key: executions may be
--   partitioned, and a key on a partitioned table must include scheduled_for).
-- * jobs.paused_* say who paused a job and why; cleared on resume.

ALTER TABLE executions ADD COLUMN origin text NOT NULL DEFAULT 'scheduled'
    CHECK (origin IN ('scheduled', 'trigger', 'backfill'));
ALTER TABLE executions ADD COLUMN redrives integer NOT NULL DEFAULT 0;  -- times this execution was redriven

-- Drop the old (job_id, scheduled_for) key whatever it is called and however it was made (0001
-- made a constraint; 0007 may recreate it as a constraint or a unique index), then key slots by
-- origin too. A leftover two-column key would make a backfill of a scheduled instant fail instead
-- of coexisting with it.
DO $$
DECLARE
    key record;
BEGIN
    FOR key IN
        SELECT c.conname FROM pg_constraint c
        WHERE c.conrelid = 'executions'::regclass AND c.contype = 'u'
          AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a
               WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)) = ARRAY['job_id', 'scheduled_for']
    LOOP
        EXECUTE format('ALTER TABLE executions DROP CONSTRAINT %I', key.conname);
    END LOOP;
    FOR key IN
        SELECT i.indexrelid::regclass::text AS name FROM pg_index i
        WHERE i.indrelid = 'executions'::regclass AND i.indisunique AND NOT i.indisprimary
          AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
          AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a
               WHERE a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[])) = ARRAY['job_id', 'scheduled_for']
    LOOP
        EXECUTE format('DROP INDEX %s', key.name);
    END LOOP;
END
$$;
CREATE UNIQUE INDEX executions_slot ON executions (job_id, scheduled_for, origin);

-- The dead-letter list: failed executions of a tenant, most recently failed first. Partial, so
-- it costs nothing for executions that never fail.
CREATE INDEX executions_failed ON executions (tenant, finished_at DESC, id DESC) WHERE status = 'failed';

CREATE TABLE redrives (
    execution_id    uuid NOT NULL,
    fence           bigint NOT NULL,              -- the execution's fence after the redrive (attempts sort with it)
    redriven_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    redriven_by     text NOT NULL,                -- "cli:<user>" or "api:<tenant>"
    attempts_before integer NOT NULL,             -- attempts the spent budget had used
    error_before    text,                         -- the last error when it was redriven
    PRIMARY KEY (execution_id, fence)
);

ALTER TABLE jobs ADD COLUMN paused_note text;
ALTER TABLE jobs ADD COLUMN paused_by text;
ALTER TABLE jobs ADD COLUMN paused_at timestamptz;
