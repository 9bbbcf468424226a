-- Notifications (schedulerd/notifier.py): tenant settings, the transitions the notifier finds in
-- finished executions, and the outbox it sends from. None of it is read or written by the
-- worker's claim or finish: the notifier finds what finished by itself.

-- name: notify_setting_get
-- A tenant's notification setting, if it has one.
SELECT tenant, url, events, updated_at FROM notify_settings WHERE tenant = $1;

-- name: notify_setting_put
-- Set tenant $1's notification setting: URL $2, events $3.
INSERT INTO notify_settings (tenant, url, events) VALUES ($1, $2, $3::text[])
ON CONFLICT (tenant) DO UPDATE SET url = excluded.url, events = excluded.events, updated_at = clock_timestamp()
RETURNING tenant, url, events, updated_at;

-- name: notify_setting_delete
-- Remove tenant $1's notification setting; returns whether it had one.
DELETE FROM notify_settings WHERE tenant = $1 RETURNING tenant;

-- name: notify_failed_candidates
-- Failed executions that finished in the last $1 s and were not judged yet, of jobs that watch
-- failures: their own or their tenant's setting names failure, recovery or dead_letter, or they
-- have pause_after_failures. Walked per watching tenant by executions_failed (tenant,
-- finished_at), oldest first, at most $2 per tenant, with what a notice and a pause need. Each
-- tenant's walk starts a minute before the newest failure judged for it (a finish becomes visible
-- within milliseconds of its finished_at: the finish commits at once), so failures already
-- judged are not read again at every pass.
-- The tenants of watching jobs are read from jobs_watched one tenant at a time, in its byte
-- order, which no other index of jobs has (each step an index probe: ORDER BY ... LIMIT 1), and
-- a job is read by one probe per candidate (LATERAL ... LIMIT 1): planned from a growing table's
-- young statistics, a filter or a join on jobs was a walk over every one-off job at every pass.
WITH RECURSIVE watching_jobs AS (
    (SELECT tenant COLLATE "C" AS tenant FROM jobs
     WHERE (notify_on IS NOT NULL OR pause_after_failures IS NOT NULL) AND deleted_at IS NULL
     ORDER BY tenant COLLATE "C" LIMIT 1)
    UNION ALL
    SELECT (SELECT j.tenant COLLATE "C" FROM jobs j
            WHERE (j.notify_on IS NOT NULL OR j.pause_after_failures IS NOT NULL) AND j.deleted_at IS NULL
              AND j.tenant COLLATE "C" > w.tenant
            ORDER BY j.tenant COLLATE "C" LIMIT 1)
    FROM watching_jobs w WHERE w.tenant IS NOT NULL
), watching AS (
    SELECT tenant FROM notify_settings
    UNION SELECT tenant COLLATE "default" FROM watching_jobs WHERE tenant IS NOT NULL
)
SELECT e.id, e.job_id, e.tenant, e.scheduled_for, e.finished_at, e.attempt, e.last_error, e.redrives, e.status,
       e.name, e.task, e.pause_after_failures, coalesce(e.notify_url, s.url) AS url,
       coalesce(e.notify_on, s.events, '{}') AS events
FROM watching w CROSS JOIN LATERAL (
    SELECT e.*, j.name, j.task, j.pause_after_failures, j.notify_url, j.notify_on
    FROM executions e CROSS JOIN LATERAL (SELECT * FROM jobs j WHERE j.id = e.job_id LIMIT 1) j
    LEFT JOIN notify_settings s ON s.tenant = e.tenant
    WHERE e.tenant = w.tenant AND e.lane = 'failed' AND e.status = 'failed'
      AND e.finished_at > greatest(clock_timestamp() - make_interval(secs => $1),
                                   (SELECT max(n.finished_at) FROM notifications n WHERE n.tenant = w.tenant
                                    AND n.event IN ('failure', 'dead_letter')) - interval '1 minute')
      AND (coalesce(j.notify_on, s.events) && '{failure,recovery,dead_letter}'::text[] OR j.pause_after_failures IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.execution_id = e.id AND n.round = e.redrives
                      AND n.event IN ('failure', 'dead_letter'))
    ORDER BY e.finished_at, e.id LIMIT $2
) e
LEFT JOIN notify_settings s ON s.tenant = e.tenant
ORDER BY e.finished_at, e.id;

