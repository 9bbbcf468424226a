-- Cancelling on request, and the record of bulk actions.
--
-- executions.cancelled_by: who asked to cancel this execution (a token, a CLI user). Set with
-- cancel_requested_at by a cancel; NULL where only an overlap policy (cancel_other) asked, so the
-- outcome's reason tells the two apart (cancelled | overlap). A running execution with it set is
-- never retried, handed back or parked into another attempt: it ends cancelled.
--
-- job_actions: one row per bulk action a tenant took (pause, resume, trigger, delete or cancel of
-- every job or execution matching a label selector or a filter), with how many jobs and
-- executions it touched, who did it and when. Dry runs write nothing.

ALTER TABLE executions ADD COLUMN cancelled_by text;

CREATE TABLE job_actions (
    id uuid PRIMARY KEY,
    tenant text NOT NULL,
    action text NOT NULL CHECK (action IN ('pause', 'resume', 'trigger', 'delete', 'cancel')),
    selector jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(selector) = 'object'),
    filter jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(filter) = 'object'),
    jobs_count integer NOT NULL DEFAULT 0,
    executions_count integer NOT NULL DEFAULT 0,
    actor text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX job_actions_tenant_at ON job_actions (tenant, at DESC, id DESC);
