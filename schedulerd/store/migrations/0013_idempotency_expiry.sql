-- Idempotency keys expire after [api].idempotency_ttl_s; the retention loop deletes them by age,
-- which this index keeps a range scan instead of a walk over every key ever recorded.
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