-- name: notify_late_candidates
-- Executions scheduled in the last $1 s whose first attempt started past its grace (a late
-- reason recorded at claim, and a start), not judged yet, of jobs whose own or tenant's
-- setting names late and has a URL. By executions_late, oldest first, at most $2. Read only
-- while some tenant or job subscribes to late (a one-time check, in jobs_watched's order):
-- an incident's many late runs cost nothing to a fleet where nobody asked.
WITH subscribed AS (
    SELECT 1 FROM notify_settings WHERE 'late' = ANY(events)
    UNION ALL (SELECT 1 FROM jobs WHERE (notify_on IS NOT NULL OR pause_after_failures IS NOT NULL) AND 'late' = ANY(notify_on)
               ORDER BY tenant COLLATE "C" LIMIT 1)
    LIMIT 1
)
SELECT e.id, e.job_id, e.tenant, e.scheduled_for, e.finished_at, e.attempt, e.last_error, e.redrives, e.status,
       e.late_reason, j.name, j.task, coalesce(j.notify_url, s.url) AS url, coalesce(j.notify_on, s.events) AS events
FROM executions e CROSS JOIN LATERAL (SELECT * FROM jobs j WHERE j.id = e.job_id LIMIT 1) j
LEFT JOIN notify_settings s ON s.tenant = e.tenant
WHERE EXISTS (SELECT 1 FROM subscribed) AND e.late_reason IS NOT NULL
  AND e.scheduled_for > clock_timestamp() - make_interval(secs => $1) AND e.first_started_at IS NOT NULL AND 'late' = ANY(coalesce(j.notify_on, s.events))
  AND coalesce(j.notify_url, s.url) IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.execution_id = e.id AND n.round = 0 AND n.event = 'late')
ORDER BY e.scheduled_for, e.id LIMIT $2;

