-- The live store, version 14: Programmable Secrets.

-- Policies: staged by a provider account and confirmed against the chain,
-- imported, or found on chain by the indexer. One row per (chain, policy)
-- once on chain. `record` holds what the policy view shows (JSON);
-- `wrapped_key` the content key under the master key (JSON: never the key
-- in the clear); `ciphertext_path` the content-addressed file of the
-- ciphertext under the data folder.
CREATE TABLE secret_policies (
    id TEXT PRIMARY KEY,
    account_id TEXT,
    chain_id INTEGER NOT NULL,
    policy_id INTEGER,
    status TEXT NOT NULL,
    record TEXT NOT NULL,
    wrapped_key TEXT,
    ciphertext_path TEXT,
    last_error TEXT,
    -- When the policy was made on chain (Unix seconds): the listing's order.
    listed_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX secret_policies_on_chain ON secret_policies (chain_id, policy_id)
    WHERE policy_id IS NOT NULL AND status IN ('finalized', 'indexed');
CREATE INDEX secret_policies_listed ON secret_policies (listed_at DESC, chain_id, policy_id DESC)
    WHERE status IN ('finalized', 'indexed');
CREATE INDEX secret_policies_account ON secret_policies (account_id);

-- Purchases the indexer saw (`AccessGranted`), and every move of their
-- receipts (ERC-721 `Transfer`, the mint included): a receipt's holder is
-- the receiver of its last move, so a reorganisation that drops moves
-- leaves the holder the chain has.
CREATE TABLE secret_purchases (
    chain_id INTEGER NOT NULL,
    payment_module TEXT NOT NULL,
    receipt_token_id INTEGER NOT NULL,
    policy_id INTEGER NOT NULL,
    dataset_id INTEGER NOT NULL,
    buyer TEXT NOT NULL,
    recipient TEXT NOT NULL,
    price_wei TEXT NOT NULL,
    purchased_at INTEGER NOT NULL,
    tx_hash TEXT NOT NULL,
    block_number INTEGER NOT NULL,
    status TEXT NOT NULL,
    PRIMARY KEY (chain_id, receipt_token_id)
) STRICT;
CREATE INDEX secret_purchases_policy ON secret_purchases (chain_id, policy_id);
CREATE TABLE secret_receipt_moves (
    chain_id INTEGER NOT NULL,
    receipt_token_id INTEGER NOT NULL,
    block_number INTEGER NOT NULL,
    log_index INTEGER NOT NULL,
    receiver TEXT NOT NULL,
    PRIMARY KEY (chain_id, receipt_token_id, block_number, log_index)
) STRICT;

-- Key requests: a nonce issued to a buyer, then released or refused.
CREATE TABLE secret_key_requests (
    id TEXT PRIMARY KEY,
    chain_id INTEGER NOT NULL,
    policy_row TEXT NOT NULL,
    policy_id INTEGER NOT NULL,
    buyer TEXT NOT NULL,
    nonce TEXT NOT NULL,
    challenge TEXT NOT NULL,
    status TEXT NOT NULL,
    nonce_issued_at INTEGER NOT NULL,
    nonce_expires_at INTEGER NOT NULL,
    nonce_consumed_at INTEGER,
    fingerprint TEXT,
    encrypted_key TEXT,
    receipt_token_id INTEGER,
    error_code TEXT,
    error_message TEXT,
    completed_at INTEGER
) STRICT;
CREATE INDEX secret_key_requests_open ON secret_key_requests (status, nonce_expires_at);

-- Every release and refusal of a key: who asked, for which policy, and
-- why it was refused. Never updated.
CREATE TABLE secret_key_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL,
    chain_id INTEGER NOT NULL,
    policy_id INTEGER NOT NULL,
    buyer TEXT NOT NULL,
    outcome TEXT NOT NULL,
    code TEXT,
    reason TEXT,
    at INTEGER NOT NULL
) STRICT;

-- The indexer: the blocks it has read, each with its hash, so that a
-- reorganisation is seen (a stored hash the chain no longer has) and the
-- blocks from the fork on are read again.
CREATE TABLE secret_index_blocks (
    chain_id INTEGER NOT NULL,
    block_number INTEGER NOT NULL,
    block_hash TEXT NOT NULL,
    PRIMARY KEY (chain_id, block_number)
) STRICT;
