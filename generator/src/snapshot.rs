//! A build's immutable DuckDB snapshot (`data/snapshots/<build>.duckdb`).
//!
//! Written once per build, before the build goes live, and never changed:
//! analysts open it read-only, and the api loads its in-memory model from it
//! when it picks the build up ([`load_analytics`]). An incremental build
//! copies the previous snapshot, applies its changes ([`apply_delta`]), and
//! loads only the part of the model its changes touch ([`load_partial`]).
//! Times are `*_ns` columns (nanoseconds since the epoch, exact), with
//! `TIMESTAMP` views for convenience.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};
use duckdb::{params, AccessMode, Config, Connection};

use crate::analytics::{Analytics, EventRow, HoldingRow, TokenSummary};
use crate::columnar;
use crate::entity::EntityId;
use crate::hcs20::{Changes, Event, EventKind, Holding, Ledger, OperationRow, Token, TokenId, TopicInfo, Topics};
use crate::timestamp::Timestamp;

const SCHEMA: &str = "
CREATE TABLE topics (topic VARCHAR, private BOOLEAN, name VARCHAR, registered_ns UBIGINT);
CREATE TABLE tokens (
    topic VARCHAR, tick VARCHAR, name VARCHAR, max UBIGINT, lim UBIGINT, memo VARCHAR, metadata VARCHAR,
    deployed_ns UBIGINT, supply UBIGINT, minted UBIGINT, burned UBIGINT, mints UBIGINT, burns UBIGINT,
    transfers UBIGINT, holders UBIGINT, last_change_ns UBIGINT);
CREATE TABLE holdings (topic VARCHAR, tick VARCHAR, account VARCHAR, balance UBIGINT, updated_ns UBIGINT);
CREATE TABLE events (
    topic VARCHAR, sequence UBIGINT, consensus_ns UBIGINT, tick VARCHAR, kind VARCHAR, amount UBIGINT,
    from_account VARCHAR, to_account VARCHAR, payer VARCHAR, memo VARCHAR);
CREATE TABLE operations (
    topic VARCHAR, sequence UBIGINT, consensus_ns UBIGINT, payer VARCHAR, chunks UINTEGER, op VARCHAR,
    tick VARCHAR, amount UBIGINT, from_account VARCHAR, to_account VARCHAR, valid BOOLEAN, reason VARCHAR);
