-- The front door: task types the replicas can run, recorded so that producers (the Python
-- client, the CLI, an API replica without every handler module) check a task name without
-- importing handlers; and idempotency keys for any tenant name.

CREATE TABLE task_types (
    name         text PRIMARY KEY,
    worker_id    text NOT NULL,         -- the replica (with the worker role) that reported it last
    last_seen_at timestamptz NOT NULL   -- refreshed while that replica lives
);

-- Producers file jobs for any tenant name (the client, the CLI, as jobs.tenant always allowed),
-- and an idempotency key belongs to the tenant of its job, registered API tenant or not.
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_tenant_fkey;
