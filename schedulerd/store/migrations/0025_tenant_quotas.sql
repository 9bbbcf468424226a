-- Tenant in-flight quotas an operator sets at runtime (`schedulerd tenant quota`), over
-- [concurrency].tenants and tenant_default: every replica reads them each [concurrency].refresh_s
-- (schedulerd/tenant_quotas.py). No reference to tenants: a tenant that only enqueues through the
-- client or the CLI has no API registration and may still be given a quota.
CREATE TABLE tenant_quotas (
    tenant text PRIMARY KEY,
    in_flight integer NOT NULL CHECK (in_flight BETWEEN 1 AND 100000),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
