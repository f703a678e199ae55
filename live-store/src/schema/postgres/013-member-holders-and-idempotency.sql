-- The live store, version 13: who holds a chat session's member, and one
-- idempotency rule for every route that takes a key.

-- The account that held a member's UAID when it joined: the session's
-- owner for the `senderUaid` it opened with, the registrant for an agent
-- registered here, none for an agent only the build indexes. Only that
-- account acts for the member; a later registration of the same UAID by
-- another account takes over nothing. Members stored before this version
-- are held by whoever held them now.
ALTER TABLE chat_members ADD COLUMN held_by TEXT;
UPDATE chat_members SET held_by = (
    SELECT s.account_id FROM chat_sessions s
    WHERE s.id = chat_members.session_id AND s.sender_uaid = chat_members.uaid AND s.account_id IS NOT NULL);
UPDATE chat_members SET held_by = (
    SELECT r.account_id FROM registrations r WHERE r.uaid = chat_members.uaid AND r.deleted_at IS NULL)
WHERE held_by IS NULL;

-- The requests idempotency keys were used with, per account and route
-- (`scope`): the same key again with the same request (its SHA-256 over
-- the method, the path and the canonical body) is a retry; with another
-- request it is refused. Chat keeps its keys per session in `chat_sends`.
CREATE TABLE idempotency_keys (
    account_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, scope, key)
);
