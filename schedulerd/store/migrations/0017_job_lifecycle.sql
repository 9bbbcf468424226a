-- A job's lifecycle after it is created: edited in place, bounded, labelled.
--
-- version: rises by one at every edit; each execution records the version that wrote it
-- (job_version; NULL on rows written before versions existed, read as 1), so history says which
-- spec an occurrence came from and an edit can tell the rows it wrote from the ones it replaces.
--
-- labels: {key: value} strings a tenant filters and acts on by selector (`team=billing,env=prod`
-- is `labels @> '{"team": "billing", "env": "prod"}'`). They live on the job only: executions are
-- filtered through their job, so an edit of a label applies at once to its whole history and an
-- execution row carries nothing extra.
--
-- start_at / end_at / max_runs bound a recurring schedule: no occurrence before start_at, none at
-- or after end_at, at most max_runs written (runs_written counts them, so retention dropping old
-- rows never lets a bounded job run again). done_at: the schedule has no future occurrence; the
-- materialiser never writes for it again.

ALTER TABLE jobs
    ADD COLUMN version integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    ADD COLUMN labels jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
    ADD COLUMN start_at timestamptz,
    ADD COLUMN end_at timestamptz,
    ADD COLUMN max_runs integer CHECK (max_runs >= 1),
    ADD COLUMN runs_written integer NOT NULL DEFAULT 0,
    ADD COLUMN done_at timestamptz,
    ADD CONSTRAINT jobs_bounds_check CHECK (start_at IS NULL OR end_at IS NULL OR start_at < end_at);

ALTER TABLE executions ADD COLUMN job_version integer;

CREATE INDEX jobs_labels ON jobs USING gin (labels jsonb_path_ops);
