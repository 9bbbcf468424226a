-- The worker's hot path, an execution's lease from claim to outcome: claim, heartbeat, finish,
-- hand back, park, and the sweeper's reclaim of expired leases.

-- name: execution_claim_many
-- The claim, the one statement that starts executions (popped ids, the Redis-down fallback's due
-- rows, and the overlap verdicts'): only a pending/queued row whose due time has come becomes
-- running, with attempt+1, fence+1 and a fresh lease ($2 seconds) held by worker $3.
-- Without $9 (guarded) only jobs whose overlap policy is allow are claimed: the others go through
-- the claim under their job's lock (job_lock_overlap), which passes $9 and records each claimed
-- execution as its job's running one. Ids not returned were claimed by someone else, finished,
-- not yet due, or belong to a guarded job (the worker passes those on). [$4, $5) bounds their
-- scheduled_for, so only their partitions are visited. A first attempt starting more than $6 s
-- after it was due records why it was late (schedulerd_late_at_claim, $7: the replica silence
-- that counts as down); marked_late returns the reason recorded now, for the metric. With $8
-- (adopt), rows already running under worker $3 are taken again, attempt and fence unchanged: a
-- claim whose reply was lost to a broken connection committed nonetheless, and only this worker
-- can know it holds none of them in memory (it never claims an id it holds), so that fence has no
-- other holder.
-- Due-ness is judged by $10, the instant of the pop that returned these ids (Redis TIME), when
-- given: the clock that popped an id is the clock that judges it due, so a Redis host a few ms
-- ahead of Postgres's never has a popped id refused as early. NULL (the Redis-down fallback, the
-- guarded claim of its rows): Postgres's clock_timestamp(). Leases always use Postgres's clock.
-- A row whose job is paused or deleted is not started: it is cancelled in the same statement
-- (reason paused or deleted, as if the pause had found it queued), whatever its job's overlap
-- policy, so a retry or a queued row that raced the pause never lingers, and is not returned
-- (the worker counts it with the ids claimed by someone else). Read from the jobs row the
-- statement joins anyway: a pause committed before the claim began is always seen.
-- Without $11 (limited) no execution counted against a concurrency limit is claimed: one whose job
-- names a concurrency key, whose task type is in $12 or whose tenant is in $13 (or every tenant:
-- $14) has a fleet-wide cap; it goes through the claim under that limit's lock
-- (schedulerd/flow_claims.py), which passes $11.
-- The UPDATE repeats the bounds on its own target: without them its plan holds every partition
-- of executions (94 with 90 days of retention), each opened and locked at every execution of the
-- statement (Postgres CPU 0.64, start-lag p99 486 -> 98 ms at 5,000/s: docs/benchmarks.md
-- "Many partitions"); execution_heartbeat_many and execution_finish_many do the same.
-- /*days*/ marks where the same bounds go again, widened to whole UTC days, as constants
-- (worker_statement in store.py): these statements keep one generic plan (the worker's pool),
-- which prunes by $4 and $5 only as it runs, after locking every partition; by constants the
-- planner prunes once, so each plan holds only its days' partitions (1.6 -> 0.3 ms a batch of
-- five with 94 partitions: docs/benchmarks.md "One plan per statement").
-- Rows are locked in id order (the `locked` CTE), as by every statement that writes several
-- executions, so no two such statements can deadlock. The CTE looks rows up by id alone (no join
-- to jobs): a join let the planner walk the (job_id, scheduled_for) index over a spike's single
-- instant, 200,000 rows filtered against 256 ids per claim (100 ms a batch).
-- traceparent: the producer's trace context, for the attempt's span (schedulerd/tracing.py).
-- The claim of a queued row changes no indexed column (lane stays active: migration 0030), so it
-- is a heap-only update; one under a limit ($11) marks the row limited, which moves it to the
-- small executions_limited index that flow_running counts at every limited claim.
WITH locked AS (
    SELECT e.id, e.scheduled_for,
           schedulerd_late_at_claim(e.attempt, e.late_reason, e.due_at, e.reason, e.scheduled_for, $6, $7) AS marked_late
    FROM executions e
    WHERE e.id = ANY($1::uuid[]) AND e.scheduled_for >= $4 AND e.scheduled_for < $5 /*days*/
      AND (e.status IN ('pending', 'queued') AND e.due_at <= coalesce($10::timestamptz, clock_timestamp())
           OR $8 AND e.status = 'running' AND e.worker = $3)
    ORDER BY e.id FOR NO KEY UPDATE
), claimed AS (
    -- j.enabled is false for a deleted job too: deleting disables.
    UPDATE executions e SET status = CASE WHEN j.enabled THEN 'running' ELSE 'cancelled' END,
           attempt = CASE WHEN j.enabled THEN e.attempt + (e.status <> 'running')::int
                          ELSE e.attempt - (e.status = 'running')::int END,
           fence = e.fence + (j.enabled AND e.status <> 'running')::int,
           lease_until = CASE WHEN j.enabled THEN clock_timestamp() + make_interval(secs => $2) END,
           worker = CASE WHEN j.enabled THEN $3 ELSE e.worker END,
           limited = CASE WHEN j.enabled THEN $11 ELSE e.limited END,
           started_at = CASE WHEN j.enabled THEN clock_timestamp() ELSE e.started_at END,
           first_started_at = CASE WHEN j.enabled THEN coalesce(e.first_started_at, clock_timestamp())
                                   ELSE e.first_started_at END,
           finished_at = CASE WHEN j.enabled THEN e.finished_at ELSE clock_timestamp() END,
           reason = CASE WHEN j.enabled THEN e.reason WHEN j.deleted_at IS NULL THEN 'paused' ELSE 'deleted' END,
           late_reason = CASE WHEN j.enabled THEN coalesce(l.marked_late, e.late_reason)
                              WHEN j.deleted_at IS NULL THEN coalesce(e.late_reason, 'paused') ELSE e.late_reason END
    FROM locked l, jobs j
    WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for AND e.scheduled_for >= $4 AND e.scheduled_for < $5 /*days*/ AND j.id = e.job_id
      AND (j.overlap = 'allow' OR $9 OR NOT j.enabled)
      AND (j.concurrency_key IS NULL AND NOT j.task = ANY($12::text[]) AND NOT (e.tenant = ANY($13::text[]) OR $14)
           OR $11 OR NOT j.enabled)
    RETURNING e.id, e.job_id, e.tenant, e.scheduled_for, e.due_at, e.attempt, e.fence, e.started_at,
              j.task, j.params, j.timeout_s, j.max_attempts, j.backoff_base_s, j.backoff_factor, j.backoff_max_s,
              j.overlap, l.marked_late, e.status, j.concurrency_key, j.concurrency_limit, j.rate_key, j.rate_limit,
              j.rate_window_s, e.traceparent
), held AS (
    UPDATE jobs j SET overlap_running = c.id, overlap_running_for = c.scheduled_for
    FROM claimed c WHERE $9 AND j.id = c.job_id AND c.status = 'running'
)
-- Claim's fields, in its order (models.Claim.from_rows then builds each by position). The due time
-- and the claim's instant go back as seconds after scheduled_for and after the due time, float8s:
-- a worker decodes one in a tenth of a timestamptz's time (Claim.due_at and .started_at derive the
-- instants when something asks for them).
SELECT id, job_id, tenant, scheduled_for, date_part('epoch', due_at - scheduled_for) AS due_after_s, attempt, fence,
       date_part('epoch', started_at - due_at) AS start_lag_s, task, params, timeout_s, max_attempts,
       backoff_base_s, backoff_factor, backoff_max_s, overlap, marked_late, concurrency_key, concurrency_limit,
       rate_key, rate_limit, rate_window_s, traceparent
