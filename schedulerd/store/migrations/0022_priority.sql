-- Priorities: an integer 0-9 per job (default 5, higher first), copied onto each execution when
-- it is written, so the pop, the Redis-down claim and an edit read it from the execution alone.
-- Both columns take a constant default: no table rewrite. The range is checked on jobs (every
-- execution's priority comes from its job's row or from an edit of it, both in one statement).
ALTER TABLE jobs ADD COLUMN priority smallint NOT NULL DEFAULT 5
    CONSTRAINT jobs_priority_range CHECK (priority BETWEEN 0 AND 9);
ALTER TABLE executions ADD COLUMN priority smallint NOT NULL DEFAULT 5;
-- The Redis-down claim (execution_lock_due) takes due rows of priority above 5 first, and those
-- below after the rest: only rows off the default are indexed, so with every job at 5 this
-- index stays empty and the hot path's writes cost what they did.
CREATE INDEX executions_unstarted_priority ON executions (priority DESC, due_at)
    WHERE status IN ('pending', 'queued') AND priority <> 5;
