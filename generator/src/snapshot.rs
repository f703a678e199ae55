//! A build's immutable DuckDB snapshot (`data/snapshots/<build>.duckdb`).
//!
//! Written once per build, before the build goes live, and never changed:
//! analysts open it read-only, and the api loads its in-memory model from it
//! when it picks the build up ([`load_analytics`]). Times are `*_ns`
//! columns (nanoseconds since the epoch, exact) with `TIMESTAMP` views for
//! convenience.

use std::path::Path;

use anyhow::{Context, Result};
use duckdb::{params, AccessMode, Config, Connection};

use crate::analytics::{Analytics, EventRow, HoldingRow, TokenSummary};
use crate::entity::EntityId;
use crate::hcs20::{EventKind, Ledger, OperationRow};
use crate::timestamp::Timestamp;

const SCHEMA: &str = "
CREATE TABLE topics (topic VARCHAR, private BOOLEAN, name VARCHAR, registered_ns UBIGINT);
CREATE TABLE tokens (
    topic VARCHAR, tick VARCHAR, name VARCHAR, max UBIGINT, lim UBIGINT, memo VARCHAR, metadata VARCHAR,
    deployed_ns UBIGINT, supply UBIGINT, mints UBIGINT, burns UBIGINT, transfers UBIGINT, holders UBIGINT,
    last_change_ns UBIGINT);
CREATE TABLE holdings (topic VARCHAR, tick VARCHAR, account VARCHAR, balance UBIGINT, updated_ns UBIGINT);
CREATE TABLE events (
    topic VARCHAR, sequence UBIGINT, consensus_ns UBIGINT, tick VARCHAR, kind VARCHAR, amount UBIGINT,
    from_account VARCHAR, to_account VARCHAR, payer VARCHAR, memo VARCHAR);
CREATE TABLE operations (
    topic VARCHAR, sequence UBIGINT, consensus_ns UBIGINT, payer VARCHAR, chunks UINTEGER, op VARCHAR,
    tick VARCHAR, amount UBIGINT, from_account VARCHAR, to_account VARCHAR, valid BOOLEAN, reason VARCHAR);
CREATE TABLE build (key VARCHAR, value VARCHAR);
";

/// Writes the snapshot of a ledger to `path` (a new file: written to a
/// temporary name and renamed when complete).
pub fn write(path: &Path, build: &str, ledger: &Ledger, operations: &[OperationRow]) -> Result<()> {
    let dir = path.parent().context("snapshot path has no folder")?;
    std::fs::create_dir_all(dir)?;
    let temp = dir.join(format!(".{}.tmp", path.file_name().unwrap().to_string_lossy()));
    let _ = std::fs::remove_file(&temp);
    let _ = std::fs::remove_file(temp.with_extension("tmp.wal"));
    {
        let conn = Connection::open(&temp).with_context(|| format!("creating {}", temp.display()))?;
        conn.execute_batch(SCHEMA)?;
        fill(&conn, build, ledger, operations).context("writing the snapshot tables")?;
        conn.execute_batch("CHECKPOINT")?;
    }
    std::fs::rename(&temp, path).with_context(|| format!("naming {}", path.display()))?;
    Ok(())
}

