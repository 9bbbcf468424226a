-- Flow control across the fleet (schedulerd/flow_claims.py, core/flow.py).
--
-- A concurrency key: at most concurrency_limit executions of the tenant's jobs naming one key run
-- at once, counted from the running rows themselves under a lock on the key, so there is no
-- counter to drift and a dead holder's slot frees when the sweeper reclaims its lease. Read from
-- the jobs row at claim time (the running set is a few hundred rows), so an edit takes effect
-- for every unstarted execution at once. Both columns or neither.
ALTER TABLE jobs ADD COLUMN concurrency_key text, ADD COLUMN concurrency_limit integer,
    ADD CONSTRAINT jobs_concurrency CHECK ((concurrency_key IS NULL) = (concurrency_limit IS NULL)
                                           AND concurrency_limit BETWEEN 1 AND 100000);
-- A per-job rate limit: at most rate_limit starts per rate_window_s of the tenant's jobs naming
-- rate_key (a token bucket in Redis, taken at admission: queue/token_buckets.py).
ALTER TABLE jobs ADD COLUMN rate_key text, ADD COLUMN rate_limit integer, ADD COLUMN rate_window_s float8,
    ADD CONSTRAINT jobs_rate CHECK ((rate_key IS NULL) = (rate_limit IS NULL) AND (rate_key IS NULL) = (rate_window_s IS NULL)
                                    AND rate_limit >= 1 AND rate_window_s > 0);

-- Executions waiting for a slot (pending, reason concurrency_limit, due at the far-future
-- sentinel so no loop picks them up) are released in scheduled order: only they are indexed.
CREATE INDEX executions_waiting_slot ON executions (scheduled_for, id)
    WHERE status = 'pending' AND reason = 'concurrency_limit';

-- A park by a rate limit, and a wait for a concurrency slot, are late reasons of their own: the
-- start lag they accrue is the user's limit at work, not the scheduler's backlog.
CREATE OR REPLACE FUNCTION schedulerd_late_reason(reason text, scheduled_for timestamptz, down_after_s float8) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE reason WHEN 'breaker_open' THEN 'breaker_open' WHEN 'task_limit' THEN 'tenant_cap'
                       WHEN 'rate_limited' THEN 'rate_limited' WHEN 'concurrency_limit' THEN 'concurrency_limit'
           ELSE CASE WHEN EXISTS (SELECT 1 FROM replicas r WHERE 'worker' = ANY(r.roles) AND r.started_at <= scheduled_for
                                    AND r.last_seen_at >= scheduled_for - make_interval(secs => down_after_s))
                     THEN 'backlog' ELSE 'scheduler_down' END END
$$;