FROM claimed WHERE status = 'running';

-- name: execution_lock_due
-- The fallback while Redis is unreachable: lock up to $1 due executions straight from Postgres,
-- by priority (highest first), then oldest first, for execution_claim_many in the same transaction
-- (the ones it leaves belong to guarded jobs). SKIP LOCKED lets every worker poll at once without
-- waiting on each other (so it can never be part of a deadlock). Three bands, each read by an
-- index in its order: above 5 and below 5 by executions_unstarted_priority (empty while every job
-- is at 5, so it costs one probe), 5 by the due indexes as before; a band only takes the room the
-- ones before it left.
WITH high AS (
    SELECT id, due_at FROM executions
    WHERE lane IN ('active', 'pending') AND status IN ('pending', 'queued') AND due_at <= clock_timestamp() AND priority <> 5 AND priority > 5
    ORDER BY priority DESC, due_at LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED
), normal AS (
    SELECT id, due_at FROM executions
    WHERE lane IN ('active', 'pending') AND status IN ('pending', 'queued') AND due_at <= clock_timestamp() AND priority = 5
    ORDER BY due_at LIMIT greatest($1 - (SELECT count(*) FROM high), 0) FOR NO KEY UPDATE SKIP LOCKED
), low AS (
    SELECT id, due_at FROM executions
    WHERE lane IN ('active', 'pending') AND status IN ('pending', 'queued') AND due_at <= clock_timestamp() AND priority <> 5 AND priority < 5
    ORDER BY priority DESC, due_at
    LIMIT greatest($1 - (SELECT count(*) FROM high) - (SELECT count(*) FROM normal), 0) FOR NO KEY UPDATE SKIP LOCKED
)
SELECT id FROM high UNION ALL SELECT id FROM normal UNION ALL SELECT id FROM low;

