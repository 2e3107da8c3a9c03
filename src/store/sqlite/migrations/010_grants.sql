-- Narrowed grants: the grant as made (JSON, never changed), and what
-- changes, each in one statement: its uses and its revocation. `uses` and
-- `expires_at_ms` repeat the record's, for the atomic redeem.
CREATE TABLE grants (
    id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    record TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    uses INTEGER,
    expires_at_ms INTEGER,
    used INTEGER NOT NULL DEFAULT 0,
    revoked_at_ms INTEGER
);
CREATE INDEX grants_principal ON grants (principal);
