-- Why an occurrence did not start within its grace ([materialiser].misfire_grace_s): a column of
-- its own, beside `reason`, because `reason` steers behaviour (the misfire judge skips rows that
-- carry one; resume revives rows cancelled with 'paused') while late_reason only explains.
-- Values: scheduler_down | backlog | misfire_skip | overlap | paused | breaker_open | tenant_cap.
ALTER TABLE executions ADD COLUMN late_reason text;
-- "What ran late or not at all" (executions list --late, GET /v1/executions/late) as a range
-- scan over the few rows that carry a late reason; costs nothing for the rest.
CREATE INDEX executions_late ON executions (scheduled_for) WHERE late_reason IS NOT NULL;
