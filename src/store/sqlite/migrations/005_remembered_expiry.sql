-- A window grant's end: from this moment on it no longer applies, and the
-- purge forgets it. NULL for an approval remembered until revoked.
ALTER TABLE remembered ADD COLUMN expires_at_ms INTEGER;

CREATE INDEX remembered_by_expiry ON remembered (expires_at_ms) WHERE expires_at_ms IS NOT NULL;
