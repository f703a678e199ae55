//! Section C's tables in the warehouse and in a build's snapshot.
//!
//! The generator writes the derived tables (topics, tokens, holdings,
//! recent events, every operation with its verdict) into its warehouse:
//! replaced whole by a full replay ([`write_operations`], [`write_full`]),
//! changed in place by an
//! incremental run ([`apply_delta`]). A build's snapshot
//! (`data/snapshots/<build>.duckdb`) is then a copy of the checkpointed
//! warehouse file ([`duckdb_files::snapshot::copy_to`]), holding the raw messages
//! too. Analysts open it read-only; the api loads its model from it
//! ([`load_analytics`]). Times are `*_ns` columns (nanoseconds since
//! the epoch, exact), with `TIMESTAMP` views for convenience.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use duckdb_files::params;
use duckdb_files::sql::{self, Connection};

use crate::analytics::{Analytics, EventRow, HoldingRow, TokenSummary};
use crate::{Changes, EventKind, Holding, Ledger, OperationRow, Token, TokenId, TopicInfo, Topics};
use duckdb_files::columnar;
use shared::entity::EntityId;
use shared::timestamp::Timestamp;

const SCHEMA: &str = "
CREATE OR REPLACE TABLE topics (topic VARCHAR, private BOOLEAN, name VARCHAR, registered_ns UBIGINT);
CREATE OR REPLACE TABLE tokens (
    topic VARCHAR, tick VARCHAR, name VARCHAR, max UBIGINT, lim UBIGINT, memo VARCHAR, metadata VARCHAR,
    deployed_ns UBIGINT, supply UBIGINT, minted UBIGINT, burned UBIGINT, mints UBIGINT, burns UBIGINT,
    transfers UBIGINT, holders UBIGINT, last_change_ns UBIGINT);
CREATE OR REPLACE TABLE holdings (topic VARCHAR, tick VARCHAR, account VARCHAR, balance UBIGINT, updated_ns UBIGINT);
CREATE OR REPLACE TABLE recent_events (
    topic VARCHAR, sequence UBIGINT, consensus_ns UBIGINT, tick VARCHAR, kind VARCHAR, amount UBIGINT,
    from_account VARCHAR, to_account VARCHAR, payer VARCHAR, memo VARCHAR);
CREATE OR REPLACE TABLE build (key VARCHAR, value VARCHAR);
CREATE OR REPLACE TABLE applied (topic VARCHAR, last_sequence UBIGINT);
CREATE OR REPLACE VIEW events AS
    SELECT topic, sequence, consensus_ns, tick, op AS kind, amount, from_account, to_account, payer, memo
    FROM operations WHERE valid AND op IN ('mint', 'burn', 'transfer');