CREATE TABLE build (key VARCHAR, value VARCHAR);
CREATE TABLE applied (topic VARCHAR, last_sequence UBIGINT);
CREATE VIEW operations_at AS SELECT *, make_timestamp((consensus_ns // 1000)::BIGINT) AS consensus_at FROM operations;
CREATE VIEW events_at AS SELECT *, make_timestamp((consensus_ns // 1000)::BIGINT) AS consensus_at FROM events;
";

/// Snapshot layout version, in the `build` table: a snapshot of another
/// version is never resumed from.
pub const FORMAT: &str = "1";

/// What a later run needs to resume from a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub topics: Topics,
    pub recent_limit: usize,
    pub last_applied: Option<Timestamp>,
    /// Last sequence number applied, per topic.
    pub applied: BTreeMap<EntityId, u64>,
}

/// Writes the snapshot of a ledger to `path` (a new file: written to a
/// temporary name and renamed when complete).
pub fn write(path: &Path, build: &str, ledger: &Ledger, operations: &[OperationRow], meta: &Meta) -> Result<()> {
    let temp = temp_path(path)?;
    {
        let conn = Connection::open(&temp).with_context(|| format!("creating {}", temp.display()))?;
        conn.execute_batch(SCHEMA)?;
        insert_topics(&conn, ledger.topics.values())?;
        insert_tokens(&conn, ledger, (0..ledger.tokens.len() as u32).map(TokenId))?;
        insert_holdings(&conn, ledger, ledger.balances.keys().copied())?;
        insert_events(&conn, ledger, &ledger.events)?;
        insert_operations(&conn, operations)?;
        write_meta(&conn, build, meta)?;
        conn.execute_batch("CHECKPOINT")?;
    }
    std::fs::rename(&temp, path).with_context(|| format!("naming {}", path.display()))
}

/// A fresh temporary name beside `path`.
pub fn temp_path(path: &Path) -> Result<std::path::PathBuf> {
    let dir = path.parent().context("snapshot path has no folder")?;
    std::fs::create_dir_all(dir)?;
    let temp = dir.join(format!(".{}.tmp", path.file_name().unwrap().to_string_lossy()));
    for leftover in [temp.clone(), temp.with_extension("tmp.wal")] {
        let _ = std::fs::remove_file(leftover);
    }
    Ok(temp)
}

/// Applies an incremental run's changes to a copy of the previous snapshot
/// (or to the warehouse's derived tables: the same tables).
pub fn apply_delta(conn: &Connection, ledger: &Ledger, changes: &Changes, operations: &[OperationRow]) -> Result<()> {
    let tx = conn.unchecked_transaction()?;
    tx.execute_batch(
        "CREATE OR REPLACE TEMP TABLE changed_tokens (topic VARCHAR, tick VARCHAR);
         CREATE OR REPLACE TEMP TABLE changed_holdings (topic VARCHAR, tick VARCHAR, account VARCHAR);",
    )?;
    let token = |id: &TokenId| &ledger.tokens[id.0 as usize];
    columnar::append(
        &tx,
        "changed_tokens",
        columnar::batch(vec![
            ("topic", columnar::strings(changes.tokens.iter().map(|t| Some(token(t).topic.to_string())))),
            ("tick", columnar::strings(changes.tokens.iter().map(|t| Some(token(t).tick.as_str())))),
        ])?,
    )?;
    columnar::append(
        &tx,
        "changed_holdings",
        columnar::batch(vec![
            ("topic", columnar::strings(changes.balances.iter().map(|(t, _)| Some(token(t).topic.to_string())))),
            ("tick", columnar::strings(changes.balances.iter().map(|(t, _)| Some(token(t).tick.as_str())))),
            ("account", columnar::strings(changes.balances.iter().map(|(_, a)| Some(a.to_string())))),
        ])?,
    )?;
    tx.execute_batch(
        "DELETE FROM tokens USING changed_tokens c WHERE tokens.topic = c.topic AND tokens.tick = c.tick;
         DELETE FROM holdings USING changed_holdings c
           WHERE holdings.topic = c.topic AND holdings.tick = c.tick AND holdings.account = c.account;",
    )?;
    insert_tokens(&tx, ledger, changes.tokens.iter().copied())?;
    insert_holdings(&tx, ledger, changes.balances.iter().copied())?;
    insert_events(&tx, ledger, &ledger.events[changes.first_event..])?;
    insert_operations(&tx, operations)?;
    tx.execute_batch("DROP TABLE changed_tokens; DROP TABLE changed_holdings;")?;
    tx.commit().context("applying the changes")
}

/// Records the build id and resume state.
pub fn write_meta(conn: &Connection, build: &str, meta: &Meta) -> Result<()> {
    conn.execute_batch("DELETE FROM build; DELETE FROM applied;")?;
    let rows = [
        ("id", build.to_string()),
        ("format", FORMAT.to_string()),
        ("public_topic", meta.topics.public.to_string()),
        ("registry_topic", meta.topics.registry.to_string()),
        ("recent_limit", meta.recent_limit.to_string()),
        ("last_applied_ns", meta.last_applied.map_or(String::new(), |t| t.0.to_string())),
    ];
    for (key, value) in rows {
        conn.execute("INSERT INTO build VALUES (?, ?)", params![key, value])?;
    }
    for (topic, last) in &meta.applied {
        conn.execute("INSERT INTO applied VALUES (?, ?)", params![topic.to_string(), last])?;
    }
    Ok(())
}

/// Reads a snapshot's [`Meta`]; `None` for a snapshot of another format.
pub fn read_meta(conn: &Connection) -> Result<Option<Meta>> {
    let mut stmt = conn.prepare("SELECT key, value FROM build")?;
    let pairs: BTreeMap<String, String> =
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<duckdb::Result<_>>()?;
    if pairs.get("format").map(String::as_str) != Some(FORMAT) {
        return Ok(None);
    }
    let get = |key: &str| pairs.get(key).cloned().unwrap_or_default();
    let mut stmt = conn.prepare("SELECT topic, last_sequence FROM applied")?;
    let mut applied = BTreeMap::new();
    for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u64>(1)?)))? {
        let (topic, last) = row?;
        applied.insert(topic.parse()?, last);
    }
    Ok(Some(Meta {
        topics: Topics { public: get("public_topic").parse()?, registry: get("registry_topic").parse()? },
        recent_limit: get("recent_limit").parse()?,
        last_applied: get("last_applied_ns").parse().ok().map(Timestamp),
        applied,
    }))
}

