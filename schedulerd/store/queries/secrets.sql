-- Tenant secrets and webhook signing keys (sealed: schedulerd/keyring.py). Every statement names
-- the tenant, so one tenant never reads, changes or learns of another's.

-- name: secrets_lock_tenant
-- Inside a transaction: serialise writes of tenant $1's secrets (or, with another $1 namespace,
-- its signing keys) until the commit, so a count checked before an insert still holds at commit.
SELECT pg_advisory_xact_lock(hashtextextended('schedulerd.secrets/' || $1, 0));

-- name: secret_count
-- How many secrets tenant $1 holds, and whether one is named $2 (a write to it replaces it).
SELECT count(*) AS held, bool_or(name = $2) AS exists FROM tenant_secrets WHERE tenant = $1;

-- name: secret_put
-- Store or replace tenant $1's secret $2 (sealed $4 under key $3); returns its listing.
INSERT INTO tenant_secrets (tenant, name, key_id, sealed) VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant, name) DO UPDATE
    SET key_id = excluded.key_id, sealed = excluded.sealed, updated_at = clock_timestamp()
RETURNING name, created_at, updated_at;

-- name: secret_list
-- Tenant $1's secrets by name: names and times only, never the sealed value.
SELECT name, created_at, updated_at FROM tenant_secrets WHERE tenant = $1 ORDER BY name;

-- name: secret_get_many
-- The sealed values of tenant $1's secrets named in $2 (the names it lacks are absent).
SELECT name, key_id, sealed FROM tenant_secrets WHERE tenant = $1 AND name = ANY($2::text[]);

-- name: secret_delete
-- Delete tenant $1's secret $2; returns its listing, or nothing when the tenant has no such secret.
DELETE FROM tenant_secrets WHERE tenant = $1 AND name = $2 RETURNING name, created_at, updated_at;

-- name: secret_sealed_by_other_keys
-- Up to $2 secrets sealed with a key other than $1 (for reseal), in key order.
SELECT tenant, name, key_id, sealed FROM tenant_secrets WHERE key_id <> $1 ORDER BY tenant, name LIMIT $2;

-- name: secret_reseal
-- Replace a secret's sealed value with one under key $4, unless it was written since it was read
-- (still under key $3).
UPDATE tenant_secrets SET key_id = $4, sealed = $5 WHERE tenant = $1 AND name = $2 AND key_id = $3;

-- name: signing_key_prune
-- Delete tenant $1's signing keys whose grace period has ended (they sign nothing any more).
DELETE FROM signing_keys WHERE tenant = $1 AND retires_at <= clock_timestamp();

-- name: signing_key_retire_older
-- A rotation: tenant $1's live keys stop signing $2 seconds from now (sooner when already due).
UPDATE signing_keys SET retires_at = least(coalesce(retires_at, 'infinity'), clock_timestamp() + make_interval(secs => $2))
WHERE tenant = $1 AND (retires_at IS NULL OR retires_at > clock_timestamp());

-- name: signing_key_insert
-- Record tenant $2's new signing key $1 (sealed $4 under key $3); returns its listing.
INSERT INTO signing_keys (id, tenant, key_id, sealed) VALUES ($1, $2, $3, $4)
RETURNING id, created_at, retires_at;

-- name: signing_key_list
-- Tenant $1's live signing keys, newest first: ids and times only.
SELECT id, created_at, retires_at FROM signing_keys
WHERE tenant = $1 AND (retires_at IS NULL OR retires_at > clock_timestamp())
ORDER BY created_at DESC, id DESC;

-- name: signing_key_live
-- Tenant $1's live signing keys with their sealed secrets, newest first (the worker signs with each).
SELECT id AS name, key_id, sealed FROM signing_keys
WHERE tenant = $1 AND (retires_at IS NULL OR retires_at > clock_timestamp())
ORDER BY created_at DESC, id DESC;

-- name: signing_key_delete
-- Retire tenant $1's signing key $2 at once (the row and its secret go); returns its listing with
-- the time of retirement, or nothing when the tenant has no such live key.
DELETE FROM signing_keys WHERE tenant = $1 AND id = $2 AND (retires_at IS NULL OR retires_at > clock_timestamp())
RETURNING id, created_at, clock_timestamp() AS retires_at;

-- name: signing_key_sealed_by_other_keys
-- Up to $2 signing keys sealed with a key other than $1 (for reseal).
SELECT tenant, id, key_id, sealed FROM signing_keys WHERE key_id <> $1 ORDER BY id LIMIT $2;

-- name: signing_key_reseal
-- Replace a signing key's sealed value with one under key $3, unless it changed since it was read.
UPDATE signing_keys SET key_id = $3, sealed = $4 WHERE id = $1 AND key_id = $2;