-- name: execution_heartbeat_many
-- Extend the leases of running executions still held at the given fences; ids not returned
-- have lost their lease (reclaimed by the sweeper) and their handlers must stop; cancel_requested
-- says someone asked the handler to stop: a cancel (cancelled_by) or an overlap policy
-- (cancel_other). [$4, $5) bounds their scheduled_for. Locks in id order (see execution_claim_many).
-- Running rows have no index of their own: each is looked up by id, the input walked in id order
-- (a LATERAL probe per row, one plan whatever the statistics say; execution_finish_many,
-- execution_hand_back_many and execution_park_many do the same).
WITH locked AS (
    SELECT e.id, e.scheduled_for
    FROM (SELECT * FROM unnest($1::uuid[], $2::bigint[]) AS h(id, fence) ORDER BY id) h
    CROSS JOIN LATERAL (
        SELECT e.id, e.scheduled_for FROM executions e
        WHERE e.id = h.id AND e.fence = h.fence AND e.status = 'running' AND e.scheduled_for >= $4 AND e.scheduled_for < $5 /*days*/
        LIMIT 1 FOR NO KEY UPDATE) e
)
UPDATE executions e SET lease_until = clock_timestamp() + make_interval(secs => $3)
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for AND e.scheduled_for >= $4 AND e.scheduled_for < $5 /*days*/
RETURNING e.id, e.cancel_requested_at IS NOT NULL AS cancel_requested;

