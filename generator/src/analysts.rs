//! What an analyst finds in a snapshot: views named for what they hold
//! (`ticks`, `balances`, `holders`, `agents`, `feedback`, beside the
//! tables and the `events`, `operations_at` and `events_at` views) and a
//! comment on each (`COMMENT ON`, listed by `duckdb_tables()` and
//! `duckdb_views()`). Written into the warehouse before each snapshot is
//! copied, so every snapshot carries them; the README's schema section
//! says the same.

use anyhow::{Context, Result};
use duckdb::Connection;

/// The views over section C's tables.
const LEDGER_VIEWS: &str = "
CREATE OR REPLACE VIEW ticks AS
    SELECT topic, tick, name, max, lim, supply, minted, burned, mints, burns, transfers, holders,
           make_timestamp((deployed_ns // 1000)::BIGINT) AS deployed_at,
           make_timestamp((last_change_ns // 1000)::BIGINT) AS last_change_at
    FROM tokens;
CREATE OR REPLACE VIEW balances AS
    SELECT topic, tick, account, balance, make_timestamp((updated_ns // 1000)::BIGINT) AS updated_at FROM holdings;
CREATE OR REPLACE VIEW holders AS SELECT * FROM balances WHERE balance > 0;
";

/// The views over section A's tables (when the build has them).
const BROKER_VIEWS: &str = "
CREATE OR REPLACE VIEW agents AS
    SELECT id, uaid, registry, name, adapter, type, verification_status, trust_score, available,
           json_extract_string(record, '$.protocols[0]') AS protocol,
           CAST(json_extract(record, '$.communicationSupported') AS BOOLEAN) AS chattable,
           created_at, updated_at
    FROM broker_agents;
CREATE OR REPLACE VIEW feedback AS
    SELECT uaid, client, feedback_index, score, revoked, created_at FROM broker_feedback;
";

/// What each table and view holds.
const COMMENTS: &[(&str, &str, &str)] = &[
    (
        "TABLE",
        "messages",
        "Every HCS-20 topic message ingested, as the mirror node gave it (base64 payload, consensus time in ns).",
    ),
    (
        "TABLE",
        "operations",
        "Every HCS-20 operation read from the messages, valid or not; `reason` says why an invalid one was rejected.",
    ),
    ("TABLE", "tokens", "Deployed HCS-20 tokens (tick per topic) with their supply and counters, as of the build."),
    (
        "TABLE",
        "holdings",
        "Balances per token and account, zero balances included (an account that once held keeps its row).",
    ),
    ("TABLE", "recent_events", "The newest valid mints, burns and transfers per token, as the API lists them."),
    ("TABLE", "build", "The snapshot's build id and layout version (key, value)."),
    ("VIEW", "events", "Valid mints, burns and transfers (a projection of operations)."),
    ("VIEW", "operations_at", "operations with consensus_at as a timestamp."),
    ("VIEW", "events_at", "events with consensus_at as a timestamp."),
    ("VIEW", "ticks", "tokens with their times as timestamps."),
    ("VIEW", "balances", "holdings with updated_at as a timestamp."),
    ("VIEW", "holders", "balances above zero."),
];

const BROKER_COMMENTS: &[(&str, &str, &str)] = &[
    ("TABLE", "broker_agents", "The agent index of the build: one row per agent, its full record as JSON in `record`."),
    ("TABLE", "broker_feedback", "ERC-8004 feedback entries per agent, their full record as JSON in `record`."),
    ("VIEW", "agents", "broker_agents with their first protocol and whether this deployment can chat with them."),
    ("VIEW", "feedback", "broker_feedback without the raw records."),
];

/// Writes the views and comments (the broker's when `broker`).
pub fn document(conn: &Connection, broker: bool) -> Result<()> {
    conn.execute_batch(LEDGER_VIEWS).context("the analysts' views")?;
    let mut comments: Vec<&(&str, &str, &str)> = COMMENTS.iter().collect();
    if broker {
        conn.execute_batch(BROKER_VIEWS).context("the analysts' broker views")?;
        comments.extend(BROKER_COMMENTS);
    }
    for (kind, name, comment) in comments {
        conn.execute(&format!("COMMENT ON {kind} {name} IS '{}'", comment.replace('\'', "''")), [])
            .with_context(|| format!("commenting on {name}"))?;
    }
    Ok(())
}
