-- The producer's trace context (schedulerd/tracing.py): the W3C traceparent of the span that
-- created an execution (Client.enqueue, POST /v1/jobs, `job create`), version 00 text, checked
-- by core/traceparent.py before it is written. NULL (most rows, and every occurrence the
-- materialiser writes): none. Nullable without a default, so adding it rewrites nothing, and the
-- claim returns it with the row it updates (a NULL costs a bit in the row's null bitmap).
ALTER TABLE executions ADD COLUMN traceparent text;
