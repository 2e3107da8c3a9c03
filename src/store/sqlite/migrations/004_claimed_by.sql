-- The instance (process) that holds a claim: a claim of any other instance
-- was left by a process that is gone, since one process owns the file.
-- Claims made before this column existed have none, and are orphaned too.
ALTER TABLE confirmations ADD COLUMN claimed_by TEXT;
