-- executions (scheduled_for) becomes a BRIN index. As a b-tree it cost an index entry for every
-- row version (the insert, the claim and the finish, none of which can be HOT: status is in the
-- partial indexes' predicates), and in a spike whose executions share one instant the planner
-- read it for the claim's `id = ANY(...) AND scheduled_for in [instant, +1 ms)`: every row of
-- that instant for each batch of 256 ids (docs/benchmarks.md "Hot path: the scheduled_for index").
-- What reads executions by time alone, across tenants (the fleet's minute stats and overview,
-- retention's checks, the all-tenant listing, a day at a time: Store.execution_list), is served by
-- the BRIN index: rows arrive in scheduled order within a day's partition, so a time range
-- touches few block ranges, and a new row's range costs nothing until vacuum summarises it.
DROP INDEX executions_scheduled_for;
CREATE INDEX executions_scheduled_for ON executions USING brin (scheduled_for);
