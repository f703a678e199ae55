-- The live store, version 7: a send's idempotency key remembers the
-- request it answered (SHA-256 of the message and its envelope, hex), so
-- the key used again with another request is refused instead of answered
-- with the first reply. Sends stored before have none and are matched by
-- key alone.
ALTER TABLE chat_sends ADD COLUMN request_digest TEXT;
