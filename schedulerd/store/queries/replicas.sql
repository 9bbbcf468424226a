-- The fleet: Postgres's clock, replicas' heartbeats, the task types live workers run, and the
-- migrations applied.

-- name: clock_now
-- Postgres's clock: the one clock that judges due times and leases.
SELECT clock_timestamp();

-- name: replica_report
-- A replica says it is alive (every observer pass); rows of replicas gone for a day are removed.
WITH gone AS (DELETE FROM replicas WHERE last_seen_at < clock_timestamp() - interval '1 day')
INSERT INTO replicas (worker_id, hostname, pid, roles, version, started_at, last_seen_at)
VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp())
ON CONFLICT (worker_id) DO UPDATE SET hostname = excluded.hostname, pid = excluded.pid, roles = excluded.roles,
    version = excluded.version, started_at = excluded.started_at, last_seen_at = excluded.last_seen_at;

-- name: replica_get
-- The replica registered under worker id $1, if any, with how long ago it last reported.
SELECT hostname, pid, started_at, last_seen_at, extract(epoch FROM clock_timestamp() - last_seen_at)::float8 AS seen_ago_s
FROM replicas WHERE worker_id = $1;

-- name: replica_claim
-- A replica starting takes its worker id: registered as alive now, provided the row is as the
-- caller judged it ($7: the last_seen_at it read, NULL when there was none). Returns nothing when
-- another process with that id reported in between (the caller judges again).
INSERT INTO replicas (worker_id, hostname, pid, roles, version, started_at, last_seen_at)
VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp())
ON CONFLICT (worker_id) DO UPDATE SET hostname = excluded.hostname, pid = excluded.pid, roles = excluded.roles,
    version = excluded.version, started_at = excluded.started_at, last_seen_at = excluded.last_seen_at
WHERE replicas.last_seen_at IS NOT DISTINCT FROM $7::timestamptz
RETURNING worker_id;

-- name: replica_list
-- Replicas seen within the last $1 seconds, most recently started first.
SELECT *, clock_timestamp() - last_seen_at AS seen_ago FROM replicas
WHERE last_seen_at > clock_timestamp() - make_interval(secs => $1)
ORDER BY started_at DESC;

-- name: server_is_primary
-- Whether this connection reaches a primary (a standby answers reads but refuses writes).
SELECT NOT pg_is_in_recovery();

-- name: migration_applied
-- Migrations recorded by yoyo: /readyz compares them with the ones this code ships.
SELECT migration_id FROM _yoyo_migration;

-- name: task_type_report
-- A replica with the worker role says which task types it runs (at start and every observer pass).
INSERT INTO task_types (name, worker_id, last_seen_at)
SELECT n, $2, clock_timestamp() FROM unnest($1::text[]) AS n
ON CONFLICT (name) DO UPDATE SET worker_id = excluded.worker_id, last_seen_at = excluded.last_seen_at;

-- name: task_type_live
-- Task types some worker replica reported within the last $1 seconds: what producers may enqueue.
SELECT name FROM task_types WHERE last_seen_at > clock_timestamp() - make_interval(secs => $1) ORDER BY name;
