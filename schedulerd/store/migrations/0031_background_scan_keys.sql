-- The two partial indexes the background loops walk over jobs get keys no other index of jobs
-- has, so an ordered walk with a LIMIT can only be theirs. Keyed (id) and (tenant), they shared
-- their order with jobs_pkey and the (tenant, ...) indexes: with statistics that overrate how
-- many jobs wait or watch (a fast-growing table, not yet analysed), the planner walked the whole
-- primary key instead, 200,000 buffers per sweeper pass over 300,000 one-off jobs
-- (docs/benchmarks.md "Background scans").
-- Waiting occurrences are walked oldest first (job_overlap_stalled).
DROP INDEX jobs_overlap_waiting;
CREATE INDEX jobs_overlap_waiting ON jobs (overlap_waiting_for, id) WHERE overlap_waiting IS NOT NULL;
-- Watching tenants are enumerated in byte order (the notifier's candidates).
DROP INDEX jobs_watched;
CREATE INDEX jobs_watched ON jobs (tenant COLLATE "C") WHERE notify_on IS NOT NULL OR pause_after_failures IS NOT NULL;