-- name: execution_finish_many
-- Record the outcome of a batch of attempts, each only if its fence still holds. Per row:
-- $3 status to move to (succeeded | queued | pending | failed | cancelled), $4 the attempt's outcome,
-- $5 its error, $6 the retry delay in seconds (NULL when not retrying), $7 its detail (what the
-- handler returned, JSON text). Writes the attempt row in the same statement, except for a
-- success: the execution row records that attempt (with its detail; see attempt_history).
-- A retry (queued | pending) of a job paused or deleted meanwhile is cancelled instead (reason
-- paused | deleted): the attempt that ran is recorded, nothing comes after it. Only a retry reads
-- the job (steered: a subquery evaluated for those rows alone), so a success or a final failure
-- costs what it did; a pause committed while this runs is caught by the claim. A retry of an
-- execution someone asked to cancel (cancelled_by) is cancelled too (reason cancelled), read from
-- the row already locked; a cancelled attempt records reason cancelled and who asked (its error)
-- when someone asked, reason overlap when the overlap policy did. A success or a final failure
-- stands: it came first.
-- Returns the rows that took effect, with due_at for re-enqueueing. [$8, $9) bounds their scheduled_for.
-- Locks in id order (see execution_claim_many).
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::float8[], $7::text[])
        AS i(id, fence, status, outcome, error, retry_delay_s, detail)
), locked AS (
    SELECT e.id, e.scheduled_for, i.status, i.outcome, i.retry_delay_s, i.detail,
           CASE WHEN i.outcome = 'cancelled' AND e.cancelled_by IS NOT NULL THEN 'cancelled: asked by ' || e.cancelled_by
                ELSE i.error END AS error,
           CASE WHEN i.status IN ('queued', 'pending') THEN
               CASE WHEN e.cancelled_by IS NOT NULL THEN 'cancelled' ELSE
                   (SELECT CASE WHEN j.deleted_at IS NOT NULL THEN 'deleted' WHEN NOT j.enabled THEN 'paused' END
                    FROM jobs j WHERE j.id = e.job_id) END END AS steered,
           e.cancelled_by IS NOT NULL AS asked
    FROM (SELECT * FROM input ORDER BY id) i
    CROSS JOIN LATERAL (
        SELECT e.id, e.scheduled_for, e.job_id, e.cancelled_by FROM executions e
        WHERE e.id = i.id AND e.fence = i.fence AND e.status = 'running' AND e.scheduled_for >= $8 AND e.scheduled_for < $9 /*days*/
        LIMIT 1 FOR NO KEY UPDATE) e
), finished AS (
    UPDATE executions e SET
        status = CASE WHEN l.steered IS NOT NULL THEN 'cancelled' ELSE l.status END,
        due_at = CASE WHEN l.retry_delay_s IS NULL OR l.steered IS NOT NULL THEN e.due_at
                      ELSE clock_timestamp() + make_interval(secs => l.retry_delay_s) END,
        enqueued_at = CASE WHEN l.status = 'queued' AND l.steered IS NULL THEN clock_timestamp() ELSE e.enqueued_at END,
        finished_at = CASE WHEN l.status IN ('succeeded', 'failed', 'cancelled') OR l.steered IS NOT NULL
                           THEN clock_timestamp() END,
        lease_until = NULL,
        -- A success clears it: an earlier attempt's error stays in its attempt row, not on the run.
        last_error = CASE WHEN l.status = 'succeeded' THEN NULL ELSE coalesce(l.error, e.last_error) END,
        reason = CASE WHEN l.steered IS NOT NULL THEN l.steered
                      WHEN l.status = 'cancelled' THEN CASE WHEN l.asked THEN 'cancelled' ELSE 'overlap' END
                      ELSE e.reason END,
        detail = CASE WHEN l.outcome = 'succeeded' THEN l.detail END
    FROM locked l
    WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for AND e.scheduled_for >= $8 AND e.scheduled_for < $9 /*days*/
    RETURNING e.id, e.fence, e.attempt, e.worker, e.started_at, e.status, e.due_at, e.tenant, e.priority,
              e.scheduled_for, l.outcome, l.error, l.detail
), recorded AS (
    INSERT INTO attempts (execution_id, attempt, fence, worker, started_at, finished_at, outcome, error, detail, scheduled_for)
    SELECT id, attempt, fence, worker, started_at, clock_timestamp(), outcome, error, detail, scheduled_for FROM finished
    WHERE outcome <> 'succeeded'
)
SELECT id, status, due_at, tenant, priority FROM finished;

-- name: execution_succeed_many
-- execution_finish_many for a batch of successes only (the common batch): the same effect on each
-- row (succeeded, finished now, lease and last error cleared, what the handler returned in
-- detail; no attempt row, as for any success) with three input arrays, no retry or steering
-- branches and no attempts insert: 5-17 % less Postgres CPU per execution across three A/Bs of
-- `scripts/bench statements` (docs/benchmarks.md "A success's own statement"). Per row: $1 id,
-- $2 fence, $3 detail. [$4, $5) bounds their scheduled_for. Locks in id order (see
-- execution_claim_many). Returns only the ids that took effect: a success is not queued again,
-- so its due time, tenant and priority would be decoded for nothing.
WITH locked AS (
    SELECT e.id, e.scheduled_for, i.detail
    FROM (SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[]) AS i(id, fence, detail) ORDER BY id) i
    CROSS JOIN LATERAL (
        SELECT e.id, e.scheduled_for FROM executions e
        WHERE e.id = i.id AND e.fence = i.fence AND e.status = 'running' AND e.scheduled_for >= $4 AND e.scheduled_for < $5 /*days*/
        LIMIT 1 FOR NO KEY UPDATE) e
)
UPDATE executions e SET status = 'succeeded', finished_at = clock_timestamp(), lease_until = NULL, last_error = NULL,
                        detail = l.detail
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for AND e.scheduled_for >= $4 AND e.scheduled_for < $5 /*days*/
RETURNING e.id;

