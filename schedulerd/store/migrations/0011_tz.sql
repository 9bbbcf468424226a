-- Schedules and the tz database: the tzdata version that resolved each cron job's written
-- occurrences (recomputed at start when the installed one differs), per-job overrides of the
-- DST rule, and a record of each recompute's moved jobs (`schedulerd tz report`).

ALTER TABLE jobs ADD COLUMN tzdata_version text;  -- NULL: written before versions were recorded; 'mixed': by replicas on different versions
ALTER TABLE jobs ADD COLUMN dst_repeated text CHECK (dst_repeated IN ('first', 'both'));  -- NULL: the DST rule
ALTER TABLE jobs ADD COLUMN dst_missing text CHECK (dst_missing IN ('shift', 'skip'));  -- NULL: the DST rule

CREATE TABLE tz_recomputes (
    id             bigserial PRIMARY KEY,
    tzdata_version text NOT NULL,                -- the installed version jobs were recomputed with
    tzdata_source  text NOT NULL,                -- where zoneinfo reads it (a directory or the tzdata package)
    worker         text NOT NULL,                -- the replica that ran it
    started_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at    timestamptz,
    jobs_checked   integer NOT NULL DEFAULT 0,
    jobs_moved     integer NOT NULL DEFAULT 0
);

-- One row per job whose future instants moved in a recompute (no foreign key: jobs are
-- soft-deleted and tenants' history is kept as is).
CREATE TABLE tz_moved_jobs (
    recompute_id   bigint NOT NULL REFERENCES tz_recomputes (id) ON DELETE CASCADE,
    job_id         uuid NOT NULL,
    tenant         text NOT NULL,
    old_version    text,                         -- the job's recorded version before
    removed        integer NOT NULL,             -- future occurrences that no longer match, deleted (never started)
    added          integer NOT NULL,             -- occurrences the new rules produce, written (a paused job's at its resume)
    moves          jsonb NOT NULL,               -- up to 20 [old, new] UTC pairs, oldest first (null: none)
    PRIMARY KEY (recompute_id, job_id)
);
