-- Notifications and pause after repeated failures (schedulerd/notifier.py, core/notify.py).
--
-- A job's own notification setting: notify_on NULL takes its tenant's (notify_settings); an
-- empty array sends nothing for this job. pause_after_failures NULL: never paused for failing.
ALTER TABLE jobs ADD COLUMN notify_url text, ADD COLUMN notify_on text[], ADD COLUMN pause_after_failures integer,
    ADD CONSTRAINT jobs_pause_after_failures CHECK (pause_after_failures BETWEEN 1 AND 1000);
-- The notifier's scans start from the tenants that watch something: a handful of jobs, indexed alone.
CREATE INDEX jobs_watched ON jobs (tenant) WHERE notify_on IS NOT NULL OR pause_after_failures IS NOT NULL;

-- A tenant's notification setting (GET/PUT /v1/notifications), for its jobs without their own.
CREATE TABLE notify_settings (
    tenant text PRIMARY KEY,
    url text NOT NULL,
    events text[] NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Every transition the notifier judged, once: UNIQUE (execution_id, round, event), so replicas
-- and restarts judging the same execution again write nothing (round: the execution's redrives,
-- so a redriven execution failing again is a new transition). status: pending (to send, due at
-- next_attempt_at; a sender's claim moves next_attempt_at past its lease), sent, given_up
-- (attempts spent), unsent (recorded for the failing state or a pause: no URL or event
-- not subscribed). The id is the notice's stable id (X-Schedulerd-Notification-Id).
CREATE TABLE notifications (
    id uuid PRIMARY KEY,
    tenant text NOT NULL,
    job_id uuid NOT NULL,
    execution_id uuid NOT NULL,
    round integer NOT NULL DEFAULT 0,
    event text NOT NULL,
    finished_at timestamptz,
    url text,
    payload jsonb NOT NULL,
    status text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_status integer,
    last_error text,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    sent_at timestamptz,
    UNIQUE (execution_id, round, event)
);
CREATE INDEX notifications_due ON notifications (next_attempt_at) WHERE status = 'pending';
CREATE INDEX notifications_tenant_recent ON notifications (tenant, created_at DESC);
CREATE INDEX notifications_created ON notifications (created_at);  -- pruning after [notify].keep_s
-- Where a tenant's walk of its failures starts: a minute before the newest one judged.
CREATE INDEX notifications_tenant_failed ON notifications (tenant, finished_at) WHERE event IN ('failure', 'dead_letter');

-- A watched job's failing state: failed_at is the finish of the newest failure judged (NULL: not
-- failing; a recovery clears it), streak_from where its count of consecutive failures starts
-- again (the failure that paused it).
CREATE TABLE notify_jobs (
    job_id uuid PRIMARY KEY,
    tenant text NOT NULL,
    failed_at timestamptz,
    failed_scheduled_for timestamptz,
    streak_from timestamptz
);
CREATE INDEX notify_jobs_failing ON notify_jobs (job_id) WHERE failed_at IS NOT NULL;
