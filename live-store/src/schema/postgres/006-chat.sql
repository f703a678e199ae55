-- The live store, version 6: chat sessions as the broker relays them.
-- Authentication a session forwards to its agent is never stored: it is
-- held in memory for the session's life.

-- How the agent is reached (JSON: the adapter and its endpoint), its
-- conversation id, the session's history window and visibility.
ALTER TABLE chat_sessions ADD COLUMN agent_url TEXT;
ALTER TABLE chat_sessions ADD COLUMN target TEXT;
ALTER TABLE chat_sessions ADD COLUMN agent TEXT;
ALTER TABLE chat_sessions ADD COLUMN context_id TEXT;
ALTER TABLE chat_sessions ADD COLUMN history_ttl BIGINT NOT NULL DEFAULT 86400;
ALTER TABLE chat_sessions ADD COLUMN visibility TEXT NOT NULL DEFAULT 'private';
ALTER TABLE chat_sessions ADD COLUMN sender_uaid TEXT;
ALTER TABLE chat_sessions ADD COLUMN last_activity_at BIGINT;
ALTER TABLE chat_sessions ADD COLUMN title TEXT;
-- An encrypted session's state (JSON: whether ciphertext is required, the
-- handshake's submissions); the broker holds public keys only.
ALTER TABLE chat_sessions ADD COLUMN encryption TEXT;
CREATE INDEX chat_sessions_by_account ON chat_sessions (account_id) WHERE ended_at IS NULL;
CREATE INDEX chat_sessions_public ON chat_sessions (last_activity_at DESC, id DESC) WHERE visibility = 'public';

-- A session's members (UAIDs): its agent, its sender, and those invited,
-- each seeing all of the history or only what came after the invite.
CREATE TABLE chat_members (
    session_id TEXT NOT NULL REFERENCES chat_sessions (id),
    uaid TEXT NOT NULL,
    invited_at BIGINT NOT NULL,
    history_scope TEXT NOT NULL CHECK (history_scope IN ('all', 'since_invite')),
    PRIMARY KEY (session_id, uaid)
);

-- Answers to sends that carried an idempotency key: a retry gets the
-- answer again and the agent is not called twice.
CREATE TABLE chat_sends (
    -- The order rows were inserted in (SQLite's implicit rowid).
    rowid BIGINT GENERATED ALWAYS AS IDENTITY,
    session_id TEXT NOT NULL REFERENCES chat_sessions (id),
    idempotency_key TEXT NOT NULL,
    answer TEXT NOT NULL,
    PRIMARY KEY (session_id, idempotency_key)
);

-- A message's public id and the envelope of an encrypted one (kept and
-- returned unchanged).
ALTER TABLE chat_messages ADD COLUMN message_id TEXT;
ALTER TABLE chat_messages ADD COLUMN cipher_envelope TEXT;