CREATE OR REPLACE VIEW operations_at AS
    SELECT *, make_timestamp((consensus_ns // 1000)::BIGINT) AS consensus_at FROM operations;
CREATE OR REPLACE VIEW events_at AS
    SELECT *, make_timestamp((consensus_ns // 1000)::BIGINT) AS consensus_at FROM events;
";

/// Every message's verdict: written on its own by [`write_operations`].
const OPERATIONS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS build (key VARCHAR, value VARCHAR);
UPDATE build SET value = 'pending' WHERE key = 'id';
CREATE OR REPLACE TABLE operations (
    topic VARCHAR, sequence UBIGINT, consensus_ns UBIGINT, payer VARCHAR, chunks UINTEGER, op VARCHAR,
    tick VARCHAR, amount UBIGINT, from_account VARCHAR, to_account VARCHAR, memo VARCHAR, valid BOOLEAN,
    reason VARCHAR);
";

/// Snapshot layout version, in the `build` table: a snapshot of another
/// version is never resumed from.
pub const FORMAT: &str = "3";

/// The build id the derived tables hold while an incremental run changes
/// them: a run that dies then leaves tables no build matches, and the next
/// run replays everything.
const PENDING: &str = "pending";

/// What a later run needs to resume from a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// The build the tables belong to (`pending` while a run changes them).
    pub build: String,
    pub topics: Topics,
    pub recent_limit: usize,
    pub last_applied: Option<Timestamp>,
    /// Last sequence number applied, per topic.
    pub applied: BTreeMap<EntityId, u64>,
}

/// Replaces the `operations` table with a full replay's, marking the
/// derived tables pending. A full replay writes it first (on its own
/// connection, while the files are rendered), then [`write_full`].
pub fn write_operations(conn: &Connection, operations: &[OperationRow]) -> Result<()> {
    let tx = conn.unchecked_transaction()?;
    tx.execute_batch(OPERATIONS_SCHEMA)?;
    insert_operations(&tx, operations)?;
    tx.commit().context("writing the operations")
}

/// Replaces the other derived tables with those of a full replay. `recent`
/// are the model's kept events (its `recent_events`).
#[tracing::instrument(level = "debug", skip_all)]
pub fn write_full(conn: &Connection, ledger: &Ledger, recent: &[EventRow], meta: &Meta) -> Result<()> {
    let tx = conn.unchecked_transaction()?;
    tx.execute_batch(SCHEMA)?;
    insert_topics(&tx, ledger.topics.values())?;
    insert_tokens(&tx, ledger, (0..ledger.tokens.len() as u32).map(TokenId))?;
    insert_holdings(&tx, ledger, ledger.balances.keys().copied())?;
    insert_events(&tx, "recent_events", recent)?;
    write_meta_rows(&tx, PENDING, meta)?;
    tx.commit().context("writing the derived tables")?;
    Ok(())
}

/// Applies an incremental run's changes to the derived tables, marking
/// them pending until [`write_meta`] names the new build.
pub fn apply_delta(
    conn: &Connection,
    ledger: &Ledger,
    changes: &Changes,
    operations: &[OperationRow],
    recent_limit: usize,
) -> Result<()> {
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
            ("topic", columnar::strings(changes.tokens.iter().map(|t| Some(token(t).topic.text())))),
            ("tick", columnar::strings(changes.tokens.iter().map(|t| Some(token(t).tick.as_str())))),
        ])?,
    )?;
    columnar::append(
        &tx,
        "changed_holdings",
        columnar::batch(vec![
            ("topic", columnar::strings(changes.balances.iter().map(|(t, _)| Some(token(t).topic.text())))),
            ("tick", columnar::strings(changes.balances.iter().map(|(t, _)| Some(token(t).tick.as_str())))),
            ("account", columnar::strings(changes.balances.iter().map(|(_, a)| Some(a.text())))),
        ])?,
    )?;
    tx.execute_batch(
        "DELETE FROM tokens USING changed_tokens c WHERE tokens.topic = c.topic AND tokens.tick = c.tick;
         DELETE FROM holdings USING changed_holdings c
           WHERE holdings.topic = c.topic AND holdings.tick = c.tick AND holdings.account = c.account;",
    )?;
    insert_tokens(&tx, ledger, changes.tokens.iter().copied())?;
    insert_holdings(&tx, ledger, changes.balances.iter().copied())?;
    let new_events: Vec<EventRow> =
        ledger.events[changes.first_event..].iter().map(|e| EventRow::of(ledger, e)).collect();
    insert_events(&tx, "recent_events", &new_events)?;
    trim_recent(&tx, recent_limit)?;
    insert_operations(&tx, operations)?;
    tx.execute_batch("DROP TABLE changed_tokens; DROP TABLE changed_holdings;")?;
    tx.execute("UPDATE build SET value = ? WHERE key = 'id'", params![PENDING])?;
    tx.commit().context("applying the changes")
}

/// Records the build id and resume state, in one transaction.
pub fn write_meta(conn: &Connection, build: &str, meta: &Meta) -> Result<()> {
    let tx = conn.unchecked_transaction()?;
    write_meta_rows(&tx, build, meta)?;
    tx.commit().context("recording the build")
}

/// [`write_meta`] inside a transaction the caller holds.
fn write_meta_rows(conn: &Connection, build: &str, meta: &Meta) -> Result<()> {
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

/// Reads the tables' [`Meta`]; `None` when there are none, they are of
/// another format, or they cannot be read (then a run replays everything).
pub fn read_meta(conn: &Connection) -> Result<Option<Meta>> {
    match try_read_meta(conn) {
        Ok(meta) => Ok(meta),
        Err(error) => {
            tracing::warn!(error = format!("{error:#}"), "unreadable build record; replaying everything");
            Ok(None)
        }
    }
}

fn try_read_meta(conn: &Connection) -> Result<Option<Meta>> {
    if !duckdb_files::database::has_table(conn, "build")? {
        return Ok(None);
    }
    let mut stmt = conn.prepare("SELECT key, value FROM build")?;
    let pairs: BTreeMap<String, String> =
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<sql::Result<_>>()?;
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
        build: get("id"),
        topics: Topics { public: get("public_topic").parse()?, registry: get("registry_topic").parse()? },
        recent_limit: get("recent_limit").parse()?,
        last_applied: get("last_applied_ns").parse().ok().map(Timestamp),
        applied,
    }))
}