fn insert_topics<'a>(conn: &Connection, topics: impl Iterator<Item = &'a TopicInfo>) -> Result<()> {
    let mut a = conn.appender("topics")?;
    for t in topics {
        a.append_row(params![t.id.to_string(), t.private, t.name, t.registered_at.map(|t| t.0)])?;
    }
    Ok(())
}

fn insert_tokens(conn: &Connection, ledger: &Ledger, ids: impl Iterator<Item = TokenId>) -> Result<()> {
    let mut a = conn.appender("tokens")?;
    for id in ids {
        let t = &ledger.tokens[id.0 as usize];
        a.append_row(params![
            t.topic.to_string(),
            t.tick,
            t.name,
            t.max,
            t.lim,
            t.memo,
            t.metadata,
            t.deployed_at.0,
            t.supply(),
            t.minted,
            t.burned,
            t.mints,
            t.burns,
            t.transfers,
            t.holders,
            t.last_change.0
        ])?;
    }
    Ok(())
}

fn insert_holdings(conn: &Connection, ledger: &Ledger, keys: impl Iterator<Item = (TokenId, EntityId)>) -> Result<()> {
    let rows: Vec<((TokenId, EntityId), &Holding)> =
        keys.filter_map(|k| ledger.balances.get(&k).map(|h| (k, h))).collect();
    let token = |id: &TokenId| &ledger.tokens[id.0 as usize];
    let batch = columnar::batch(vec![
        ("topic", columnar::strings(rows.iter().map(|((t, _), _)| Some(token(t).topic.to_string())))),
        ("tick", columnar::strings(rows.iter().map(|((t, _), _)| Some(token(t).tick.as_str())))),
        ("account", columnar::strings(rows.iter().map(|((_, a), _)| Some(a.to_string())))),
        ("balance", columnar::u64s(rows.iter().map(|(_, h)| Some(h.balance)))),
        ("updated_ns", columnar::u64s(rows.iter().map(|(_, h)| Some(h.updated_at.0)))),
    ])?;
    columnar::append(conn, "holdings", batch)
}

fn insert_events(conn: &Connection, ledger: &Ledger, events: &[Event]) -> Result<()> {
    let tick = |e: &Event| ledger.tokens[e.token.0 as usize].tick.as_str();
    for part in events.chunks(200_000) {
        let batch = columnar::batch(vec![
            ("topic", columnar::strings(part.iter().map(|e| Some(e.topic.to_string())))),
            ("sequence", columnar::u64s(part.iter().map(|e| Some(e.sequence)))),
            ("consensus_ns", columnar::u64s(part.iter().map(|e| Some(e.consensus.0)))),
            ("tick", columnar::strings(part.iter().map(|e| Some(tick(e))))),
            ("kind", columnar::strings(part.iter().map(|e| Some(e.kind.as_str())))),
            ("amount", columnar::u64s(part.iter().map(|e| Some(e.amount)))),
            ("from_account", columnar::strings(part.iter().map(|e| e.from.map(|a| a.to_string())))),
            ("to_account", columnar::strings(part.iter().map(|e| e.to.map(|a| a.to_string())))),
            ("payer", columnar::strings(part.iter().map(|e| Some(e.payer.to_string())))),
            ("memo", columnar::strings(part.iter().map(|e| e.memo.as_deref()))),
        ])?;
        columnar::append(conn, "events", batch)?;
    }
    Ok(())
}

