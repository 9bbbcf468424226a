-- The HTTP API: tenants, their bearer tokens (only a SHA-256 of each is kept), and the
-- Idempotency-Key of each create, with the first response so a retry gets it back.
-- jobs.tenant stays free text: operators may file jobs for any tenant name from the CLI.

CREATE TABLE tenants (
    name       text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE api_tokens (
    id           uuid PRIMARY KEY,
    tenant       text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
    token_hash   bytea NOT NULL UNIQUE,           -- sha256 of the token; the token itself is shown once
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_used_at timestamptz,                     -- refreshed at most once a minute
    revoked_at   timestamptz
);
CREATE INDEX api_tokens_tenant ON api_tokens (tenant);

CREATE TABLE idempotency_keys (
    tenant       text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
    key          text NOT NULL,
    request_hash bytea NOT NULL,                  -- sha256 of the request body: a reused key with another body is refused
    job_id       uuid NOT NULL,
    response     jsonb NOT NULL,                  -- the first response, replayed verbatim
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant, key)
);
