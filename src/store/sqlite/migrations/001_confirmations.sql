-- Confirmations the server issued, and the execution ledger.
CREATE TABLE confirmations (
    id            TEXT PRIMARY KEY,
    chat_id       TEXT NOT NULL,
    principal     TEXT NOT NULL,
    call_id       TEXT NOT NULL,
    tool_name     TEXT NOT NULL,
    args          TEXT NOT NULL,              -- JSON, as issued
    hint          TEXT NOT NULL,
    protocol      TEXT NOT NULL,              -- adk | ai-sdk
    issued_at_ms  INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    claimed_at_ms INTEGER,                    -- set when a call is claimed
    outcome       TEXT                        -- JSON, set when decided
) STRICT;

CREATE INDEX confirmations_by_expiry ON confirmations (expires_at_ms);
