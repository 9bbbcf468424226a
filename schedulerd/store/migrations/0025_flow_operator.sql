-- Tenant in-flight quotas an operator sets at runtime (`schedulerd tenant quota`), over
-- [concurrency].tenants and tenant_default: every replica reads them each [concurrency].refresh_s
-- (schedulerd/tenant_quotas.py). No reference to tenants: a tenant that only enqueues through the
-- client or the CLI has no API registration and may still be given a quota.
CREATE TABLE tenant_quotas (
    tenant text PRIMARY KEY,
    in_flight integer NOT NULL CHECK (in_flight BETWEEN 1 AND 100000),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Executions parked now (queued again unrun with a park reason, due again later): the operator's
-- "parked by reason" (schedulerd status, the [ops] page, the schedulerd_parked_by_reason gauge)
-- reads only them, never the dispatch horizon's queued rows. A claim leaves the index (running).
CREATE INDEX executions_parked ON executions (due_at)
    WHERE status = 'queued' AND reason IN ('task_limit', 'rate_limited', 'breaker_open', 'admit_error');
