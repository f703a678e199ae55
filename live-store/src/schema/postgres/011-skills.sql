-- The live store, version 11: the skills registry (`store::skills`). A
-- name belongs to the account that first published it; each version of
-- it is published once, in increasing semantic-version order; an account
-- upvotes a name at most once.
CREATE TABLE skill_names (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE skill_versions (
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    account TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE skill_votes (
    name TEXT NOT NULL,
    account TEXT NOT NULL,
    at BIGINT NOT NULL,
    PRIMARY KEY (name, account)
);
