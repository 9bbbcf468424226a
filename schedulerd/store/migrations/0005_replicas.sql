-- Replicas report themselves every few seconds, so an operator sees who is alive, with which
-- roles and version (schedulerd status).
CREATE TABLE replicas (
    worker_id    text PRIMARY KEY,
    hostname     text NOT NULL,
    pid          integer NOT NULL,
    roles        text[] NOT NULL,
    version      text NOT NULL,
    started_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL
);

-- "What happened in the last minutes" (status, dashboard) as a range scan. scheduled_for never
-- changes after insert, so this index costs one entry per execution and nothing per update.
CREATE INDEX executions_scheduled_for ON executions (scheduled_for);
