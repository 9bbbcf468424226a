-- Recurring jobs: soft deletion (history stays visible), why an execution was skipped or
-- cancelled, and an index for the materialiser's "whose cursor is behind" scan.

ALTER TABLE jobs ADD COLUMN deleted_at timestamptz;
ALTER TABLE executions ADD COLUMN reason text;  -- misfire_skip | paused | deleted | late_replay
CREATE INDEX jobs_materialise ON jobs (materialised_to NULLS FIRST)
    WHERE schedule_kind = 'cron' AND enabled AND deleted_at IS NULL;
