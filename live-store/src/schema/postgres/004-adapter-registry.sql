-- The live store, version 4: writes to the adapter registry. Categories
-- and published adapters are also outbox events, so the next build
-- publishes them in its catalog.

-- Categories created through the api. Ids continue the catalog's.
CREATE TABLE adapter_categories (
    id BIGINT PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    -- The category as published (JSON).
    category TEXT NOT NULL,
    seq BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);

-- Adapters submitted for publication; processed in the background.
CREATE TABLE adapter_submissions (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    adapter_id TEXT NOT NULL,
    request TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'processing', 'completed', 'failed')),
    error TEXT,
    result TEXT,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    completed_at BIGINT,
    updated_at BIGINT NOT NULL
);
CREATE INDEX adapter_submissions_by_status ON adapter_submissions (status);

-- Adapters published through the api, by the account that owns them.
CREATE TABLE adapter_entries (
    adapter_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    entry TEXT NOT NULL,
    seq BIGINT NOT NULL
);
