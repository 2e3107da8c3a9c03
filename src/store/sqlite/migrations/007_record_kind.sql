-- What a record is: a question someone is asked, a call handed to the
-- client, or a client's result taken. Rows from before it were told apart
-- by their ids ("handoff-…", "…/result").
ALTER TABLE confirmations ADD COLUMN kind TEXT NOT NULL DEFAULT 'question';
UPDATE confirmations SET kind = 'hand-off' WHERE id LIKE 'handoff-%';
UPDATE confirmations SET kind = 'client-result' WHERE id LIKE '%/result';