fn insert_topics<'a>(conn: &Connection, topics: impl Iterator<Item = &'a TopicInfo>) -> Result<()> {
    let topics: Vec<&TopicInfo> = topics.collect();
    let batch = columnar::batch(vec![
        ("topic", columnar::strings(topics.iter().map(|t| Some(t.id.to_string())))),
        ("private", columnar::bools(topics.iter().map(|t| Some(t.private)))),
        ("name", columnar::strings(topics.iter().map(|t| t.name.as_deref()))),
        ("registered_ns", columnar::u64s(topics.iter().map(|t| t.registered_at.map(|t| t.0)))),
    ])?;
    columnar::append(conn, "topics", batch)
}

fn insert_tokens(conn: &Connection, ledger: &Ledger, ids: impl Iterator<Item = TokenId>) -> Result<()> {
    let tokens: Vec<&Token> = ids.map(|id| &ledger.tokens[id.0 as usize]).collect();
    let count = |f: fn(&Token) -> u64| columnar::u64s(tokens.iter().map(|t| Some(f(t))));
    let batch = columnar::batch(vec![
        ("topic", columnar::strings(tokens.iter().map(|t| Some(t.topic.to_string())))),
        ("tick", columnar::strings(tokens.iter().map(|t| Some(t.tick.as_str())))),
        ("name", columnar::strings(tokens.iter().map(|t| Some(t.name.as_str())))),
        ("max", count(|t| t.max)),
        ("lim", columnar::u64s(tokens.iter().map(|t| t.lim))),
        ("memo", columnar::strings(tokens.iter().map(|t| t.memo.as_deref()))),
        ("metadata", columnar::strings(tokens.iter().map(|t| t.metadata.as_deref()))),
        ("deployed_ns", count(|t| t.deployed_at.0)),
        ("supply", count(Token::supply)),
        ("minted", count(|t| t.minted)),
        ("burned", count(|t| t.burned)),
        ("mints", count(|t| t.mints)),
        ("burns", count(|t| t.burns)),
        ("transfers", count(|t| t.transfers)),
        ("holders", count(|t| t.holders)),
        ("last_change_ns", count(|t| t.last_change.0)),
    ])?;
    columnar::append(conn, "tokens", batch)
}

fn insert_holdings(conn: &Connection, ledger: &Ledger, keys: impl Iterator<Item = (TokenId, EntityId)>) -> Result<()> {
    let rows: Vec<((TokenId, EntityId), &Holding)> =
        keys.filter_map(|k| ledger.balances.get(&k).map(|h| (k, h))).collect();
    let token = |id: &TokenId| &ledger.tokens[id.0 as usize];
    let batch = columnar::batch(vec![
        ("topic", columnar::strings(rows.iter().map(|((t, _), _)| Some(token(t).topic.text())))),
        ("tick", columnar::strings(rows.iter().map(|((t, _), _)| Some(token(t).tick.as_str())))),
        ("account", columnar::strings(rows.iter().map(|((_, a), _)| Some(a.text())))),
        ("balance", columnar::u64s(rows.iter().map(|(_, h)| Some(h.balance)))),
        ("updated_ns", columnar::u64s(rows.iter().map(|(_, h)| Some(h.updated_at.0)))),
    ])?;
    columnar::append(conn, "holdings", batch)
}

/// Keeps in `recent_events` only the newest `limit` events of each kind per
/// token and for the whole ecosystem: what the api and incremental runs
/// load, without scanning every event.
fn trim_recent(conn: &Connection, limit: usize) -> Result<()> {
    conn.execute(
        "CREATE OR REPLACE TABLE recent_events AS SELECT * FROM recent_events
         QUALIFY row_number() OVER (PARTITION BY topic, tick, kind ORDER BY consensus_ns DESC, sequence DESC) <= ?1
              OR row_number() OVER (PARTITION BY kind ORDER BY consensus_ns DESC, sequence DESC) <= ?1",
        params![limit as u64],
    )?;
    Ok(())
}

