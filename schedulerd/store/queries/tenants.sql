-- Tenants, their API tokens (hashes only) and the idempotency keys of their creates.

-- name: tenant_insert
-- Register a tenant; returns nothing when the name is taken.
INSERT INTO tenants (name) VALUES ($1) ON CONFLICT DO NOTHING RETURNING name, created_at;

-- name: token_insert
-- Record a token's hash ($3) for tenant $2 under id $1; returns nothing when there is no such tenant.
INSERT INTO api_tokens (id, tenant, token_hash)
SELECT $1, name, $3 FROM tenants WHERE name = $2
RETURNING id;

-- name: token_authenticate
-- The live token with this hash: its id and tenant. Notes its use, at most once a minute so a
-- busy client does not turn every read into a write.
WITH found AS (
    SELECT id, tenant, last_used_at FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL
), touched AS (
    UPDATE api_tokens t SET last_used_at = clock_timestamp() FROM found f
    WHERE t.id = f.id AND (f.last_used_at IS NULL OR f.last_used_at < clock_timestamp() - interval '1 minute')
)
SELECT id, tenant FROM found;

-- name: token_list
-- Tenant $1's tokens, newest first: id, when made, last used (to the minute), revoked.
SELECT id, tenant, created_at, last_used_at, revoked_at FROM api_tokens
WHERE tenant = $1
ORDER BY created_at DESC, id DESC;

-- name: token_revoke
-- Revoke token $1 (only tenant $2's when $2 is not null); returns it, or nothing when there is no
-- such token. Revoking a revoked token keeps its first revocation time.
UPDATE api_tokens SET revoked_at = coalesce(revoked_at, clock_timestamp())
WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)
RETURNING id, tenant, created_at, last_used_at, revoked_at;

-- name: idempotency_prune
-- Delete up to $2 idempotency keys older than $1 seconds (they replay nothing any more); returns
-- how many went, so the caller repeats while a batch comes back full.
WITH expired AS (
    SELECT tenant, key FROM idempotency_keys
    WHERE created_at <= clock_timestamp() - make_interval(secs => $1)
    ORDER BY created_at
    LIMIT $2
)
DELETE FROM idempotency_keys k USING expired e
WHERE k.tenant = e.tenant AND k.key = e.key
  AND k.created_at <= clock_timestamp() - make_interval(secs => $1);

-- name: idempotency_claim_many
-- Take idempotency keys for new jobs: (tenant, key, request hash, job, response JSON text) per
-- row. A key held by a live entry (younger than $6 s) is not taken; an older one is replaced.
-- Returns the (tenant, key) pairs taken. A concurrent claim of the same key waits on its row
-- lock until the first transaction ends.
INSERT INTO idempotency_keys (tenant, key, request_hash, job_id, response)
SELECT k.tenant, k.key, k.request_hash, k.job_id, k.response::jsonb
FROM unnest($1::text[], $2::text[], $3::bytea[], $4::uuid[], $5::text[]) AS k(tenant, key, request_hash, job_id, response)
ON CONFLICT (tenant, key) DO UPDATE
    SET request_hash = excluded.request_hash, job_id = excluded.job_id, response = excluded.response,
        created_at = clock_timestamp()
    WHERE idempotency_keys.created_at <= clock_timestamp() - make_interval(secs => $6)
RETURNING tenant, key;

-- name: idempotency_get_many
-- The live entries (younger than $3 s) of these (tenant, key) pairs.
SELECT i.tenant, i.key, i.request_hash, i.job_id, i.response FROM idempotency_keys i
JOIN unnest($1::text[], $2::text[]) AS k(tenant, key) ON i.tenant = k.tenant AND i.key = k.key
WHERE i.created_at > clock_timestamp() - make_interval(secs => $3);

-- name: tenant_quota_set
-- Set tenant $1's in-flight quota to $2 (it overrides [concurrency]); returns the row.
INSERT INTO tenant_quotas (tenant, in_flight) VALUES ($1, $2)
ON CONFLICT (tenant) DO UPDATE SET in_flight = excluded.in_flight, updated_at = clock_timestamp()
RETURNING tenant, in_flight, updated_at;

-- name: tenant_quota_clear
-- Remove tenant $1's runtime quota ([concurrency] applies again); returns it, or nothing when none was set.
DELETE FROM tenant_quotas WHERE tenant = $1 RETURNING tenant, in_flight, updated_at;

-- name: tenant_quota_list
-- Every runtime quota, by tenant.
SELECT tenant, in_flight, updated_at FROM tenant_quotas ORDER BY tenant;
