-- The live store, version 2: self-registered agents and their attempts.

-- An agent registered through the api: its owner and its record as last
-- registered or updated. A deleted agent keeps its row (`deleted_at`), so
-- that a later registration of the same UAID is a new one. `seq` is the
-- outbox sequence number of its last change: a build that applied the
-- journal through `seq` holds it.
CREATE TABLE registrations (
    uaid TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    -- SHA-256 of the request that made the record: a retry is recognised.
    request_hash BYTEA NOT NULL,
    seq BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT
);
CREATE INDEX registrations_by_seq ON registrations (seq);

-- One registration or update: the primary registry is this broker (done
-- when the attempt is stored); each additional registry is delivered by
-- the registrar in the background.
CREATE TABLE registration_attempts (
    -- The order rows were inserted in (SQLite's implicit rowid).
    rowid BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT PRIMARY KEY,
    uaid TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    account_id TEXT NOT NULL,
    mode TEXT NOT NULL CHECK (mode IN ('register', 'update')),
    registry TEXT NOT NULL,
    credits_base BIGINT NOT NULL,
    credits_additional BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    completed_at BIGINT
);

CREATE TABLE attempt_registries (
    -- The order rows were inserted in (SQLite's implicit rowid).
    rowid BIGINT GENERATED ALWAYS AS IDENTITY,
    attempt_id TEXT NOT NULL REFERENCES registration_attempts (id),
    key TEXT NOT NULL,
    registry_id TEXT NOT NULL,
    credits BIGINT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'in_progress', 'completed', 'failed')),
    tries BIGINT NOT NULL DEFAULT 0,
    next_try_at BIGINT NOT NULL,
    error TEXT,
    agent_id TEXT,
    agent_uri TEXT,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (attempt_id, key)
);
CREATE INDEX attempt_registries_due ON attempt_registries (status, next_try_at);
