-- The live store, version 1. Times are milliseconds since the Unix epoch.

-- A ledger account the api has seen (by a verified challenge or a
-- credit). `balance` is the sum of its settled credit transactions, kept
-- here so that a debit checks it in one read; the CHECK makes an
-- overspend impossible even for a bug.
CREATE TABLE accounts (
    account_id TEXT PRIMARY KEY,
    balance INTEGER NOT NULL DEFAULT 0 CHECK (balance >= 0),
    created_at INTEGER NOT NULL
) STRICT;

-- Single-use sign-in challenges.
CREATE TABLE challenges (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    network TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
) STRICT;
CREATE INDEX challenges_by_expiry ON challenges (expires_at);

-- API keys: only the SHA-256 of the key is kept.
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    hash BLOB NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    last_four TEXT NOT NULL,
    label TEXT,
    account_id TEXT NOT NULL,
    network TEXT NOT NULL,
    network_canonical TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at INTEGER
) STRICT;

-- The credit ledger. `amount` is signed (debits negative); a transaction
-- is identified per account by its idempotency key, so a retried request
-- finds its first outcome instead of paying twice.
CREATE TABLE credit_transactions (
    id INTEGER PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (account_id),
    kind TEXT NOT NULL CHECK (kind IN ('purchase', 'debit', 'refund', 'redemption', 'grant')),
    amount INTEGER NOT NULL,
    -- The account's balance once this transaction was posted.
    balance_after INTEGER NOT NULL CHECK (balance_after >= 0),
    status TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
    idempotency_key TEXT NOT NULL,
    reason TEXT NOT NULL,
    reference TEXT,
    created_at INTEGER NOT NULL,
    UNIQUE (account_id, idempotency_key)
) STRICT;
CREATE INDEX credit_transactions_by_account ON credit_transactions (account_id, created_at, id);

-- Changes the next build must include, in the order they happened; the
-- journal writer appends each to the journal with `seq` as its sequence
-- number and then deletes it here.
CREATE TABLE outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    event TEXT NOT NULL
) STRICT;
