-- Late and missed occurrences: the misfire policy's input and verdicts, the late list, "why
-- didn't job X run at T?", and the late counts.

-- name: execution_missed
-- Unstarted first attempts of cron jobs overdue by more than the grace ($1 seconds), grouped by
-- job, oldest first, at most $2 (of the jobs in $3 only, when given): input to the misfire policy.
-- Rows already replayed late or redriven (reason set), manual triggers and backfills (late on
-- purpose) are excluded. scheduler_down: no replica with the worker role was alive at the
-- scheduled time (schedulerd_late_reason's rule, $4: the replica silence that counts as down).
-- The overdue rows are found first, through the pending and active lanes' due indexes (a CTE of
-- their own), then each job is probed: status is in no index, and ordered by job the planner
-- could walk executions_slot, every execution of every job, at every pass. now(), not
-- clock_timestamp(): a stable bound is an index condition, so the occurrences materialised
-- ahead are never read (against the volatile one, each pass read all of them).
WITH overdue AS MATERIALIZED (
    SELECT e.id, e.job_id, e.scheduled_for FROM executions e
    WHERE (e.lane = 'pending' OR e.lane = 'active') AND e.status IN ('pending', 'queued') AND e.attempt = 0
      AND e.reason IS NULL AND e.origin = 'scheduled' AND e.due_at < now() - make_interval(secs => $1)
      AND ($3::uuid[] IS NULL OR e.job_id = ANY($3))
)
SELECT o.id, o.job_id, o.scheduled_for, j.misfire_policy, j.catch_up_limit,
       schedulerd_late_reason(NULL, o.scheduled_for, $4) = 'scheduler_down' AS scheduler_down
FROM overdue o CROSS JOIN LATERAL (
    SELECT j.misfire_policy, j.catch_up_limit FROM jobs j WHERE j.id = o.job_id AND j.schedule_kind = 'cron' LIMIT 1
) j
ORDER BY o.job_id, o.scheduled_for
LIMIT $2;

-- name: execution_skip_many
-- Mark missed occurrences skipped by the misfire policy, unless one was claimed meanwhile, each
-- with its late reason ($2). Returns the ids skipped and the late reason each carries. [$3, $4)
-- bounds their scheduled_for (the partitions to visit).
WITH locked AS (
    SELECT e.id, e.scheduled_for, s.late_reason FROM executions e JOIN unnest($1::uuid[], $2::text[]) AS s(id, late_reason) ON e.id = s.id
    WHERE e.status IN ('pending', 'queued') AND e.attempt = 0 AND e.scheduled_for >= $3 AND e.scheduled_for < $4
    ORDER BY e.id FOR NO KEY UPDATE OF e
)
UPDATE executions e SET status = 'skipped', reason = 'misfire_skip', finished_at = clock_timestamp(),
       late_reason = coalesce(e.late_reason, l.late_reason)
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id, e.late_reason;

-- name: execution_replay_many
-- Let missed occurrences run late, spread by the given delays (seconds) so a recovery is not a
-- second outage, each with its late reason ($3). Returns them for ZADD at their new due times.
-- [$4, $5) bounds scheduled_for.
WITH locked AS (
    SELECT e.id, e.scheduled_for, r.delay_s, r.late_reason
    FROM executions e JOIN unnest($1::uuid[], $2::float8[], $3::text[]) AS r(id, delay_s, late_reason) ON e.id = r.id
    WHERE e.status IN ('pending', 'queued') AND e.attempt = 0 AND e.scheduled_for >= $4 AND e.scheduled_for < $5
    ORDER BY e.id FOR NO KEY UPDATE OF e
)
UPDATE executions e SET status = 'queued', reason = 'late_replay', enqueued_at = clock_timestamp(),
       due_at = clock_timestamp() + make_interval(secs => l.delay_s), late_reason = coalesce(e.late_reason, l.late_reason)
FROM locked l
WHERE e.id = l.id AND e.scheduled_for = l.scheduled_for
RETURNING e.id, e.due_at, e.tenant, e.priority, e.late_reason;

-- name: execution_late_page
-- Occurrences that did not start within their grace ($1 s), newest scheduled first, scheduled in
-- [$4, now - grace), optionally of tenant $2, job $3 and late reason $5, at most $6: rows with a
-- recorded late reason (executions_late index), then first attempts still waiting past their
-- grace with none recorded yet (the due indexes), given the reason they would get now ($7: the
-- replica silence that counts as down, seconds). The waiting ones are cut to $6 before their
-- reason is worked out, unless that reason is the filter: a backlog of 100,000 costs a top-N sort.
WITH bounds AS (SELECT clock_timestamp() - make_interval(secs => $1) AS late_before),
waiting AS (
    SELECT * FROM (
        SELECT e.* FROM executions e, bounds b
        WHERE e.lane = 'pending' AND e.status = 'pending' AND e.due_at < b.late_before AND e.attempt = 0 AND e.late_reason IS NULL
          AND e.scheduled_for >= $4 AND ($2::text IS NULL OR e.tenant = $2) AND ($3::uuid IS NULL OR e.job_id = $3)
        UNION ALL
        SELECT e.* FROM executions e, bounds b
        WHERE e.lane = 'active' AND e.status = 'queued' AND e.due_at < b.late_before AND e.attempt = 0 AND e.late_reason IS NULL
          AND e.scheduled_for >= $4 AND ($2::text IS NULL OR e.tenant = $2) AND ($3::uuid IS NULL OR e.job_id = $3)
    ) w
    ORDER BY scheduled_for DESC, id DESC
    LIMIT CASE WHEN $5::text IS NULL OR $5 IN ('breaker_open', 'tenant_cap') THEN $6::bigint END  -- NULL: no limit
)
SELECT * FROM (
    SELECT e.*, e.late_reason AS why FROM executions e, bounds b
    WHERE e.late_reason IS NOT NULL AND e.scheduled_for >= $4 AND e.scheduled_for < b.late_before
      AND ($2::text IS NULL OR e.tenant = $2) AND ($3::uuid IS NULL OR e.job_id = $3)
      AND ($5::text IS NULL OR e.late_reason = $5)
    UNION ALL
    SELECT * FROM (
        SELECT w.*, schedulerd_late_reason(w.reason, w.scheduled_for, $7) AS why
        FROM waiting w
    ) judged WHERE ($5::text IS NULL OR judged.why = $5)
) late
ORDER BY scheduled_for DESC, id DESC
LIMIT $6;

-- name: execution_near
-- Job $1's execution scheduled closest to $2 within $3 seconds either side (an earlier one wins
-- a tie), for "why didn't job X run at T?".
SELECT * FROM executions
WHERE job_id = $1 AND scheduled_for >= $2::timestamptz - make_interval(secs => $3)
  AND scheduled_for <= $2::timestamptz + make_interval(secs => $3)
ORDER BY abs(extract(epoch FROM scheduled_for - $2::timestamptz)), scheduled_for
LIMIT 1;

-- name: execution_late_counts
-- Late or missed occurrences with a recorded late reason scheduled in the last $1 seconds, per
-- reason (schedulerd status, the [ops] page): a range scan of the executions_late index. Only
-- occurrences whose time has come: a future one a pause cancelled carries late reason paused for
-- when its time comes, and is not late yet.
SELECT late_reason, count(*) AS n FROM executions
WHERE late_reason IS NOT NULL AND scheduled_for > clock_timestamp() - make_interval(secs => $1)
  AND scheduled_for <= clock_timestamp()
GROUP BY late_reason;
