-- Jobs (definitions), executions (one dated occurrence each) and attempts (one row per finished
-- or abandoned attempt). Postgres is the record; Redis only indexes queued executions by due time.

CREATE TABLE jobs (
    id              uuid PRIMARY KEY,
    tenant          text NOT NULL,
    name            text,
    task            text NOT NULL,
    params          jsonb NOT NULL DEFAULT '{}',
    schedule_kind   text NOT NULL CHECK (schedule_kind IN ('now', 'at', 'cron')),
    run_at          timestamptz,                  -- 'at' and 'now' jobs
    cron            text,                         -- 'cron' jobs
    timezone        text NOT NULL DEFAULT 'UTC',  -- IANA zone the cron expression is read in
    misfire_policy  text NOT NULL DEFAULT 'run_once' CHECK (misfire_policy IN ('skip', 'run_once', 'catch_up')),
    catch_up_limit  integer NOT NULL DEFAULT 10,
    window_s        double precision NOT NULL DEFAULT 0,  -- smearing window; 0 = exact time
    max_attempts    integer NOT NULL CHECK (max_attempts >= 1),
    backoff_base_s  double precision NOT NULL,
    backoff_factor  double precision NOT NULL,
    backoff_max_s   double precision NOT NULL,
    timeout_s       double precision NOT NULL CHECK (timeout_s > 0),
    enabled         boolean NOT NULL DEFAULT true,
    materialised_to timestamptz,                  -- materialiser cursor (cron jobs)
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((schedule_kind = 'cron') = (cron IS NOT NULL))
);
CREATE INDEX jobs_tenant_created ON jobs (tenant, created_at DESC);

CREATE TABLE executions (
    id               uuid PRIMARY KEY,
    job_id           uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    tenant           text NOT NULL,
    scheduled_for    timestamptz NOT NULL,        -- the occurrence's nominal instant
    due_at           timestamptz NOT NULL,        -- when it may start next (scheduled_for, or a retry time)
    status           text NOT NULL CHECK (status IN ('pending', 'queued', 'running', 'succeeded', 'failed', 'skipped', 'cancelled')),
    attempt          integer NOT NULL DEFAULT 0,  -- attempts started so far (rises at claim)
    fence            bigint NOT NULL DEFAULT 0,   -- rises at every claim; guards every worker write
    lease_until      timestamptz,                 -- running only: the claim expires then
    worker           text,                        -- holder of the current or last attempt
    enqueued_at      timestamptz,
    first_started_at timestamptz,
    started_at       timestamptz,                 -- start of the current or last attempt
    finished_at      timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (job_id, scheduled_for)
);
-- Small partial indexes: each answers one loop's question as a range scan.
CREATE INDEX executions_pending_due ON executions (due_at) WHERE status = 'pending';
CREATE INDEX executions_queued_due ON executions (due_at) WHERE status = 'queued';
CREATE INDEX executions_running_lease ON executions (lease_until) WHERE status = 'running';
CREATE INDEX executions_tenant_recent ON executions (tenant, scheduled_for DESC, id DESC);

CREATE TABLE attempts (
    execution_id uuid NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    attempt      integer NOT NULL,
    fence        bigint NOT NULL,
    worker       text,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL,
    outcome      text NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'timed_out', 'lease_expired')),
    error        text,
    PRIMARY KEY (execution_id, fence)
);
