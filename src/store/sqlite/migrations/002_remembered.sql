-- Approvals users asked to be remembered, and "approve the next N" budgets.
CREATE TABLE remembered (
    id            TEXT PRIMARY KEY,
    principal     TEXT NOT NULL,
    chat_id       TEXT NOT NULL,                -- '' for every chat of the principal
    tool          TEXT NOT NULL,                -- qualified name
    created_at_ms INTEGER NOT NULL,
    UNIQUE (principal, chat_id, tool)
) STRICT;

CREATE TABLE budgets (
    principal TEXT NOT NULL,
    chat_id   TEXT NOT NULL,
    tool      TEXT NOT NULL,
    remaining INTEGER NOT NULL,
    PRIMARY KEY (principal, chat_id, tool)
) STRICT;
