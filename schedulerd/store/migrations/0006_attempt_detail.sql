-- An attempt can carry a detail beside its error: what the handler returned (JSON text), e.g. the
-- http task's response status and a bounded excerpt of the body.
ALTER TABLE attempts ADD COLUMN detail text;
