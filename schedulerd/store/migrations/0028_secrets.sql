-- Tenant secrets and webhook signing keys, sealed (AES-256-GCM, schedulerd/keyring.py): only the
-- ciphertext and the id of the key that sealed it are stored; the tenant and name are bound into
-- the ciphertext, so a row copied under another tenant or name does not open. tenant is free text
-- with the tenants' rule, like jobs.tenant (operators may act for any tenant name from the CLI).

CREATE TABLE tenant_secrets (
    tenant     text NOT NULL CHECK (tenant ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    name       text NOT NULL CHECK (name ~ '^[A-Za-z0-9_.-]{1,64}$'),
    key_id     text NOT NULL,                 -- which [secrets] key sealed it
    sealed     bytea NOT NULL,                -- nonce + ciphertext + tag
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant, name)
);

CREATE TABLE signing_keys (
    id         text PRIMARY KEY,              -- k_ + 16 hex digits: public, sent in every signature header
    tenant     text NOT NULL CHECK (tenant ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    key_id     text NOT NULL,
    sealed     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    retires_at timestamptz                    -- set by the next rotation (grace period); past it the key no longer signs
);
CREATE INDEX signing_keys_tenant ON signing_keys (tenant, created_at DESC);
