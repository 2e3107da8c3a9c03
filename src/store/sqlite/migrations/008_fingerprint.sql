-- A question's fingerprint (call.rs's `fingerprint`): the digest of its
-- tool's definition when it was asked, and of the call. NULL for a record
-- that asks nobody, or one from before.
ALTER TABLE confirmations ADD COLUMN definition_digest TEXT;
ALTER TABLE confirmations ADD COLUMN fingerprint TEXT;
-- The tool definition a remembered approval was granted for: NULL for one
-- granted before (it applies as it did).
ALTER TABLE remembered ADD COLUMN definition TEXT;
