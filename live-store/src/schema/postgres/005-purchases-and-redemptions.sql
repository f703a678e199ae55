-- The live store, version 5: payment intents and redemptions of points.
--
-- Payment intents. An intent is created
-- pending; it completes once its payment is seen (the transfer on the
-- mirror node, the provider's webhook), which posts its purchase to the
-- credit ledger in the same transaction; a transfer never seen within its
-- window expires.

CREATE TABLE payment_intents (
    -- The purchase id answered to the client.
    id TEXT PRIMARY KEY,
    method TEXT NOT NULL CHECK (method IN ('native', 'card')),
    account_id TEXT NOT NULL,
    credits BIGINT NOT NULL CHECK (credits > 0),
    -- Tinybars, or the card currency's smallest unit.
    amount BIGINT NOT NULL CHECK (amount > 0),
    currency TEXT NOT NULL,
    -- The Hedera transaction id (mirror form), or the provider's intent id.
    reference TEXT NOT NULL,
    -- The client's idempotency key (card intents), unique per account.
    idempotency_key TEXT,
    -- The answer given at creation (JSON), given again for the same key.
    answer TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'expired', 'failed')),
    -- Why it failed or expired.
    outcome TEXT,
    created_at BIGINT NOT NULL,
    -- Native: the end of the transaction's valid window, in ms.
    expires_at BIGINT,
    settled_at BIGINT
);
CREATE UNIQUE INDEX payment_intents_by_reference ON payment_intents (method, reference);
CREATE UNIQUE INDEX payment_intents_by_key ON payment_intents (account_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX payment_intents_pending ON payment_intents (method, status) WHERE status = 'pending';

-- Points (an HCS-20 balance of the configured token) redeemed for
-- credits; what an account may still redeem is its balance in the current
-- build minus the points it redeemed.
CREATE TABLE point_redemptions (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    -- The token, as tick@topic.
    token TEXT NOT NULL,
    points BIGINT NOT NULL CHECK (points > 0),
    credits BIGINT NOT NULL CHECK (credits > 0),
    created_at BIGINT NOT NULL
);
CREATE INDEX point_redemptions_by_account ON point_redemptions (account_id, token);