fn insert_events(conn: &Connection, table: &str, events: &[EventRow]) -> Result<()> {
    for part in events.chunks(200_000) {
        let batch = columnar::batch(vec![
            ("topic", columnar::strings(part.iter().map(|e| Some(e.topic.text())))),
            ("sequence", columnar::u64s(part.iter().map(|e| Some(e.sequence)))),
            ("consensus_ns", columnar::u64s(part.iter().map(|e| Some(e.consensus.0)))),
            ("tick", columnar::strings(part.iter().map(|e| Some(e.tick.as_str())))),
            ("kind", columnar::strings(part.iter().map(|e| Some(e.kind.as_str())))),
            ("amount", columnar::u64s(part.iter().map(|e| Some(e.amount)))),
            ("from_account", columnar::strings(part.iter().map(|e| e.from.map(|a| a.text())))),
            ("to_account", columnar::strings(part.iter().map(|e| e.to.map(|a| a.text())))),
            ("payer", columnar::strings(part.iter().map(|e| Some(e.payer.text())))),
            ("memo", columnar::strings(part.iter().map(|e| e.memo.as_deref()))),
        ])?;
        columnar::append(conn, table, batch)?;
    }
    Ok(())
}

fn insert_operations(conn: &Connection, operations: &[OperationRow]) -> Result<()> {
    for part in operations.chunks(200_000) {
        let batch = columnar::batch(vec![
            ("topic", columnar::strings(part.iter().map(|o| Some(o.topic.text())))),
            ("sequence", columnar::u64s(part.iter().map(|o| Some(o.sequence)))),
            ("consensus_ns", columnar::u64s(part.iter().map(|o| Some(o.consensus.0)))),
            ("payer", columnar::strings(part.iter().map(|o| Some(o.payer.text())))),
            ("chunks", columnar::u32s(part.iter().map(|o| Some(o.chunks)))),
            ("op", columnar::strings(part.iter().map(|o| o.op.map(|op| op.as_str())))),
            ("tick", columnar::strings(part.iter().map(|o| o.tick.as_deref()))),
            ("amount", columnar::u64s(part.iter().map(|o| o.amount))),
            ("from_account", columnar::strings(part.iter().map(|o| o.from.map(|a| a.text())))),
            ("to_account", columnar::strings(part.iter().map(|o| o.to.map(|a| a.text())))),
            ("memo", columnar::strings(part.iter().map(|o| o.memo.as_deref()))),
            ("valid", columnar::bools(part.iter().map(|o| Some(o.rejection.is_none())))),
            ("reason", columnar::strings(part.iter().map(|o| o.rejection.map(|r| r.describe())))),
        ])?;
        columnar::append(conn, "operations", batch)?;
    }
    Ok(())
}

fn parse(s: String) -> sql::Result<EntityId> {
    s.parse().map_err(|e| sql::Error::conversion(0, e))
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
    Ok(rows.collect::<sql::Result<Vec<_>>>()?)
}

/// Holdings: all of them, or those a query selecting the same columns picks.
fn holdings(conn: &Connection, query: Option<&str>) -> Result<Vec<HoldingRow>> {
    let mut stmt = conn.prepare(query.unwrap_or("SELECT topic, tick, account, balance, updated_ns FROM holdings"))?;
    let mut out = Vec::new();
    // Columnar: half a million rows load in a fraction of the row API's time.
    for chunk in stmt.chunks([])? {
        let (topics, ticks, accounts) = (chunk.strings(0)?, chunk.strings(1)?, chunk.strings(2)?);
        let (balances, updated) = (chunk.u64s(3)?, chunk.u64s(4)?);
        out.reserve(chunk.len());
        for i in 0..chunk.len() {
            out.push(HoldingRow {
                topic: topics.value(i).parse()?,
                tick: ticks.value(i).to_string(),
                account: accounts.value(i).parse()?,
                balance: balances.value(i),
                updated_at: Timestamp(updated.value(i)),
            });
        }
    }
    Ok(out)
}

