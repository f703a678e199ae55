-- The live store, version 8: each chattable agent's last availability
-- check (`store::availability`). `checks` and `uptime` fold every check
-- of `endpoint`; `published_*` is what the agent shows (the last
-- `availability` event journaled, at outbox `seq`).
CREATE TABLE availability (
    uaid TEXT PRIMARY KEY,
    endpoint TEXT NOT NULL,
    outcome TEXT NOT NULL,
    checked_at INTEGER NOT NULL,
    last_seen_at INTEGER,
    latency_ms INTEGER,
    checks INTEGER NOT NULL,
    uptime REAL NOT NULL,
    published_status TEXT NOT NULL,
    published_uptime REAL NOT NULL,
    published_checked_at INTEGER NOT NULL,
    published_latency_ms INTEGER,
    published_last_seen_at INTEGER,
    seq INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX availability_by_seq ON availability (seq);