fn insert_operations(conn: &Connection, operations: &[OperationRow]) -> Result<()> {
    for part in operations.chunks(200_000) {
        let batch = columnar::batch(vec![
            ("topic", columnar::strings(part.iter().map(|o| Some(o.topic.to_string())))),
            ("sequence", columnar::u64s(part.iter().map(|o| Some(o.sequence)))),
            ("consensus_ns", columnar::u64s(part.iter().map(|o| Some(o.consensus.0)))),
            ("payer", columnar::strings(part.iter().map(|o| Some(o.payer.to_string())))),
            ("chunks", columnar::u32s(part.iter().map(|o| Some(o.chunks)))),
            ("op", columnar::strings(part.iter().map(|o| o.op.map(|op| op.as_str())))),
            ("tick", columnar::strings(part.iter().map(|o| o.tick.as_deref()))),
            ("amount", columnar::u64s(part.iter().map(|o| o.amount))),
            ("from_account", columnar::strings(part.iter().map(|o| o.from.map(|a| a.to_string())))),
            ("to_account", columnar::strings(part.iter().map(|o| o.to.map(|a| a.to_string())))),
            ("valid", columnar::bools(part.iter().map(|o| Some(o.rejection.is_none())))),
            ("reason", columnar::strings(part.iter().map(|o| o.rejection.map(|r| r.describe())))),
        ])?;
        columnar::append(conn, "operations", batch)?;
    }
    Ok(())
}

pub fn open_read_only(path: &Path) -> Result<Connection> {
    let config = Config::default().access_mode(AccessMode::ReadOnly)?;
    Connection::open_with_flags(path, config).with_context(|| format!("opening {}", path.display()))
}

fn parse(s: String) -> duckdb::Result<EntityId> {
    s.parse().map_err(|e| duckdb::Error::FromSqlConversionFailure(0, duckdb::types::Type::Text, Box::new(e)))
}

fn tokens(conn: &Connection) -> Result<Vec<Token>> {
    let mut stmt = conn.prepare(
        "SELECT topic, tick, name, max, lim, memo, metadata, deployed_ns, minted, burned, mints, burns, transfers,
                holders, last_change_ns FROM tokens ORDER BY deployed_ns, topic, tick",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(Token {
            topic: parse(r.get(0)?)?,
            tick: r.get(1)?,
            name: r.get(2)?,
            max: r.get(3)?,
            lim: r.get(4)?,
            memo: r.get(5)?,
            metadata: r.get(6)?,
            deployed_at: Timestamp(r.get(7)?),
            minted: r.get(8)?,
            burned: r.get(9)?,
            mints: r.get(10)?,
            burns: r.get(11)?,
            transfers: r.get(12)?,
            holders: r.get(13)?,
            last_change: Timestamp(r.get(14)?),
        })
    })?;
    Ok(rows.collect::<duckdb::Result<Vec<_>>>()?)
}

fn summary(t: &Token) -> TokenSummary {
    TokenSummary {
        topic: t.topic,
        tick: t.tick.clone(),
        name: t.name.clone(),
        max: t.max,
        lim: t.lim,
        memo: t.memo.clone(),
        metadata: t.metadata.clone(),
        deployed_at: t.deployed_at,
        supply: t.supply(),
        mints: t.mints,
        burns: t.burns,
        transfers: t.transfers,
        holders: t.holders,
        last_change: t.last_change,
    }
}

/// Holdings, optionally only those `filter` (a SQL condition on `h`) keeps.
fn holdings(conn: &Connection, filter: &str) -> Result<Vec<HoldingRow>> {
    let mut stmt =
        conn.prepare(&format!("SELECT topic, tick, account, balance, updated_ns FROM holdings h {filter}"))?;
    let rows = stmt.query_map([], |r| {
        Ok(HoldingRow {
            topic: parse(r.get(0)?)?,
            tick: r.get(1)?,
            account: parse(r.get(2)?)?,
            balance: r.get(3)?,
            updated_at: Timestamp(r.get(4)?),
        })
    })?;
    Ok(rows.collect::<duckdb::Result<Vec<_>>>()?)
}

/// The newest `limit` events of each kind per token (of those `scope`, a SQL
/// condition on `e`, keeps) and for the whole ecosystem.
fn recent_events(conn: &Connection, scope: &str, limit: usize) -> Result<Vec<EventRow>> {
    const COLUMNS: &str = "topic, sequence, consensus_ns, tick, kind, amount, from_account, to_account, payer, memo";
    let newest = |kind: &str| {
        format!(
            "(SELECT {COLUMNS} FROM events WHERE kind = '{kind}' ORDER BY consensus_ns DESC, sequence DESC LIMIT ?1)"
        )
    };
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM events e WHERE {scope}
           QUALIFY row_number() OVER (PARTITION BY topic, tick, kind ORDER BY consensus_ns DESC, sequence DESC) <= ?1
         UNION {} UNION {} UNION {}",
        newest("mint"),
        newest("burn"),
        newest("transfer")
    ))?;
    let rows = stmt.query_map(params![limit as u64], |r| {
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
    })?;
    Ok(rows.collect::<duckdb::Result<Vec<_>>>()?)
}

