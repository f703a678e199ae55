-- The live store, version 16: the plugin catalog. A repository is owned
-- by the account that first imported it, and so is each plugin's slug; a
-- version is one commit of one plugin, its files' digest the key of
-- lookups by hash; an import is a job with its progress.
CREATE TABLE plugin_repositories (
    repository TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    claimed_at INTEGER NOT NULL
) STRICT;

CREATE TABLE plugins (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    slug TEXT NOT NULL UNIQUE,
    account TEXT NOT NULL,
    repository TEXT NOT NULL,
    subpath TEXT NOT NULL,
    ecosystem TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE plugin_versions (
    slug TEXT NOT NULL REFERENCES plugins (slug),
    revision INTEGER NOT NULL,
    commit_sha TEXT NOT NULL,
    digest TEXT NOT NULL,
    record TEXT NOT NULL,
    imported_at INTEGER NOT NULL,
    PRIMARY KEY (slug, revision),
    UNIQUE (slug, commit_sha)
) STRICT;

CREATE INDEX plugin_versions_by_digest ON plugin_versions (digest);

CREATE TABLE plugin_imports (
    id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    request TEXT NOT NULL,
    status TEXT NOT NULL,
    progress TEXT NOT NULL,
    results TEXT NOT NULL,
    error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

CREATE INDEX plugin_imports_open ON plugin_imports (status) WHERE status IN ('pending', 'running');

-- The newest journal record of the plugin catalog, so that a start knows
-- whether the build holds every import.
CREATE TABLE plugin_catalog_changes (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
) STRICT;
