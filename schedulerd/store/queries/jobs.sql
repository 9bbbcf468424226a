-- Job definitions: create (with each one-off's execution), read, page, lock, pause,
-- delete, and the materialiser's cursor.

-- name: job_get
-- One job by id (deleted ones too: their history stays visible).
SELECT * FROM jobs WHERE id = $1;

-- name: job_get_many
-- These jobs, where they exist: a create whose commit outcome was unknown reads what it wrote.
SELECT * FROM jobs WHERE id = ANY($1::uuid[]);

-- name: job_lock
-- Lock one live job for a change of state (pause, resume, delete, materialise on create).
SELECT * FROM jobs WHERE id = $1 AND deleted_at IS NULL FOR UPDATE;

-- name: job_lock_shared
-- Hold one job (deleted ones too) against pause, resume and delete until the commit, for a write
-- judged on its state (trigger, backfill). FOR SHARE: two triggers of one job do not wait on
-- each other, and a pause or delete that waited cancels what was written.
SELECT * FROM jobs WHERE id = $1 FOR SHARE;

-- name: job_lock_for_edit
-- Lock one job (deleted ones too, so an edit can say so) for an edit: FOR UPDATE, so the
-- materialiser (SKIP LOCKED), a pause, a trigger and another edit wait for its commit.
SELECT * FROM jobs WHERE id = $1 FOR UPDATE;

-- name: job_update
-- Write an edited definition ($2..$19, as jobs.validate returns them; params as JSON text), one
-- version up, with its materialiser cursor $20. $21: the tz database the edit wrote occurrences
-- with (NULL: none written); rows of another version make it 'mixed', as job_advance_cursor_many.
-- $22: the occurrences it wrote, counted in runs_written as the materialiser's are. $23: priority.
-- $24-$28: the concurrency key and limit, the rate key, limit and window. $29-$31: the notification
-- URL, its events (NULL: the tenant's setting) and pause_after_failures.
UPDATE jobs SET name = $2, params = $3::text::jsonb, schedule_kind = $4, run_at = $5, cron = $6, timezone = $7,
       misfire_policy = $8, catch_up_limit = $9, window_s = $10, max_attempts = $11, backoff_base_s = $12,
       backoff_factor = $13, backoff_max_s = $14, timeout_s = $15, dst_repeated = $16, dst_missing = $17,
       overlap = $18, labels = coalesce($19::text::jsonb, labels), materialised_to = $20,
       tzdata_version = CASE WHEN $21::text IS NULL OR tzdata_version IS NOT DISTINCT FROM $21 THEN coalesce(tzdata_version, $21)
                             ELSE 'mixed' END,
       runs_written = runs_written + $22, priority = $23, concurrency_key = $24, concurrency_limit = $25,
       rate_key = $26, rate_limit = $27, rate_window_s = $28, notify_url = $29, notify_on = $30::text[],
       pause_after_failures = $31, version = version + 1, updated_at = clock_timestamp()
WHERE id = $1 AND deleted_at IS NULL
RETURNING *;

-- name: job_set_enabled
-- Pause or resume; resuming restarts the cursor at $3 (now), so a pause is never caught up.
-- Pausing records the note ($4) and who paused ($5); resuming clears them.
UPDATE jobs SET enabled = $2, materialised_to = CASE WHEN $2 THEN $3 ELSE materialised_to END,
       paused_note = CASE WHEN $2 THEN NULL ELSE $4 END, paused_by = CASE WHEN $2 THEN NULL ELSE $5 END,
       paused_at = CASE WHEN $2 THEN NULL ELSE clock_timestamp() END,
       updated_at = clock_timestamp()
WHERE id = $1 AND deleted_at IS NULL
RETURNING *;

-- name: job_delete
-- Soft-delete: the job stops, its history stays.
UPDATE jobs SET enabled = false, deleted_at = clock_timestamp(), updated_at = clock_timestamp()
WHERE id = $1 AND deleted_at IS NULL
RETURNING *;

-- name: job_due_for_materialising
-- Enabled cron jobs (not done) whose cursor is behind now + horizon ($1 seconds), most behind first, at
-- most $2; locked with SKIP LOCKED so replicas split the work. Call inside a transaction.
SELECT *, clock_timestamp() AS now FROM jobs
WHERE schedule_kind = 'cron' AND enabled AND deleted_at IS NULL AND done_at IS NULL
  AND (materialised_to IS NULL OR materialised_to < clock_timestamp() + make_interval(secs => $1))
ORDER BY materialised_to NULLS FIRST
LIMIT $2 FOR UPDATE SKIP LOCKED;

-- name: job_advance_cursor_many
-- Move materialisers' cursors: every occurrence up to the new value has been written, with tz
-- database $3. A job whose rows came from another version is marked 'mixed', which differs from
-- every installed version, so the next start recomputes it (a rolling upgrade loses nothing).
-- In the transaction that wrote them: runs_written grows by the occurrences written ($4), and a
-- bounded job with nothing left to write ($5) is done, never materialised again.
UPDATE jobs j SET materialised_to = c.materialised_to,
       tzdata_version = CASE WHEN j.tzdata_version = $3 THEN $3 ELSE 'mixed' END,
       runs_written = j.runs_written + c.written,
       done_at = CASE WHEN c.done THEN coalesce(j.done_at, clock_timestamp()) ELSE j.done_at END
FROM unnest($1::uuid[], $2::timestamptz[], $4::int[], $5::bool[]) AS c(id, materialised_to, written, done)
WHERE j.id = c.id;

-- name: job_horizon
-- The materialiser horizon: the least-advanced cursor of enabled cron jobs not done (NULL: none).
SELECT min(materialised_to) AS horizon, clock_timestamp() AS now FROM jobs
WHERE schedule_kind = 'cron' AND enabled AND deleted_at IS NULL AND done_at IS NULL;

-- name: job_horizon_tenant
-- job_horizon over one tenant's jobs ($1): what its overview shows, which says nothing of others'.
SELECT min(materialised_to) AS horizon, clock_timestamp() AS now FROM jobs
WHERE tenant = $1 AND schedule_kind = 'cron' AND enabled AND deleted_at IS NULL AND done_at IS NULL;

-- name: job_page
-- One tenant's jobs newest first, after the cursor ($3 created_at, $4 id); deleted ones when $2.
-- Filters, each NULL for none: a name pattern ($6, LIKE: a prefix, its wildcards escaped), a task
-- ($7), a kind ($8: cron | one-off), a label selector ($9: labels @> it) and states ($10, as
-- jobs.job_state words them: a one-off is done when none of its executions is unfinished).
SELECT * FROM jobs
WHERE tenant = $1 AND ($2 OR deleted_at IS NULL) AND (created_at, id) < ($3, $4)
  AND ($6::text IS NULL OR name LIKE $6 ESCAPE '\') AND ($7::text IS NULL OR task = $7)
  AND ($8::text IS NULL OR (schedule_kind = 'cron') = ($8 = 'cron'))
  AND ($9::jsonb IS NULL OR labels @> $9)
  AND ($10::text[] IS NULL OR CASE
        WHEN deleted_at IS NOT NULL THEN 'deleted'
        WHEN NOT enabled THEN 'paused'
        WHEN done_at IS NOT NULL OR (schedule_kind <> 'cron' AND NOT EXISTS (
            SELECT FROM executions e WHERE e.job_id = jobs.id AND e.status IN ('pending', 'queued', 'running')))
            THEN 'done'
        ELSE 'enabled' END = ANY($10))
ORDER BY created_at DESC, id DESC
LIMIT $5;

-- name: job_page_any_tenant
-- job_page over every tenant's jobs ($1 unused: NULL), for the operator's CLI.
SELECT * FROM jobs
WHERE $1::text IS NULL AND ($2 OR deleted_at IS NULL) AND (created_at, id) < ($3, $4)
  AND ($6::text IS NULL OR name LIKE $6 ESCAPE '\') AND ($7::text IS NULL OR task = $7)
  AND ($8::text IS NULL OR (schedule_kind = 'cron') = ($8 = 'cron'))
  AND ($9::jsonb IS NULL OR labels @> $9)
  AND ($10::text[] IS NULL OR CASE
        WHEN deleted_at IS NOT NULL THEN 'deleted'
        WHEN NOT enabled THEN 'paused'
        WHEN done_at IS NOT NULL OR (schedule_kind <> 'cron' AND NOT EXISTS (
            SELECT FROM executions e WHERE e.job_id = jobs.id AND e.status IN ('pending', 'queued', 'running')))
            THEN 'done'
        ELSE 'enabled' END = ANY($10))
ORDER BY created_at DESC, id DESC
LIMIT $5;

-- name: job_settled_many
-- Of the jobs in $1, the one-offs none of whose executions is pending, queued or running (their
-- run is final: jobs.job_state shows them done).
SELECT id FROM jobs
WHERE id = ANY($1::uuid[]) AND schedule_kind <> 'cron' AND NOT EXISTS (
    SELECT FROM executions e WHERE e.job_id = jobs.id AND e.status IN ('pending', 'queued', 'running'));

-- name: job_last_executions
-- For each job in $1, its latest execution that started or was skipped (the "last outcome").
SELECT j.id AS job_id, l.id, l.status, l.scheduled_for, l.finished_at
FROM unnest($1::uuid[]) AS j(id)
CROSS JOIN LATERAL (
    SELECT e.id, e.status, e.scheduled_for, e.finished_at FROM executions e
    WHERE e.job_id = j.id AND e.status IN ('running', 'succeeded', 'failed', 'skipped')
    ORDER BY e.scheduled_for DESC LIMIT 1
) l;

-- name: job_insert_many
-- Record many job definitions in one statement (the front door's creates): one array per column,
-- params and labels as JSON text, all created at $22 (the batch's instant on Postgres's clock, which the
-- caller read), with the one execution of each one-off job ($23: its id; NULL for a cron job,
-- which the materialiser's service writes), scheduled and due at its run_at. So a batch of
-- one-offs, a single one too, costs one round trip and needs no transaction of its own. Those due
-- inside the dispatch horizon ($24 s) are queued for the caller's ZADD after its commit, unless
-- $25 is false: inside an application's own transaction the commit is not ours to see, so they
-- stay pending and the dispatcher enqueues them once they are visible. $26-$29: labels (JSON
-- text), start_at, end_at, max_runs, $30: priority (the one-off's execution carries it too), $31-$35: the
-- concurrency key and limit, the rate key, limit and window (core/flow.py), $36: the producer's
-- traceparent, written on the one-off's execution (schedulerd/tracing.py), $37-$39: the notification
-- URL, its events (comma-separated text; NULL: the tenant's setting) and pause_after_failures. Returns only the ids
-- written pending: usually none, and a row per execution cost the bulk create more than its
-- insert did.
WITH j AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[],
                         $8::text[], $9::text[], $10::text[], $11::int[], $12::float8[], $13::int[], $14::float8[],
                         $15::float8[], $16::float8[], $17::float8[], $18::text[], $19::text[], $20::text[], $21::text[],
                         $26::text[], $27::timestamptz[], $28::timestamptz[], $29::int[], $30::smallint[], $31::text[],
                         $32::int[], $33::text[], $34::int[], $35::float8[], $36::text[], $37::text[], $38::text[],
                         $39::int[], $23::uuid[])
        AS j(id, tenant, name, task, params, schedule_kind, run_at, cron, timezone, misfire_policy, catch_up_limit,
             window_s, max_attempts, backoff_base_s, backoff_factor, backoff_max_s, timeout_s, dst_repeated,
             dst_missing, tzdata_version, overlap, labels, start_at, end_at, max_runs, priority, concurrency_key,
             concurrency_limit, rate_key, rate_limit, rate_window_s, traceparent, notify_url, notify_on,
             pause_after_failures, execution_id)
), job AS (
    INSERT INTO jobs (id, tenant, name, task, params, schedule_kind, run_at, cron, timezone,
                      misfire_policy, catch_up_limit, window_s, max_attempts, backoff_base_s,
                      backoff_factor, backoff_max_s, timeout_s, dst_repeated, dst_missing, tzdata_version, overlap,
                      labels, start_at, end_at, max_runs, priority, concurrency_key, concurrency_limit, rate_key,
                      rate_limit, rate_window_s, notify_url, notify_on, pause_after_failures, created_at, updated_at)
    SELECT j.id, j.tenant, j.name, j.task, j.params::jsonb, j.schedule_kind, j.run_at, j.cron, j.timezone,
           j.misfire_policy, j.catch_up_limit, j.window_s, j.max_attempts, j.backoff_base_s,
           j.backoff_factor, j.backoff_max_s, j.timeout_s, j.dst_repeated, j.dst_missing, j.tzdata_version, j.overlap,
           j.labels::jsonb, j.start_at, j.end_at, j.max_runs, j.priority, j.concurrency_key, j.concurrency_limit,
           j.rate_key, j.rate_limit, j.rate_window_s, j.notify_url, string_to_array(j.notify_on, ','),
           j.pause_after_failures, $22, $22
    FROM j
), execution AS (
    INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at, job_version, priority,
                            traceparent)
    SELECT j.execution_id, j.id, j.tenant, j.run_at, j.run_at,
           CASE WHEN $25 AND j.run_at <= clock_timestamp() + make_interval(secs => $24) THEN 'queued' ELSE 'pending' END,
           CASE WHEN $25 AND j.run_at <= clock_timestamp() + make_interval(secs => $24) THEN clock_timestamp() END, 1,
           j.priority, j.traceparent
    FROM j WHERE j.execution_id IS NOT NULL
    RETURNING id, status
)
SELECT coalesce(array_agg(id) FILTER (WHERE status = 'pending'), '{}') AS pending FROM execution;


-- name: job_source_lock
-- Serialise applies of one source ($1 tenant, $2 source) until the transaction ends, so two
-- applies cannot both add the same name. Call inside a transaction.
SELECT pg_advisory_xact_lock(hashtextextended('schedulerd.apply/' || $1 || '/' || $2, 0));

-- name: job_lock_source
-- The live jobs of source $2 of tenant $1, locked FOR UPDATE in id order (as every multi-row lock), each with
-- applied_version (the version the last apply left it at). Call inside a transaction.
SELECT * FROM jobs WHERE tenant = $1 AND source = $2 AND deleted_at IS NULL ORDER BY id FOR UPDATE;

-- name: job_mark_applied_many
-- Record that an apply of source $2 left these jobs ($1 ids) at their current version.
UPDATE jobs SET source = $2, applied_version = version WHERE id = ANY($1::uuid[]);
