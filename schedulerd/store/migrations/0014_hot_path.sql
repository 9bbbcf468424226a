-- The hot path's schema: one rule for why a first attempt was late, and a running index that a
-- heartbeat does not touch.
--
-- schedulerd_late_reason: why an occurrence that started (or waits) past its grace is late. The
-- claim records it in the same statement (no extra round trip per batch) and the late list
-- judges still-waiting occurrences with it, so the rule is written once. A parked execution
-- carries its park's reason; otherwise scheduler_down when no worker replica was alive at the
-- scheduled time (silent for more than down_after_s), else backlog.
CREATE FUNCTION schedulerd_late_reason(reason text, scheduled_for timestamptz, down_after_s float8) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE reason WHEN 'breaker_open' THEN 'breaker_open' WHEN 'task_limit' THEN 'tenant_cap'
           ELSE CASE WHEN EXISTS (SELECT 1 FROM replicas r WHERE 'worker' = ANY(r.roles) AND r.started_at <= scheduled_for
                                    AND r.last_seen_at >= scheduled_for - make_interval(secs => down_after_s))
                     THEN 'backlog' ELSE 'scheduler_down' END END
$$;

-- The late reason a claim records: only for a first attempt starting more than late_after_s
-- after it was due, with none recorded yet (a park or the misfire judge may have written one).
-- VOLATILE (it reads the clock) and a single expression, so the planner inlines it.
CREATE FUNCTION schedulerd_late_at_claim(attempt integer, late_reason text, due_at timestamptz, reason text,
                                         scheduled_for timestamptz, late_after_s float8, down_after_s float8) RETURNS text
LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN attempt = 0 AND late_reason IS NULL AND clock_timestamp() > due_at + make_interval(secs => late_after_s)
                THEN schedulerd_late_reason(reason, scheduled_for, down_after_s) END
$$;

-- Running executions were indexed by lease_until, so every heartbeat (which only moves the lease)
-- was a non-HOT update writing a new entry in every index of the row. The sweeper's scan needs
-- only the running rows (a few hundred per replica): index them by a column that never changes.
DROP INDEX executions_running_lease;
CREATE INDEX executions_running ON executions (scheduled_for) WHERE status = 'running';

-- A succeeded attempt is recorded on its execution alone: the row already holds its worker,
-- fence, start and end, and now what the handler returned (detail). Writing an attempts row for
-- it too cost a heap insert and an index entry per execution, on the hottest statement. attempts
-- keeps every other attempt (failed, timed out, lease expired, handed back, cancelled);
-- attempt_history shows all of them, succeeded ones included, as one table did before.
ALTER TABLE executions ADD COLUMN detail text;

UPDATE executions e SET detail = a.detail
FROM attempts a
WHERE a.execution_id = e.id AND a.scheduled_for = e.scheduled_for AND a.fence = e.fence
  AND a.outcome = 'succeeded' AND e.status = 'succeeded' AND a.detail IS NOT NULL;
DELETE FROM attempts a USING executions e
WHERE a.execution_id = e.id AND a.scheduled_for = e.scheduled_for AND a.fence = e.fence
  AND a.outcome = 'succeeded' AND e.status = 'succeeded';

CREATE VIEW attempt_history AS
SELECT execution_id, attempt, fence, worker, started_at, finished_at, outcome, error, detail, scheduled_for
FROM attempts
UNION ALL
SELECT id, attempt, fence, worker, started_at, finished_at, 'succeeded', NULL, detail, scheduled_for
FROM executions WHERE status = 'succeeded';
