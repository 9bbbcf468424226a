-- Finding a job by the start of its name (GET /v1/jobs?name=, `job list --name`) among a tenant's
-- many: without this index the list walks every job of the tenant newest first (measured: 80 ms
-- at 100,000 jobs for a prefix that matches one; 0.1 ms with it). text_pattern_ops serves
-- `name LIKE 'prefix%'` whatever the database's collation. The other filters (task, kind, state,
-- labels) measured a few ms on the (tenant, created_at) index and need none of their own.
CREATE INDEX jobs_tenant_name ON jobs (tenant, name text_pattern_ops);