-- name: execution_hand_back_many
-- A worker shutting down gives back executions it holds (fences in $2) that did not finish in
-- the grace: queued again, due now, and the attempt is not counted (the claim will count it
-- again). The interrupted attempt is recorded as 'handed_back'. One of a job paused or deleted
-- meanwhile, or that someone asked to cancel (cancelled_by), is cancelled instead (reason paused
-- | deleted | cancelled), and not returned for ZADD.
-- [$3, $4) bounds scheduled_for. Locks in id order (see execution_claim_many).
WITH locked AS (
    SELECT e.id, e.scheduled_for,
           CASE WHEN e.cancelled_by IS NOT NULL THEN 'cancelled' WHEN j.deleted_at IS NOT NULL THEN 'deleted'
                WHEN NOT j.enabled THEN 'paused' END AS steered
    FROM (SELECT * FROM unnest($1::uuid[], $2::bigint[]) AS h(id, fence) ORDER BY id) h
    CROSS JOIN LATERAL (
        SELECT e.id, e.scheduled_for, e.job_id, e.cancelled_by FROM executions e
        WHERE e.id = h.id AND e.fence = h.fence AND e.status = 'running' AND e.scheduled_for >= $3 AND e.scheduled_for < $4
        LIMIT 1 FOR NO KEY UPDATE) e
    JOIN jobs j ON j.id = e.job_id
), back AS (
    UPDATE executions e SET status = CASE WHEN l.steered IS NULL THEN 'queued' ELSE 'cancelled' END,
           reason = coalesce(l.steered, e.reason), attempt = e.attempt - 1,
           due_at = CASE WHEN l.steered IS NULL THEN clock_timestamp() ELSE e.due_at END,
           enqueued_at = CASE WHEN l.steered IS NULL THEN clock_timestamp() ELSE e.enqueued_at END,
           finished_at = CASE WHEN l.steered IS NOT NULL THEN clock_timestamp() END, lease_until = NULL
    FROM locked l
    WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
    RETURNING e.id, e.attempt + 1 AS attempt, e.fence, e.worker, e.started_at, e.due_at, e.tenant, e.priority,
              e.scheduled_for, e.status
), recorded AS (
    INSERT INTO attempts (execution_id, attempt, fence, worker, started_at, finished_at, outcome, error, scheduled_for)
    SELECT id, attempt, fence, worker, started_at, clock_timestamp(), 'handed_back',
           'worker ' || coalesce(worker, '?') || ' shut down; handed back without using up an attempt', scheduled_for
    FROM back
)
SELECT id, due_at, tenant, priority FROM back WHERE status = 'queued';

-- name: execution_lease_window
-- The sweeper's walk of the active lane, a window at a time: up to $3 rows due by now, in
-- (due_at, id) order after ($1, $2), by executions_active_due (Store._fetch_walking_index).
-- Returns those running under a lease already expired (lapsed: candidates for
-- execution_reclaim_expired, read without a lock; it locks and judges each again), and the
-- window's last row (from_end = 1) with how many rows it walked, where the next walk resumes.
-- Running executions have no index of their own (the claim would not be HOT): they hide among
-- the queued ones, and a spike's backlog is all due. Walked whole at every pass, 200,000 queued
-- rows cost 135 ms a pass; a window bounds the pass and the walk goes round in passes.
WITH walked AS MATERIALIZED (
    SELECT id, scheduled_for, due_at, status = 'running' AND lease_until < clock_timestamp() AS lapsed
    FROM executions
    WHERE lane = 'active' AND due_at <= now() AND (due_at, id) > ($1, $2)
    ORDER BY due_at, id LIMIT $3
)
SELECT id, scheduled_for, due_at, lapsed, from_end, walked FROM (
    SELECT w.*, row_number() OVER (ORDER BY due_at DESC, id DESC) AS from_end, count(*) OVER () AS walked FROM walked w
) w
WHERE lapsed OR from_end = 1;