/// The newest events of each kind per token and for the whole ecosystem
/// (the `recent_events` table, kept trimmed to the snapshot's limit).
fn recent_events(conn: &Connection) -> Result<Vec<EventRow>> {
    let mut stmt = conn.prepare(
        "SELECT topic, sequence, consensus_ns, tick, kind, amount, from_account, to_account, payer, memo
         FROM recent_events",
    )?;
    let rows = stmt.query_map([], |r| {
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
    Ok(rows.collect::<sql::Result<Vec<_>>>()?)
}

/// Per token and minute with a valid mint or burn: the amounts minted and
/// burned in that minute, in order of token and time. What the pages'
/// charts of supply over time are drawn from (at most one row per event,
/// usually far fewer).
pub fn supply_by_minute(conn: &Connection) -> Result<Vec<SupplyChange>> {
    let mut stmt = conn.prepare(
        "SELECT topic, tick, (consensus_ns // 60000000000)::BIGINT AS minute,
                coalesce(sum(amount) FILTER (WHERE kind = 'mint'), 0)::UBIGINT,
                coalesce(sum(amount) FILTER (WHERE kind = 'burn'), 0)::UBIGINT
         FROM events WHERE kind IN ('mint', 'burn') GROUP BY ALL ORDER BY topic, tick, minute",
    )?;
    let rows = stmt.query_map([], |r| {
        let (topic, tick, minute, minted, burned) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
        Ok(SupplyChange { topic: parse(topic)?, tick, minute, minted, burned })
    })?;
    rows.collect::<sql::Result<Vec<_>>>().context("supply by minute")
}

/// A token's mints and burns in one minute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupplyChange {
    pub topic: EntityId,
    pub tick: String,
    /// Minutes since 1970-01-01 UTC.
    pub minute: i64,
    pub minted: u64,
    pub burned: u64,
}

/// Loads the api's model from an open snapshot: tokens, every holding, and
/// only the newest `recent_limit` events of each kind per token and overall.
pub fn load_analytics(conn: &Connection, recent_limit: usize) -> Result<Analytics> {
    let tokens: Vec<TokenSummary> = tokens(conn)?.iter().map(TokenSummary::from).collect();
    Ok(Analytics::from_parts(tokens, holdings(conn, None)?, recent_events(conn)?, recent_limit))
}

/// The part of the model an incremental build re-renders: every token,
/// the holdings of the changed tokens and accounts, their recent events,
/// and the ecosystem's; the holder total is counted in the snapshot.
#[tracing::instrument(level = "debug", skip_all)]
pub fn load_partial(
    conn: &Connection,
    tokens_changed: &BTreeSet<(EntityId, String)>,
    accounts_changed: &BTreeSet<EntityId>,
    recent_limit: usize,
) -> Result<Analytics> {
    let tokens: Vec<TokenSummary> = tokens(conn)?.iter().map(TokenSummary::from).collect();
    // One plain scan, filtered here: cheaper than a join when, as usual, the
    // changed tokens include the popular ones and so most holdings.
    let wanted: std::collections::HashSet<(EntityId, &str)> =
        tokens_changed.iter().map(|(topic, tick)| (*topic, tick.as_str())).collect();
    let mut holdings = holdings(conn, None)?;
    holdings.retain(|h| accounts_changed.contains(&h.account) || wanted.contains(&(h.topic, h.tick.as_str())));
    let events = recent_events(conn)?;
    let total: u64 =
        conn.query_row("SELECT count(DISTINCT account) FROM holdings WHERE balance > 0", [], |r| r.get(0))?;
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
        .collect::<sql::Result<Vec<_>>>()?;
    conn.execute_batch("CREATE OR REPLACE TEMP TABLE want_accounts (account VARCHAR);")?;
    columnar::append(
        conn,
        "want_accounts",
        columnar::batch(vec![("account", columnar::strings(accounts.iter().map(|a| Some(a.text()))))])?,
    )?;
    let balances = holdings(
        conn,
        Some("SELECT topic, tick, account, balance, updated_ns FROM holdings JOIN want_accounts USING (account)"),
    )?
    .into_iter()
    .map(|h| ((h.topic, h.tick), h.account, Holding { balance: h.balance, updated_at: h.updated_at }))
    .collect();
    conn.execute_batch("DROP TABLE want_accounts;")?;
    Ok(Ledger::resume(meta.topics, topics, tokens(conn)?, balances, meta.last_applied))
}
