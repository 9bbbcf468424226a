-- Graceful shutdown hands unfinished executions back without using up an attempt; the attempt
-- row records it as 'handed_back'.
ALTER TABLE attempts DROP CONSTRAINT attempts_outcome_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_outcome_check
    CHECK (outcome IN ('succeeded', 'failed', 'timed_out', 'lease_expired', 'handed_back'));
