-- The live store, version 3: encryption keys, the chat sessions feedback
-- is judged by, and feedback given through the api.

-- Long-term public keys for encrypted chat, one per subject and key type:
-- the subject is an agent (`uaid:<uaid>`) or a ledger account
-- (`account:<id>`). Registering the same key again changes nothing; a
-- different key replaces it (rotation).
CREATE TABLE encryption_keys (
    id TEXT PRIMARY KEY,
    subject TEXT NOT NULL,
    key_type TEXT NOT NULL CHECK (key_type IN ('secp256k1', 'ed25519', 'x25519')),
    public_key TEXT NOT NULL,
    uaid TEXT,
    ledger_account_id TEXT,
    ledger_network TEXT,
    email TEXT,
    -- The account whose API key registered it.
    account_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (subject, key_type)
) STRICT;

-- Chat sessions and their messages, as much as feedback eligibility reads
-- (chat itself extends these).
CREATE TABLE chat_sessions (
    id TEXT PRIMARY KEY,
    uaid TEXT NOT NULL,
    -- The signed-in account that opened it, if any.
    account_id TEXT,
    created_at INTEGER NOT NULL,
    ended_at INTEGER
) STRICT;

CREATE TABLE chat_messages (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES chat_sessions (id),
    role TEXT NOT NULL CHECK (role IN ('user', 'agent')),
    content TEXT NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX chat_messages_by_session ON chat_messages (session_id);

-- ERC-8004 feedback given through the api: one per chat session. The
-- entry is also an outbox event, so the next build publishes it.
CREATE TABLE agent_feedback (
    session_id TEXT PRIMARY KEY REFERENCES chat_sessions (id),
    uaid TEXT NOT NULL,
    client TEXT NOT NULL,
    entry TEXT NOT NULL,
    seq INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX agent_feedback_by_uaid ON agent_feedback (uaid, seq);
