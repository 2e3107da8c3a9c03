-- The questions nobody took yet, across principals and chats, in the order
-- an approver's inbox lists them (oldest first): only open rows are in it.
CREATE INDEX confirmations_open ON confirmations (issued_at_ms, id)
    WHERE claimed_at_ms IS NULL AND outcome IS NULL;
