-- Queued executions indexed by (due_at, id), the order the sweeper's overdue repair and the full
-- reconcile page through them by keyset: with due_at alone, a page after a cursor inside a spike
-- of many rows due at one instant sorted the whole instant's rows by id, page after page.
DROP INDEX executions_queued_due;
CREATE INDEX executions_queued_due ON executions (due_at, id) WHERE status = 'queued';
