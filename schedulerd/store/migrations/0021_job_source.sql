-- Schedules as code (`schedulerd apply`, Client.apply): a job declared in a file is keyed by its
-- name within the file's source, per tenant. applied_version is the version the last apply left
-- the job at: a job whose version moved since was edited elsewhere (drift), which an apply
-- reports instead of overwriting. Jobs created any other way have no source.
ALTER TABLE jobs ADD COLUMN source text, ADD COLUMN applied_version integer;
CREATE UNIQUE INDEX jobs_tenant_source_name ON jobs (tenant, source, name)
    WHERE source IS NOT NULL AND deleted_at IS NULL;