/// Loads the api's model from a snapshot: tokens, every holding, and only
/// the newest `recent_limit` events of each kind per token and overall.
pub fn load_analytics(path: &Path, recent_limit: usize) -> Result<Analytics> {
    let conn = open_read_only(path)?;
    let tokens: Vec<TokenSummary> = tokens(&conn)?.iter().map(summary).collect();
    Ok(Analytics::from_parts(tokens, holdings(&conn, "")?, recent_events(&conn, "true", recent_limit)?, recent_limit))
}

/// The part of the model an incremental build re-renders: every token,
/// the holdings of the changed tokens and accounts, their recent events,
/// and the ecosystem's; the holder total is counted in the snapshot.
pub fn load_partial(
    conn: &Connection,
    tokens_changed: &BTreeSet<(EntityId, String)>,
    accounts_changed: &BTreeSet<EntityId>,
    recent_limit: usize,
) -> Result<Analytics> {
    conn.execute_batch(
        "CREATE OR REPLACE TEMP TABLE want_tokens (topic VARCHAR, tick VARCHAR);
         CREATE OR REPLACE TEMP TABLE want_accounts (account VARCHAR);",
    )?;
    columnar::append(
        conn,
        "want_tokens",
        columnar::batch(vec![
            ("topic", columnar::strings(tokens_changed.iter().map(|(t, _)| Some(t.to_string())))),
            ("tick", columnar::strings(tokens_changed.iter().map(|(_, tick)| Some(tick.as_str())))),
        ])?,
    )?;
    columnar::append(
        conn,
        "want_accounts",
        columnar::batch(vec![("account", columnar::strings(accounts_changed.iter().map(|a| Some(a.to_string()))))])?,
    )?;
    let tokens: Vec<TokenSummary> = tokens(conn)?.iter().map(summary).collect();
    let holdings = holdings(
        conn,
        "WHERE EXISTS (SELECT 1 FROM want_tokens w WHERE w.topic = h.topic AND w.tick = h.tick)
            OR EXISTS (SELECT 1 FROM want_accounts w WHERE w.account = h.account)",
    )?;
    let events = recent_events(
        conn,
        "EXISTS (SELECT 1 FROM want_tokens w WHERE w.topic = e.topic AND w.tick = e.tick)",
        recent_limit,
    )?;
    let total: u64 =
        conn.query_row("SELECT count(DISTINCT account) FROM holdings WHERE balance > 0", [], |r| r.get(0))?;
    conn.execute_batch("DROP TABLE want_tokens; DROP TABLE want_accounts;")?;
    let mut model = Analytics::from_parts(tokens, holdings, events, recent_limit);
    model.total_holders = total as usize;
    Ok(model)
}

/// Resumes the rules' ledger from a snapshot: topics, tokens, and the
/// balances of `accounts` (those the new messages name).
pub fn load_ledger(conn: &Connection, meta: &Meta, accounts: &BTreeSet<EntityId>) -> Result<Ledger> {
    let mut stmt = conn.prepare("SELECT topic, private, name, registered_ns FROM topics")?;
    let topics = stmt
        .query_map([], |r| {
            Ok(TopicInfo {
                id: parse(r.get(0)?)?,
                private: r.get(1)?,
                name: r.get(2)?,
                registered_at: r.get::<_, Option<u64>>(3)?.map(Timestamp),
            })
        })?
        .collect::<duckdb::Result<Vec<_>>>()?;
    conn.execute_batch("CREATE OR REPLACE TEMP TABLE want_accounts (account VARCHAR);")?;
    columnar::append(
        conn,
        "want_accounts",
        columnar::batch(vec![("account", columnar::strings(accounts.iter().map(|a| Some(a.to_string()))))])?,
    )?;
    let balances = holdings(conn, "WHERE EXISTS (SELECT 1 FROM want_accounts w WHERE w.account = h.account)")?
        .into_iter()
        .map(|h| ((h.topic, h.tick), h.account, Holding { balance: h.balance, updated_at: h.updated_at }))
        .collect();
    conn.execute_batch("DROP TABLE want_accounts;")?;
    Ok(Ledger::resume(meta.topics, topics, tokens(conn)?, balances, meta.last_applied))
}
