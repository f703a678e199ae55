-- The live store, version 9: ownership verification
-- (`store::verification`). A challenge is one code for one agent, asked
-- for by one account, used at most once. An ownership is an agent's
-- last proof: how it was made, where it is re-checked (`proof`: the TXT
-- name, the URL, the ledger account) and for which code, and what the
-- agent showed before its first proof (`prior`, JSON), journaled at
-- outbox `seq` whenever its state changes.
CREATE TABLE verification_challenges (
    id TEXT PRIMARY KEY,
    uaid TEXT NOT NULL,
    account TEXT NOT NULL,
    chain TEXT NOT NULL,
    code TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    method TEXT,
    message TEXT
);

CREATE INDEX verification_challenges_by_expiry ON verification_challenges (expires_at);

CREATE TABLE ownerships (
    uaid TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    method TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    chain TEXT NOT NULL,
    proof TEXT NOT NULL,
    code TEXT NOT NULL,
    verified_at BIGINT NOT NULL,
    confirmed_at BIGINT NOT NULL,
    checked_at BIGINT NOT NULL,
    last_error TEXT,
    prior TEXT NOT NULL,
    seq BIGINT NOT NULL
);

CREATE INDEX ownerships_by_seq ON ownerships (seq);
CREATE INDEX ownerships_by_check ON ownerships (state, checked_at);