fn fill(conn: &Connection, build: &str, ledger: &Ledger, operations: &[OperationRow]) -> Result<()> {
    let mut a = conn.appender("topics")?;
    for t in ledger.topics.values() {
        a.append_row(params![t.id.to_string(), t.private, t.name, t.registered_at.map(|t| t.0)])?;
    }
    drop(a);

    let mut a = conn.appender("tokens")?;
    for t in &ledger.tokens {
        a.append_row(params![
            t.topic.to_string(), t.tick, t.name, t.max, t.lim, t.memo, t.metadata, t.deployed_at.0,
            t.supply(), t.mints, t.burns, t.transfers, t.holders, t.last_change.0
        ])?;
    }
    drop(a);

    let mut a = conn.appender("holdings")?;
    for ((token, account), h) in &ledger.balances {
        let t = &ledger.tokens[token.0 as usize];
        a.append_row(params![t.topic.to_string(), t.tick, account.to_string(), h.balance, h.updated_at.0])?;
    }
    drop(a);

    let mut a = conn.appender("events")?;
    for e in &ledger.events {
        let t = &ledger.tokens[e.token.0 as usize];
        a.append_row(params![
            e.topic.to_string(), e.sequence, e.consensus.0, t.tick, e.kind.as_str(), e.amount,
            e.from.map(|a| a.to_string()), e.to.map(|a| a.to_string()), e.payer.to_string(), e.memo
        ])?;
    }
    drop(a);

    let mut a = conn.appender("operations")?;
    for o in operations {
        a.append_row(params![
            o.topic.to_string(), o.sequence, o.consensus.0, o.payer.to_string(), o.chunks,
            o.op.map(|op| op.as_str()), o.tick, o.amount, o.from.map(|a| a.to_string()),
            o.to.map(|a| a.to_string()), o.rejection.is_none(), o.rejection.map(|r| r.describe())
        ])?;
    }
    drop(a);

    conn.execute("INSERT INTO build VALUES ('id', ?)", params![build])?;
    conn.execute_batch(
        "CREATE VIEW operations_at AS SELECT *, make_timestamp((consensus_ns // 1000)::BIGINT) AS consensus_at FROM operations;
         CREATE VIEW events_at AS SELECT *, make_timestamp((consensus_ns // 1000)::BIGINT) AS consensus_at FROM events;",
    )?;
    Ok(())
}

/// Loads the api's model from a snapshot: tokens, every holding, and only
/// the newest `recent_limit` events of each kind per token and overall.
pub fn load_analytics(path: &Path, recent_limit: usize) -> Result<Analytics> {
    let config = Config::default().access_mode(AccessMode::ReadOnly)?;
    let conn = Connection::open_with_flags(path, config).with_context(|| format!("opening {}", path.display()))?;
    let parse = |s: String| -> duckdb::Result<EntityId> {
        s.parse().map_err(|e| duckdb::Error::FromSqlConversionFailure(0, duckdb::types::Type::Text, Box::new(e)))
    };

    let mut stmt = conn.prepare(
        "SELECT topic, tick, name, max, lim, memo, metadata, deployed_ns, supply, mints, burns, transfers, holders, last_change_ns FROM tokens",
    )?;
    let tokens = stmt
        .query_map([], |r| {
            Ok(TokenSummary {
                topic: parse(r.get(0)?)?,
                tick: r.get(1)?,
                name: r.get(2)?,
                max: r.get(3)?,
                lim: r.get(4)?,
                memo: r.get(5)?,
                metadata: r.get(6)?,
                deployed_at: Timestamp(r.get(7)?),
                supply: r.get(8)?,
                mints: r.get(9)?,
                burns: r.get(10)?,
                transfers: r.get(11)?,
                holders: r.get(12)?,
                last_change: Timestamp(r.get(13)?),
            })
        })?
        .collect::<duckdb::Result<Vec<_>>>()?;

    let mut stmt = conn.prepare("SELECT topic, tick, account, balance, updated_ns FROM holdings")?;
    let holdings = stmt
        .query_map([], |r| {
            Ok(HoldingRow {
                topic: parse(r.get(0)?)?,
                tick: r.get(1)?,
                account: parse(r.get(2)?)?,
                balance: r.get(3)?,
                updated_at: Timestamp(r.get(4)?),
            })
        })?
        .collect::<duckdb::Result<Vec<_>>>()?;

    let mut stmt = conn.prepare(
        "SELECT topic, sequence, consensus_ns, tick, kind, amount, from_account, to_account, payer, memo FROM events
         QUALIFY row_number() OVER (PARTITION BY topic, tick, kind ORDER BY consensus_ns DESC, sequence DESC) <= ?1
              OR row_number() OVER (PARTITION BY kind ORDER BY consensus_ns DESC, topic DESC, sequence DESC) <= ?1",
    )?;
    let events = stmt
        .query_map(params![recent_limit as u64], |r| {
            let kind = match r.get::<_, String>(4)?.as_str() {
                "mint" => EventKind::Mint,
                "burn" => EventKind::Burn,
                _ => EventKind::Transfer,
            };
            let account = |v: Option<String>| v.map(parse).transpose();
            Ok(EventRow {
                topic: parse(r.get(0)?)?,
                sequence: r.get(1)?,
                consensus: Timestamp(r.get(2)?),
                tick: r.get(3)?,
                kind,
                amount: r.get(5)?,
                from: account(r.get(6)?)?,
                to: account(r.get(7)?)?,
                payer: parse(r.get(8)?)?,
                memo: r.get(9)?,
            })
        })?
        .collect::<duckdb::Result<Vec<_>>>()?;

    Ok(Analytics::from_parts(tokens, holdings, events, recent_limit))
}
