-- The live store, version 8: each chattable agent's last availability
-- check (`store::availability`). `checks` and `uptime` fold every check
-- of `endpoint`; `published_*` is what the agent shows (the last
-- `availability` event journaled, at outbox `seq`).
CREATE TABLE availability (
    uaid TEXT PRIMARY KEY,
    endpoint TEXT NOT NULL,
    outcome TEXT NOT NULL,
    checked_at BIGINT NOT NULL,
    last_seen_at BIGINT,
    latency_ms BIGINT,
    checks BIGINT NOT NULL,
    uptime DOUBLE PRECISION NOT NULL,
    published_status TEXT NOT NULL,
    published_uptime DOUBLE PRECISION NOT NULL,
    published_checked_at BIGINT NOT NULL,
    published_latency_ms BIGINT,
    published_last_seen_at BIGINT,
    seq BIGINT NOT NULL
);

CREATE INDEX availability_by_seq ON availability (seq);
