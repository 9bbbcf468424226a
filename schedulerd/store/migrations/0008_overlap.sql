-- Overlap policy per job (issue 9): what happens to an occurrence that comes due while the job's
-- previous execution still runs. The guard state lives on the jobs row, whose lock serialises
-- two replicas claiming different executions of one job; `allow` jobs never read it.
ALTER TABLE jobs ADD COLUMN overlap text NOT NULL DEFAULT 'allow'
    CHECK (overlap IN ('allow', 'skip', 'buffer_one', 'cancel_other'));
-- The execution that last started under the guard: the job is busy while that row is running.
-- Its scheduled_for beside it, so the lookup visits one partition of executions.
ALTER TABLE jobs ADD COLUMN overlap_running uuid, ADD COLUMN overlap_running_for timestamptz;
-- The occurrence waiting for it (buffer_one, cancel_other): pending, reason overlap_buffered.
ALTER TABLE jobs ADD COLUMN overlap_waiting uuid, ADD COLUMN overlap_waiting_for timestamptz;
-- The sweeper's safety net finds waiting occurrences whose job is no longer busy.
CREATE INDEX jobs_overlap_waiting ON jobs (id) WHERE overlap_waiting IS NOT NULL;
-- cancel_other asks the running execution to stop; its worker learns it from the heartbeat.
ALTER TABLE executions ADD COLUMN cancel_requested_at timestamptz;
-- An attempt stopped by such a request is recorded as 'cancelled'. The check is found by what it
-- constrains rather than by name, so this works whatever name an earlier migration gave it.
DO $$
DECLARE
    name text;
BEGIN
    FOR name IN SELECT conname FROM pg_constraint
                WHERE conrelid = 'attempts'::regclass AND contype = 'c'
                  AND pg_get_constraintdef(oid) LIKE '%outcome%' LOOP
        EXECUTE format('ALTER TABLE attempts DROP CONSTRAINT %I', name);
    END LOOP;
END $$;
ALTER TABLE attempts ADD CONSTRAINT attempts_outcome_check
    CHECK (outcome IN ('succeeded', 'failed', 'timed_out', 'lease_expired', 'handed_back', 'cancelled'));
