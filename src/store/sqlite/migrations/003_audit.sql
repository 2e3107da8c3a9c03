-- Every decision about a tool call, append-only.
CREATE TABLE audit (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms           INTEGER NOT NULL,
    principal       TEXT NOT NULL,
    event           TEXT NOT NULL               -- JSON of the whole event
) STRICT;

CREATE INDEX audit_by_principal_time ON audit (principal, at_ms);
