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

-- Running executions were indexed by lease_until, so every heartbeat (which only moves the lease)
-- was a non-HOT update writing a new entry in every index of the row. The sweeper's scan needs
-- only the running rows (a few hundred per replica): index them by a column that never changes.
DROP INDEX executions_running_lease;
CREATE INDEX executions_running ON executions (scheduled_for) WHERE status = 'running';
