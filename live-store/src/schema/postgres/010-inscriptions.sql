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
    size_bytes BIGINT NOT NULL,
    mime TEXT NOT NULL,
    mode TEXT NOT NULL,
    messages BIGINT NOT NULL,
    tinybars BIGINT NOT NULL,
    credits BIGINT NOT NULL,
    usd_cents BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_by TEXT
);

CREATE TABLE inscription_jobs (
    id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    idempotency_key TEXT,
    quote_id TEXT,
    status TEXT NOT NULL,
    mode TEXT NOT NULL,
    file_name TEXT,
    mime TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    content BYTEA NOT NULL,
    content_hash TEXT NOT NULL,
    messages BIGINT NOT NULL,
    credits BIGINT NOT NULL,
    usd_cents BIGINT NOT NULL,
    topic_tx TEXT,
    topic_id TEXT,
    written BIGINT NOT NULL,
    pending_tx TEXT,
    failure TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE UNIQUE INDEX inscription_jobs_by_key ON inscription_jobs (account, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX inscription_jobs_by_account ON inscription_jobs (account, created_at);
CREATE INDEX inscription_jobs_open ON inscription_jobs (status);