-- name: notify_recovery_candidates
-- Failing jobs (notify_jobs.failed_at set) with a succeeded execution that finished after
-- their newest failure (of those, the earliest scheduled, at most $1 s before that failure: the
-- job's index is walked in scheduled order and stops at the first), at most $2, with the
-- failed_at read (the recovery clears it only if no newer failure came meanwhile). Each job is
-- one probe (LATERAL ... LIMIT 1): joined, it could be a walk over every job.
SELECT f.job_id, f.failed_at, x.id, x.tenant, x.scheduled_for, x.finished_at, x.attempt, x.last_error, x.redrives,
       x.status, j.name, j.task, coalesce(j.notify_url, s.url) AS url, coalesce(j.notify_on, s.events, '{}') AS events
FROM notify_jobs f CROSS JOIN LATERAL (SELECT * FROM jobs j WHERE j.id = f.job_id LIMIT 1) j
LEFT JOIN notify_settings s ON s.tenant = j.tenant
CROSS JOIN LATERAL (
    SELECT e.* FROM executions e
    WHERE e.job_id = f.job_id AND e.status = 'succeeded' AND e.finished_at > f.failed_at
      AND e.scheduled_for > f.failed_scheduled_for - make_interval(secs => $1)
    ORDER BY e.scheduled_for LIMIT 1
) x
WHERE f.failed_at IS NOT NULL
ORDER BY f.failed_at LIMIT $2;

-- name: notification_insert
-- Record a judged transition once: ($3 execution, $4 round, $5 event) is unique, so a replica or a
-- restart judging it again writes nothing (NULL returned). $9 status: pending (sent from now)
-- or unsent. $7 url, $8 the notice's JSON body, $6 the execution's finish.
INSERT INTO notifications (id, tenant, job_id, execution_id, round, event, finished_at, url, payload, status)
VALUES ($1, $2, $10, $3, $4, $5, $6, $7, $8::text::jsonb, $9)
ON CONFLICT (execution_id, round, event) DO NOTHING
RETURNING id;

-- name: notify_job_failed
-- Job $1 (of tenant $2) is failing: its newest failure judged finished at $3 (scheduled for $4).
-- An older failure judged late never moves it back.
INSERT INTO notify_jobs (job_id, tenant, failed_at, failed_scheduled_for) VALUES ($1, $2, $3, $4)
ON CONFLICT (job_id) DO UPDATE SET
    failed_scheduled_for = CASE WHEN notify_jobs.failed_at IS NULL OR excluded.failed_at > notify_jobs.failed_at
                                THEN excluded.failed_scheduled_for ELSE notify_jobs.failed_scheduled_for END,
    failed_at = greatest(notify_jobs.failed_at, excluded.failed_at);

-- name: notify_job_recovered
-- Job $1 recovered: not failing any more, unless a failure newer than the one judged ($2) came meanwhile.
UPDATE notify_jobs SET failed_at = NULL WHERE job_id = $1 AND failed_at = $2 RETURNING job_id;

-- name: notify_job_streak
-- Job $1's consecutive-failure count starts again after $2 (the failure that paused it).
INSERT INTO notify_jobs (job_id, tenant, streak_from) VALUES ($1, $3, $2)
ON CONFLICT (job_id) DO UPDATE SET streak_from = excluded.streak_from;

-- name: notify_job_recent_ends
-- The statuses of job $1's newest $2 executions that ended (succeeded or failed), newest
-- scheduled first (the job's index walked backwards, stopping at $2), among those scheduled in
-- the last $3 s and finished after its streak start.
SELECT e.status FROM executions e LEFT JOIN notify_jobs f ON f.job_id = e.job_id
WHERE e.job_id = $1 AND e.status IN ('succeeded', 'failed')
  AND e.scheduled_for > clock_timestamp() - make_interval(secs => $3)
  AND (f.streak_from IS NULL OR e.finished_at > f.streak_from)
ORDER BY e.scheduled_for DESC LIMIT $2;

-- name: notification_claim_due
-- Take up to $1 notices due to be sent (SKIP LOCKED: replicas split them) and hold them for $2 s:
-- next_attempt_at moves past the send, so a sender that dies lets another send again after it
-- (at least once). attempts counts this try; the sender's answer is recorded only at it.
WITH due AS (
    SELECT id FROM notifications WHERE status = 'pending' AND next_attempt_at <= clock_timestamp()
    ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED
)
UPDATE notifications n SET attempts = n.attempts + 1, next_attempt_at = clock_timestamp() + make_interval(secs => $2)
FROM due WHERE n.id = due.id
RETURNING n.id, n.tenant, n.event, n.url, n.payload::text AS payload, n.attempts;

-- name: notification_record
-- A send's outcome for notice $1 at try $2 (ignored if another try took it since): $3 status
-- (sent | pending | given_up), $4 the receiver's HTTP status, $5 the error, $6 s until the next try.
UPDATE notifications SET status = $3, last_status = $4, last_error = $5,
       sent_at = CASE WHEN $3 = 'sent' THEN clock_timestamp() ELSE sent_at END,
       next_attempt_at = CASE WHEN $3 = 'pending' THEN clock_timestamp() + make_interval(secs => $6) ELSE next_attempt_at END
WHERE id = $1 AND attempts = $2 AND status = 'pending'
RETURNING id;

-- name: notification_page
-- Tenant $1's newest notices (at most $2), for the API and the dashboard.
SELECT id, job_id, execution_id, event, status, attempts, last_status, last_error, created_at, sent_at
FROM notifications WHERE tenant = $1 AND status <> 'unsent'
ORDER BY created_at DESC LIMIT $2;

-- name: notification_prune
-- Delete settled notices (sent, given up, unsent) created more than $1 s ago.
DELETE FROM notifications WHERE status <> 'pending' AND created_at < clock_timestamp() - make_interval(secs => $1);