-- name: execution_reclaim_expired
-- Hand back executions whose lease expired (their worker died or froze): queued again after the
-- job's retry delay (full jitter, as after a failure), or failed when attempts are spent. The
-- jitter matters: executions that died together must not all come back at the same instant and
-- be claimed in one batch again, or a task that kills its worker would take the others in flight
-- beside it down with it, attempt after attempt. Guarded by status, lease expiry and the fence
-- read in the same statement, so a completion that lands first is never undone. Records the lost
-- attempt. An execution someone asked to cancel (reason cancelled) or an overlap policy asked to
-- stop (cancel_other: reason overlap) is cancelled, not retried.
-- A lease held by a replica that still reports itself alive (replicas.last_seen_at within $3 s)
-- is left to it for $2 s more: its writes are slow (a lock, a flaky connection), not gone, and
-- the outcome it holds would otherwise be thrown away and its handler run again.
-- One of a job paused or deleted meanwhile whose attempts are not spent is cancelled (reason
-- paused | deleted), not queued: nothing comes after the attempt that was lost.
-- Looks at the active lane's candidates ($4 ids, $5 their scheduled_for: what
-- execution_lease_window found) and at the whole limited lane (small: executions_limited), each
-- row by one probe in id order, at most $1 of them. Found before their jobs are read (a CTE of
-- its own, then one jobs probe per row): joined in one query, the planner could walk the jobs and
-- every execution of each (a cron job's whole history) at every pass.
WITH candidates AS (
    SELECT c.id, c.scheduled_for FROM unnest($4::uuid[], $5::timestamptz[]) AS c(id, scheduled_for)
    UNION
    SELECT e.id, e.scheduled_for FROM executions e WHERE e.lane = 'limited' AND e.status = 'running'
), lapsed AS MATERIALIZED (
    SELECT e.id, e.scheduled_for, e.fence, e.job_id, e.cancelled_by, e.cancel_requested_at
    FROM (SELECT * FROM candidates ORDER BY id) c
    CROSS JOIN LATERAL (
        SELECT e.id, e.scheduled_for, e.fence, e.job_id, e.cancelled_by, e.cancel_requested_at FROM executions e
        WHERE e.id = c.id AND e.scheduled_for = c.scheduled_for AND e.status = 'running'
          AND e.lease_until < clock_timestamp()
          AND (e.lease_until < clock_timestamp() - make_interval(secs => $2)
               OR NOT EXISTS (SELECT 1 FROM replicas r WHERE r.worker_id = e.worker
                              AND r.last_seen_at > clock_timestamp() - make_interval(secs => $3)))
        LIMIT 1 FOR UPDATE SKIP LOCKED) e
    LIMIT $1
), expired AS (
    SELECT x.id, x.scheduled_for, x.fence, j.max_attempts, j.backoff_base_s, j.backoff_factor, j.backoff_max_s,
           CASE WHEN x.cancelled_by IS NOT NULL THEN 'cancelled'
                WHEN x.cancel_requested_at IS NOT NULL THEN 'overlap' WHEN j.deleted_at IS NOT NULL THEN 'deleted'
                WHEN NOT j.enabled THEN 'paused' END AS cancelled_for
    FROM lapsed x CROSS JOIN LATERAL (SELECT * FROM jobs j WHERE j.id = x.job_id LIMIT 1) j
), reclaimed AS (
    UPDATE executions e SET
        status = CASE WHEN e.cancel_requested_at IS NOT NULL THEN 'cancelled'
                      WHEN e.attempt >= x.max_attempts THEN 'failed'
                      WHEN x.cancelled_for IS NOT NULL THEN 'cancelled' ELSE 'queued' END,
        reason = CASE WHEN e.cancel_requested_at IS NOT NULL OR e.attempt < x.max_attempts
                      THEN coalesce(x.cancelled_for, e.reason) ELSE e.reason END,
        due_at = CASE WHEN e.attempt >= x.max_attempts OR x.cancelled_for IS NOT NULL THEN e.due_at
                      ELSE clock_timestamp() + make_interval(secs => random() * least(x.backoff_max_s,
                               x.backoff_base_s * power(x.backoff_factor, least(e.attempt - 1, 64)))) END,
        enqueued_at = clock_timestamp(),
        finished_at = CASE WHEN e.attempt >= x.max_attempts OR x.cancelled_for IS NOT NULL THEN clock_timestamp() END,
        lease_until = NULL,
        last_error = 'lease expired: worker ' || coalesce(e.worker, '?') || ' stopped heartbeating'
    FROM expired x
    WHERE e.id = x.id AND e.scheduled_for = x.scheduled_for AND e.fence = x.fence AND e.status = 'running'
      AND e.lease_until < clock_timestamp()
    RETURNING e.id, e.job_id, e.tenant, e.attempt, e.fence, e.worker, e.started_at, e.status, e.due_at, e.last_error,
              e.scheduled_for, e.priority
), recorded AS (
    INSERT INTO attempts (execution_id, attempt, fence, worker, started_at, finished_at, outcome, error, scheduled_for)
    SELECT id, attempt, fence, worker, started_at, clock_timestamp(), 'lease_expired', last_error, scheduled_for
    FROM reclaimed
)
SELECT id, job_id, tenant, attempt, fence, worker, status, due_at, priority FROM reclaimed;

-- name: execution_park_many
-- Hand back claimed executions (fences in $2) without running them: a task over its concurrency
-- limit or a rate limit, an open circuit breaker, or an error while admitting the batch. Queued
-- again, due after their delay ($3 seconds), attempt not used up, no attempt recorded; reason $4
-- (task_limit | rate_limited | breaker_open | admit_error) says why, and keeps a parked
-- cron occurrence from being judged a misfire. A first attempt's start time is cleared: it never
-- started (a redriven execution's attempt 1 is not its first: it keeps it).
-- A first attempt whose new due time is past its grace ($5 s, counted from scheduled_for plus the
-- job's smearing window: repeated parks do not drift) gets the late reason its park implies
-- (schedulerd_late_reason: breaker_open, tenant_cap for task_limit, rate_limited) if it has none; newly_late
-- returns it where it did, for the metric. One of a job paused or deleted since its claim is
-- cancelled instead (reason paused | deleted; a pause is its late reason, as for the unstarted
-- rows the pause cancelled) and not returned: it never ran and nothing comes after it; so is one
-- someone asked to cancel since its claim (cancelled_by: reason cancelled).
-- [$6, $7) bounds scheduled_for. Locks in id order (see execution_claim_many).
WITH locked AS (
    SELECT e.id, e.scheduled_for, p.delay_s,
           CASE WHEN e.cancelled_by IS NOT NULL THEN 'cancelled' WHEN j.deleted_at IS NOT NULL THEN 'deleted'
                WHEN NOT j.enabled THEN 'paused' END AS steered,
           CASE WHEN e.late_reason IS NULL AND e.attempt = 1
                 AND clock_timestamp() + make_interval(secs => p.delay_s) > e.scheduled_for + make_interval(secs => j.window_s + $5)
                THEN schedulerd_late_reason($4, e.scheduled_for, 0) END AS newly_late
    FROM (SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::float8[]) AS p(id, fence, delay_s) ORDER BY id) p
    CROSS JOIN LATERAL (
        SELECT e.id, e.scheduled_for, e.job_id, e.cancelled_by, e.late_reason, e.attempt FROM executions e
        WHERE e.id = p.id AND e.fence = p.fence AND e.status = 'running' AND e.scheduled_for >= $6 AND e.scheduled_for < $7
        LIMIT 1 FOR NO KEY UPDATE) e
    JOIN jobs j ON j.id = e.job_id
), parked AS (
    UPDATE executions e SET status = CASE WHEN l.steered IS NULL THEN 'queued' ELSE 'cancelled' END,
           attempt = e.attempt - 1, reason = coalesce(l.steered, $4),
           due_at = CASE WHEN l.steered IS NULL THEN clock_timestamp() + make_interval(secs => l.delay_s) ELSE e.due_at END,
           enqueued_at = CASE WHEN l.steered IS NULL THEN clock_timestamp() ELSE e.enqueued_at END,
           finished_at = CASE WHEN l.steered IS NOT NULL THEN clock_timestamp() END,
           lease_until = NULL, first_started_at = CASE WHEN e.attempt = 1 AND e.redrives = 0 THEN NULL ELSE e.first_started_at END,
           late_reason = CASE WHEN l.steered IS NULL THEN coalesce(e.late_reason, l.newly_late)
                              WHEN l.steered = 'paused' THEN coalesce(e.late_reason, 'paused') ELSE e.late_reason END
    FROM locked l
    WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
    RETURNING e.id, e.due_at, e.tenant, e.priority, e.status, l.newly_late
)
SELECT id, due_at, tenant, priority, newly_late FROM parked WHERE status = 'queued';
