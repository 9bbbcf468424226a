-- Attempts: each one's start, end, outcome and error, and the durations the overrun warning reads.

-- name: attempt_list
-- Every finished or abandoned attempt of one execution, oldest first.
SELECT * FROM attempt_history WHERE execution_id = $1 AND scheduled_for >= $2 AND scheduled_for < $3 ORDER BY fence;

-- name: job_recent_durations
-- For each job in $1, the durations (seconds) of the attempts of its latest started executions
-- that ran their course (succeeded, failed, timed out), newest first, at most $2 per job: the
-- overrun warning's sample. Walks the (job_id, scheduled_for) index backwards from now (now(), not
-- clock_timestamp(): a stable value is an index condition, so the 6 h of future rows are skipped).
SELECT j.id AS job_id, d.duration_s
FROM unnest($1::uuid[]) AS j(id)
CROSS JOIN LATERAL (
    SELECT extract(epoch FROM a.finished_at - a.started_at)::float8 AS duration_s
    FROM executions e JOIN attempt_history a ON a.execution_id = e.id AND a.scheduled_for = e.scheduled_for
    WHERE e.job_id = j.id AND e.scheduled_for <= now()
      AND a.outcome IN ('succeeded', 'failed', 'timed_out')
    ORDER BY e.scheduled_for DESC, a.fence DESC
    LIMIT $2
) d;
