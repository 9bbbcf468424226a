-- Debounced creates (schedulerd/intake.py): one row per (tenant, key) naming the execution that a
-- burst of creates with that key shares while it has not started. A create locks its key's row
-- (made if new) before it judges, so two creates with one key queue up behind each other.
CREATE TABLE debounces (
    tenant text NOT NULL,
    key text NOT NULL,
    job_id uuid,
    execution_id uuid,
    scheduled_for timestamptz,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant, key)
);
CREATE INDEX debounces_updated_at ON debounces (updated_at);
