-- The live store, version 12: publishing skills (`store::skills`). A
-- publish job writes a version of a skill as HCS-26 says: each file an
-- HCS-1 file (a part: an inscription job whose `parent` is the publish
-- job, charged with it), then its manifest (another part), then the
-- version registered on the skill's version topic. Each step's progress
-- is stored on the row of what it makes: the registry's directory topic
-- on `skill_directory`, a skill's version topic and its registration in
-- the directory on `skill_names`, a version's registration on
-- `skill_jobs`.
ALTER TABLE inscription_jobs ADD COLUMN parent TEXT;
CREATE INDEX inscription_jobs_by_parent ON inscription_jobs (parent) WHERE parent IS NOT NULL;

ALTER TABLE skill_names ADD COLUMN topic_tx TEXT;
ALTER TABLE skill_names ADD COLUMN version_topic TEXT;
ALTER TABLE skill_names ADD COLUMN register_tx TEXT;
ALTER TABLE skill_names ADD COLUMN skill_uid BIGINT;
ALTER TABLE skill_names ADD COLUMN verified BIGINT NOT NULL DEFAULT 0;

CREATE TABLE skill_directory (
    id BIGINT PRIMARY KEY CHECK (id = 1),
    topic_tx TEXT,
    topic_id TEXT
);

CREATE TABLE skill_quotes (
    id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    package_hash TEXT NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    credits BIGINT NOT NULL,
    usd_cents BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_by TEXT
);

CREATE TABLE skill_jobs (
    id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    idempotency_key TEXT,
    quote_id TEXT,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    status TEXT NOT NULL,
    -- The package's manifest as read (`skills::package::Listing`, JSON).
    listing TEXT NOT NULL,
    -- What a search matches: the name, description and tags, lower case.
    terms TEXT NOT NULL,
    credits BIGINT NOT NULL,
    usd_cents BIGINT NOT NULL,
    tinybars BIGINT NOT NULL,
    manifest_job TEXT,
    version_tx TEXT,
    version_seq BIGINT,
    failure TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE UNIQUE INDEX skill_jobs_by_key ON skill_jobs (account, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX skill_jobs_by_account ON skill_jobs (account, created_at);
CREATE INDEX skill_jobs_by_name ON skill_jobs (name, created_at);
CREATE INDEX skill_jobs_open ON skill_jobs (status);

CREATE TABLE skill_verifications (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    account TEXT NOT NULL,
    tier TEXT NOT NULL,
    status TEXT NOT NULL,
    version TEXT,
    credits BIGINT NOT NULL,
    usd_cents BIGINT NOT NULL,
    decided_by TEXT,
    decided_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX skill_verifications_by_name ON skill_verifications (name, created_at);
