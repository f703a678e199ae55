-- The live store, version 10: content inscriptions
-- (`store::inscriptions`). A quote is a price for some content, for a
-- while, used by at most one job. A job holds its content until done, and
-- how far it got on the network: the topic's creation (`topic_tx`, then
-- `topic_id`), the messages that reached consensus (`written`) and the
-- transaction the next one was sent as (`pending_tx`).
CREATE TABLE inscription_quotes (
    id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    mime TEXT NOT NULL,
    mode TEXT NOT NULL,
    messages INTEGER NOT NULL,
    tinybars INTEGER NOT NULL,
    credits INTEGER NOT NULL,
    usd_cents INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_by TEXT
) WITHOUT ROWID;

CREATE TABLE inscription_jobs (
    id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    idempotency_key TEXT,
    quote_id TEXT,
    status TEXT NOT NULL,
    mode TEXT NOT NULL,
    file_name TEXT,
    mime TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    content BLOB NOT NULL,
    content_hash TEXT NOT NULL,
    messages INTEGER NOT NULL,
    credits INTEGER NOT NULL,
    usd_cents INTEGER NOT NULL,
    topic_tx TEXT,
    topic_id TEXT,
    written INTEGER NOT NULL,
    pending_tx TEXT,
    failure TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE UNIQUE INDEX inscription_jobs_by_key ON inscription_jobs (account, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX inscription_jobs_by_account ON inscription_jobs (account, created_at);
CREATE INDEX inscription_jobs_open ON inscription_jobs (status);
