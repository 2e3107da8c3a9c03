-- The audit log's hash chain: each event's place (from 1) and its link
-- (prev, hash, signature: JSON), hashed over `event` exactly as stored.
-- Events written before the chain have neither. The unique place keeps
-- two writers from forking the chain.
ALTER TABLE audit ADD COLUMN chain_seq INTEGER;
ALTER TABLE audit ADD COLUMN link TEXT;
CREATE UNIQUE INDEX audit_chain ON audit (chain_seq) WHERE chain_seq IS NOT NULL;
