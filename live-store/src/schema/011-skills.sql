-- The live store, version 11: the skills registry (`store::skills`). A
-- name belongs to the account that first published it; each version of
-- it is published once, in increasing semantic-version order; an account
-- upvotes a name at most once.
CREATE TABLE skill_names (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE skill_versions (
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    account TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (name, version)
) WITHOUT ROWID;

CREATE TABLE skill_votes (
    name TEXT NOT NULL,
    account TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (name, account)
) WITHOUT ROWID;
