-- The live store, version 15: the newest journal record of the
-- Programmable Secrets catalog, so that a start knows whether the build
-- holds every change (a policy dropped by a reorganisation has no row left
-- to say it).
CREATE TABLE secret_catalog_changes (
    id BIGINT PRIMARY KEY CHECK (id = 1),
    seq BIGINT NOT NULL
);
