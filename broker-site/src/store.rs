//! The broker's tables in the warehouse, and so in every build's snapshot:
//! the agents (key columns for analysts plus the whole record as JSON, and
//! the embedding when the deployment computes them), the feedback and the
//! catalog. Replaced whole by every build that publishes; the api loads its
//! search index from a build's snapshot once ([`load`]).
//!
//! A [`Writer`] appends the agents batch by batch in one transaction.
//! `broker_meta` records the sources' fingerprint (by which a run knows the
//! live build's broker files are current), the tally, and the newest times of
//! every agent's files (`newest`: a layer over changed agents recomputes them
//! from every agent only when a changed agent held one). What the agents'
//! shared files are made of is read back without the sources or a scan
//! (`rows`: the directory, over the cores; `records_of`, `id_clashes`,
//! `tally`). `update` writes a delta in one transaction. [`SearchIndex`]
//! (`broker_meta` `search`) names the search folder a layer keeps, which
//! `search_index` (and so `load` and `fingerprint`) gives in place of the
//! tables' own.

use std::collections::HashMap;

use anyhow::{Context, Result};
use duckdb_files::sql::{self, Connection};
use sha2::{Digest, Sha256};
use shared::timestamp::Timestamp;

use broker_model::catalog::{Catalog, FeedbackEntry};
use broker_model::Agent;

use duckdb_files::columnar;

const SCHEMA: &str = "
CREATE OR REPLACE TABLE broker_agents (
    position UINTEGER, id VARCHAR, uaid VARCHAR, registry VARCHAR, name VARCHAR, adapter VARCHAR, type VARCHAR,
    verification_status VARCHAR, trust_score DOUBLE, available BOOLEAN, protocols VARCHAR[], chattable BOOLEAN,
    capabilities_mask UINTEGER, created_at VARCHAR, updated_at VARCHAR, record VARCHAR, embedding FLOAT[]);
CREATE OR REPLACE TABLE broker_feedback (
    uaid VARCHAR, client VARCHAR, feedback_index UBIGINT, score UINTEGER, revoked BOOLEAN,
    created_at VARCHAR, record VARCHAR);
CREATE OR REPLACE TABLE broker_catalog (record VARCHAR);
CREATE OR REPLACE TABLE broker_meta (key VARCHAR, value VARCHAR);
";

/// Agent embeddings: one vector per agent (in the index's order) and the
/// model that made them; queries must be embedded by the same model.
#[derive(Clone, Debug, PartialEq)]
pub struct Embeddings {
    pub model: String,
    pub vectors: Vec<Vec<f32>>,
}

/// What the api reads of a snapshot's broker tables: all but the agents'
/// records, feedback and embeddings, which it maps from the build's
/// search index folder (`search::folder`).
pub struct Stored {
    pub catalog: Catalog,
    /// The `seq` of the last journal record the build applied.
    pub journal_seq: u64,
    /// How many agents the build holds.
    pub agents: usize,
    /// SHA-256 of the broker tables: equal fingerprints, equal contents.
    pub fingerprint: String,
}

/// Replaces the broker tables, in one transaction: begun, then the
/// agents appended batch by batch as a build streams them, then the rest.
pub struct Writer<'c> {
    tx: sql::Transaction<'c>,
    fingerprint: Sha256,
    /// Agents appended so far: the next one's position.
    position: usize,
}

impl<'c> Writer<'c> {
    pub fn begin(conn: &'c Connection) -> Result<Writer<'c>> {
        let tx = conn.unchecked_transaction()?;
        tx.execute_batch(SCHEMA)?;
        Ok(Writer { tx, fingerprint: Sha256::new(), position: 0 })
    }

    /// The next agents of the index, in order, with their records as
    /// serialised; `embeddings` holds a vector for every agent of the
    /// index, by position.
    pub fn append(&mut self, agents: &[Agent], records: &[String], embeddings: Option<&Embeddings>) -> Result<()> {
        let start = self.position;
        records.iter().for_each(|r| self.fingerprint.update(r.as_bytes()));
        let positions: Vec<u32> = (start..start + agents.len()).map(|i| i as u32).collect();
        let vectors = positions.iter().map(|&i| embeddings.map(|e| e.vectors[i as usize].as_slice()));
        columnar::append(&self.tx, "broker_agents", agent_rows(agents, records, &positions, vectors)?)?;
        self.position += agents.len();
        Ok(())
    }

    /// The feedback, the catalog and what the build records of its
    /// sources (`sources`: the fingerprint a later run compares its own
    /// with), and the commit.
    pub fn finish(mut self, rest: Rest) -> Result<()> {
        let Rest { feedback, catalog, embeddings, journal_seq, journal_digest, sources, digest, tally } = rest;
        let tx = &self.tx;
        for feedback in feedback.chunks(FEEDBACK_BATCH) {
            let records: Vec<String> = feedback.iter().map(|f| serde_json::to_string(f).expect("serialises")).collect();
            records.iter().for_each(|r| self.fingerprint.update(r.as_bytes()));
            let batch = columnar::batch(vec![
                ("uaid", columnar::strings(feedback.iter().map(|f| Some(&f.uaid)))),
                ("client", columnar::strings(feedback.iter().map(|f| Some(&f.client)))),
                ("feedback_index", columnar::u64s(feedback.iter().map(|f| Some(f.feedback_index)))),
                ("score", columnar::u32s(feedback.iter().map(|f| Some(u32::from(f.score))))),
                ("revoked", columnar::bools(feedback.iter().map(|f| Some(f.revoked)))),
                ("created_at", columnar::strings(feedback.iter().map(|f| Some(&f.created_at)))),
                ("record", columnar::strings(records.iter().map(Some))),
            ])?;
            columnar::append(tx, "broker_feedback", batch)?;
        }
        let catalog = serde_json::to_string(catalog).expect("catalog serialises");
        self.fingerprint.update(catalog.as_bytes());
        tx.execute("INSERT INTO broker_catalog VALUES (?)", [catalog])?;
        if let Some(e) = embeddings {
            self.fingerprint.update(e.model.as_bytes());
            e.vectors.iter().flatten().for_each(|x| self.fingerprint.update(x.to_le_bytes()));
            tx.execute("INSERT INTO broker_meta VALUES ('embedding_model', ?)", [&e.model])?;
        }
        self.fingerprint.update(journal_seq.to_le_bytes());
        tx.execute("INSERT INTO broker_meta VALUES ('journal_seq', ?)", [journal_seq.to_string()])?;
        tx.execute("INSERT INTO broker_meta VALUES ('sources', ?)", [sources])?;
        tx.execute("INSERT INTO broker_meta VALUES ('digest', ?)", [&digest.whole])?;
        tx.execute("INSERT INTO broker_meta VALUES ('sources_digest', ?)", [&digest.sources])?;
        tx.execute("INSERT INTO broker_meta VALUES ('journal_digest', ?)", [journal_digest])?;
        let tally = serde_json::to_string(tally).expect("the tally serialises");
        tx.execute("INSERT INTO broker_meta VALUES ('tally', ?)", [tally])?;
        let fingerprint = shared::http::hex(&self.fingerprint.finalize());
        tx.execute("INSERT INTO broker_meta VALUES ('fingerprint', ?)", [fingerprint])?;
        self.tx.commit().context("writing the broker tables")
    }
}

/// The rows of `broker_agents` of `agents` (their `records` as
/// serialised) at `positions`, with their embeddings.
fn agent_rows<'a>(
    agents: &[Agent],
    records: &[String],
    positions: &[u32],
    vectors: impl Iterator<Item = Option<&'a [f32]>>,
) -> Result<columnar::Batch> {
    columnar::batch(vec![
        ("position", columnar::u32s(positions.iter().map(|&p| Some(p)))),
        ("id", columnar::strings(agents.iter().map(|a| Some(&a.id)))),
        ("uaid", columnar::strings(agents.iter().map(|a| Some(&a.uaid)))),
        ("registry", columnar::strings(agents.iter().map(|a| Some(&a.registry)))),
        ("name", columnar::strings(agents.iter().map(|a| Some(&a.name)))),
        ("adapter", columnar::strings(agents.iter().map(|a| Some(&a.adapter)))),
        ("type", columnar::strings(agents.iter().map(|a| Some(&a.kind)))),
        ("verification_status", columnar::strings(agents.iter().map(|a| Some(&a.verification_status)))),
        ("trust_score", columnar::f64s(agents.iter().map(|a| Some(a.trust_score)))),
        ("available", columnar::bools(agents.iter().map(|a| Some(a.available)))),
        ("protocols", columnar::string_lists(agents.iter().map(|a| a.protocols.as_slice()))),
        ("chattable", columnar::bools(agents.iter().map(|a| Some(a.communication_supported)))),
        ("capabilities_mask", columnar::u32s(agents.iter().map(|a| Some(crate::render::mask(a))))),
        ("created_at", columnar::strings(agents.iter().map(|a| Some(&a.created_at)))),
        ("updated_at", columnar::strings(agents.iter().map(|a| Some(&a.updated_at)))),
        ("record", columnar::strings(records.iter().map(Some))),
        ("embedding", columnar::float_lists(vectors)),
    ])
}

/// Feedback entries written to the warehouse at a time. In batches, as the
/// agents are: the feedback of a million agents as one batch of columns
/// and records took about 700 MB at once, the generator's peak.
const FEEDBACK_BATCH: usize = 16_384;

/// What [`Writer::finish`] writes after the agents.
pub struct Rest<'a> {
    pub feedback: &'a [FeedbackEntry],
    pub catalog: &'a Catalog,
    pub embeddings: Option<&'a Embeddings>,
    pub journal_seq: u64,
    /// The journal's records applied, by their content
    /// ([`broker_model::journal::digest_through`]).
    pub journal_digest: &'a str,
    /// The fingerprint of the sources the build read
    /// (the scan's fingerprint).
    pub sources: &'a str,
    /// The sources by their bytes (the generator's `broker::scan::digest`), with the
    /// embedding model.
    pub digest: &'a crate::rows::Digest,
    /// What the catalog files count of the agents.
    pub tally: &'a crate::render::Tally,
}

/// Records what the pages say of the agents, once their files are made.
pub fn write_facts(conn: &Connection, facts: &crate::rows::Facts) -> Result<()> {
    conn.execute("DELETE FROM broker_meta WHERE key = 'facts'", [])?;
    let json = serde_json::to_string(facts).expect("facts serialise");
    conn.execute("INSERT INTO broker_meta VALUES ('facts', ?)", [json])?;
    Ok(())
}

/// The newest Last-Modified of every agent's JSON files and of every
/// agent's page (`broker::delta::newest`), recorded so that a layer over a
/// few changed agents need not read every feedback entry to know them.
pub fn write_newest(conn: &Connection, (json, pages): (Timestamp, Timestamp)) -> Result<()> {
    conn.execute("DELETE FROM broker_meta WHERE key = 'newest'", [])?;
    conn.execute("INSERT INTO broker_meta VALUES ('newest', ?)", [format!("{} {}", json.0, pages.0)])?;
    Ok(())
}

/// What [`write_newest`] recorded, if anything.
pub fn newest(conn: &Connection) -> Result<Option<(Timestamp, Timestamp)>> {
    let Some(text) = meta(conn, "newest")? else { return Ok(None) };
    let parsed = text.split_once(' ').and_then(|(json, pages)| Some((json.parse().ok()?, pages.parse().ok()?)));
    let (json, pages) = parsed.with_context(|| format!("broker_meta.newest: {text:?}"))?;
    Ok(Some((Timestamp(json), Timestamp(pages))))
}

/// What a warehouse or snapshot records of the sources its agents were
/// made from: what a later run compares its own with.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// What the pages say of the agents.
    pub facts: crate::rows::Facts,
    /// The sources by their bytes, with the embedding model.
    pub digest: crate::rows::Digest,
    /// The journal's records applied, by their content (`None`: written
    /// before it was kept).
    pub journal_digest: Option<String>,
}

/// What a warehouse or snapshot records of its agents' sources (`None`: no
/// agents, or written before these were kept).
pub fn recorded(conn: &Connection) -> Result<Option<Recorded>> {
    let (Some(facts), Some(whole)) = (meta(conn, "facts")?, meta(conn, "digest")?) else { return Ok(None) };
    Ok(Some(Recorded {
        facts: serde_json::from_str(&facts).context("broker_meta.facts")?,
        digest: crate::rows::Digest { sources: meta(conn, "sources_digest")?.unwrap_or_default(), whole },
        journal_digest: meta(conn, "journal_digest")?,
    }))
}

/// The tally of a warehouse's or snapshot's agents (`None`: written
/// before it was kept).
pub fn tally(conn: &Connection) -> Result<Option<crate::render::Tally>> {
    let Some(text) = meta(conn, "tally")? else { return Ok(None) };
    Ok(Some(serde_json::from_str(&text).context("broker_meta.tally")?))
}

/// The directory's rows of every agent stored, in the directory's order:
/// read without a record.
pub fn rows(conn: &Connection) -> Result<Vec<crate::rows::Row>> {
    use rayon::prelude::*;
    let mut statement =
        conn.prepare("SELECT name, uaid, registry, protocols, trust_score, available, updated_at FROM broker_agents")?;
    let batches: Vec<_> = statement.chunks([])?.collect();
    // Each batch made into rows on a core of its own (its own shared
    // values: a few registries and protocol lists per batch).
    let made: Vec<Vec<crate::rows::Row>> = batches
        .par_iter()
        .map(|batch| {
            let text = |i| batch.strings(i);
            let (names, uaids, registries, updated) = (text(0)?, text(1)?, text(2)?, text(6)?);
            let protocols = batch.string_lists(3)?;
            let (trust, available) = (batch.f64s(4)?, batch.bools(5)?);
            let mut shared = crate::rows::Shared::default();
            let mut rows = Vec::with_capacity(batch.len());
            for (i, protocols) in protocols.into_iter().enumerate() {
                let parts = crate::rows::RowParts {
                    name: names.value(i),
                    uaid: uaids.value(i),
                    registry: registries.value(i),
                    protocols: &protocols,
                    trust_score: trust.value(i),
                    available: available.value(i),
                    updated_at: updated.value(i),
                };
                rows.push(shared.row_of(parts));
            }
            Ok(rows)
        })
        .collect::<Result<_>>()?;
    let mut rows: Vec<crate::rows::Row> = Vec::with_capacity(made.iter().map(Vec::len).sum());
    made.into_iter().for_each(|mut r| rows.append(&mut r));
    crate::rows::Row::sort(&mut rows);
    Ok(rows)
}

/// The greatest `updatedAt` text of every agent stored, and the latest
/// of their times (what [`crate::render::Tally::dated`] takes): read
/// from that column alone.
pub fn dates(conn: &Connection) -> Result<(Option<String>, Option<Timestamp>)> {
    let mut statement = conn.prepare("SELECT updated_at FROM broker_agents")?;
    let (mut text, mut newest): (Option<String>, Option<Timestamp>) = (None, None);
    for chunk in statement.chunks([])? {
        for value in chunk.strings(0)?.iter().flatten() {
            if text.as_deref().is_none_or(|t| t < value) {
                text = Some(value.to_string());
            }
            newest = newest.max(Some(crate::render::time(value)));
        }
    }
    Ok((text, newest))
}

/// The stored agents outside `uaids` holding one of `ids`: (id, UAID).
pub fn id_clashes(conn: &Connection, uaids: &[&str], ids: &[&str]) -> Result<Vec<(String, String)>> {
    keys_table(conn, "changed_uaids", uaids.iter().copied())?;
    keys_table(conn, "changed_ids", ids.iter().copied())?;
    let mut statement = conn.prepare(
        "SELECT id, uaid FROM broker_agents WHERE id IN (SELECT key FROM changed_ids) \
         AND uaid NOT IN (SELECT key FROM changed_uaids) ORDER BY id, uaid",
    )?;
    let clashes = statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<sql::Result<_>>()?;
    conn.execute_batch("DROP TABLE changed_uaids; DROP TABLE changed_ids")?;
    Ok(clashes)
}

/// The records of the stored agents with these UAIDs, with their
/// positions.
pub fn records_of(conn: &Connection, uaids: &[&str]) -> Result<Vec<(u32, Agent)>> {
    use rayon::prelude::*;
    keys_table(conn, "wanted_uaids", uaids.iter().copied())?;
    let mut statement = conn.prepare(
        "SELECT position, record FROM broker_agents WHERE uaid IN (SELECT key FROM wanted_uaids) ORDER BY position",
    )?;
    let mut out = Vec::new();
    for chunk in statement.chunks([])? {
        let (positions, records) = (chunk.u32s(0)?, chunk.strings(1)?);
        let agents: Vec<Agent> = (0..chunk.len())
            .into_par_iter()
            .map(|i| serde_json::from_str(records.value(i)).context("broker_agents.record"))
            .collect::<Result<_>>()?;
        out.extend(positions.values().iter().copied().zip(agents));
    }
    conn.execute_batch("DROP TABLE wanted_uaids")?;
    Ok(out)
}

/// The fingerprint of the sources a snapshot's build read (`None`: no
/// broker tables, or written before it was recorded).
pub fn sources_fingerprint(conn: &Connection) -> Result<Option<String>> {
    meta(conn, "sources")
}

fn meta(conn: &Connection, key: &str) -> Result<Option<String>> {
    if !duckdb_files::database::has_table(conn, "broker_meta")? {
        return Ok(None);
    }
    match conn.query_row("SELECT value FROM broker_meta WHERE key = ?", [key], |r| r.get(0)) {
        Ok(value) => Ok(Some(value)),
        Err(sql::Error::NoRows) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A temporary table `name (key VARCHAR)` of `keys`, for a lookup to
/// join (so `conn` is the warehouse, writable, not a snapshot).
fn keys_table<'a>(conn: &Connection, name: &str, keys: impl IntoIterator<Item = &'a str>) -> Result<()> {
    conn.execute_batch(&format!("CREATE OR REPLACE TEMP TABLE {name} (key VARCHAR)"))?;
    let keys = columnar::batch(vec![("key", columnar::strings(keys.into_iter().map(Some)))])?;
    columnar::append(conn, name, keys)
}

/// The feedback entries stored about these UAIDs, in the order stored.
pub fn feedback_about(conn: &Connection, uaids: &[&str]) -> Result<Vec<FeedbackEntry>> {
    keys_table(conn, "wanted_feedback", uaids.iter().copied())?;
    let entries = feedback_where(conn, "uaid IN (SELECT key FROM wanted_feedback)")?;
    conn.execute_batch("DROP TABLE wanted_feedback")?;
    Ok(entries)
}

/// The feedback entries stored whose rows `filter` (SQL) keeps.
fn feedback_where(conn: &Connection, filter: &str) -> Result<Vec<FeedbackEntry>> {
    let mut statement = conn.prepare(&format!("SELECT record FROM broker_feedback WHERE {filter}"))?;
    let records: Vec<String> = statement.query_map([], |r| r.get(0))?.collect::<sql::Result<_>>()?;
    records.iter().map(|r| serde_json::from_str(r).context("broker_feedback.record")).collect()
}

/// Every feedback entry stored.
pub fn all_feedback(conn: &Connection) -> Result<Vec<FeedbackEntry>> {
    feedback_where(conn, "true")
}

/// The `createdAt` of every stored agent of `registry` that no feedback
/// entry is about.
pub fn created_without_feedback(conn: &Connection, registry: &str) -> Result<Vec<String>> {
    let mut statement = conn.prepare(
        "SELECT created_at FROM broker_agents WHERE registry = ? AND uaid NOT IN (SELECT uaid FROM broker_feedback)",
    )?;
    let created = statement.query_map([registry], |r| r.get(0))?.collect::<sql::Result<_>>()?;
    Ok(created)
}

/// The catalog stored with the agents.
pub fn catalog(conn: &Connection) -> Result<Catalog> {
    let catalog: String = conn.query_row("SELECT record FROM broker_catalog", [], |r| r.get(0))?;
    serde_json::from_str(&catalog).context("broker_catalog")
}

/// The position after every stored agent's: where agents registered
/// since go, in order.
pub fn next_position(conn: &Connection) -> Result<u32> {
    let last: Option<u32> = conn.query_row("SELECT max(position) FROM broker_agents", [], |r| r.get(0))?;
    Ok(last.map_or(0, |p| p + 1))
}

/// Agents changed in place (a layer over changed agents): what [`update`]
/// writes.
pub struct Update<'a> {
    /// The UAIDs whose rows go: changed or deleted agents.
    pub replaced: &'a [&'a str],
    /// The rows that come: the changed agents as they are now, with their
    /// records as serialised and their positions (an updated agent keeps
    /// its place).
    pub agents: &'a [Agent],
    pub records: &'a [String],
    pub positions: &'a [u32],
    /// The UAIDs whose feedback goes with them (deleted agents).
    pub deleted: &'a [&'a str],
}

/// Writes `update` in one transaction, with the `broker_meta` entries
/// `meta` gives once the rows are in (read through the connection it is
/// given, inside the transaction): each key's value replaced, or dropped
/// when `None`. Nothing changes when anything fails.
pub fn update(
    conn: &Connection,
    update: &Update,
    meta: impl FnOnce(&Connection) -> Result<Vec<(&'static str, Option<String>)>>,
) -> Result<()> {
    let tx = conn.unchecked_transaction()?;
    keys_table(&tx, "replaced_uaids", update.replaced.iter().copied())?;
    tx.execute_batch(
        "DELETE FROM broker_agents WHERE uaid IN (SELECT key FROM replaced_uaids); DROP TABLE replaced_uaids",
    )?;
    if !update.agents.is_empty() {
        let rows = agent_rows(update.agents, update.records, update.positions, update.agents.iter().map(|_| None))?;
        columnar::append(&tx, "broker_agents", rows)?;
    }
    keys_table(&tx, "deleted_uaids", update.deleted.iter().copied())?;
    tx.execute_batch(
        "DELETE FROM broker_feedback WHERE uaid IN (SELECT key FROM deleted_uaids); DROP TABLE deleted_uaids",
    )?;
    for (key, value) in meta(&tx)? {
        tx.execute("DELETE FROM broker_meta WHERE key = ?", [key])?;
        if let Some(value) = value {
            tx.execute("INSERT INTO broker_meta VALUES (?, ?)", [key, &value])?;
        }
    }
    tx.commit().context("writing the changed agents")
}

/// The `broker_meta` entry a layer over changed agents writes: the search
/// index folder it keeps.
pub fn search_entry(search: &SearchIndex) -> (&'static str, Option<String>) {
    ("search", Some(serde_json::to_string(search).expect("serialises")))
}

/// The broker tables' fingerprint (SHA-256 of their contents; see
/// [`Stored::fingerprint`]).
pub fn tables_fingerprint(conn: &Connection) -> Result<Option<String>> {
    meta(conn, "fingerprint")
}

/// What the search index folder of a build holds when it is not made from
/// the build's own broker tables: a layer over changed agents keeps its
/// base's folder, and the api's live overlay holds every change since
/// (registered, updated and deleted agents are the api's own, in its
/// store, after the folder's journal point).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SearchIndex {
    /// The journal point of the agents the folder holds.
    pub journal_seq: u64,
    pub agents: usize,
    /// The fingerprint of the broker tables the folder was made from.
    pub fingerprint: String,
}

/// The search index folder an open snapshot's build searches: the one a
/// layer over changed agents kept (`broker_meta`'s `search`), else the one
/// made from its own broker tables; `None` when the build has none.
pub fn search_index(conn: &Connection) -> Result<Option<SearchIndex>> {
    if let Some(text) = meta(conn, "search")? {
        return Ok(Some(serde_json::from_str(&text).context("broker_meta.search")?));
    }
    let Some(fingerprint) = meta(conn, "fingerprint")? else { return Ok(None) };
    let agents: u64 = conn.query_row("SELECT count(*) FROM broker_agents", [], |r| r.get(0))?;
    let journal_seq = match meta(conn, "journal_seq")? {
        Some(text) => text.parse().context("broker_meta.journal_seq")?,
        None => 0,
    };
    Ok(Some(SearchIndex { journal_seq, agents: agents as usize, fingerprint }))
}

/// The fingerprint of the agents an open snapshot's build searches (see
/// [`search_index`]), without counting them: the api keeps its index when
/// a new build's is the same.
pub fn fingerprint(conn: &Connection) -> Result<Option<String>> {
    match meta(conn, "search")? {
        Some(_) => Ok(search_index(conn)?.map(|s| s.fingerprint)),
        None => meta(conn, "fingerprint"),
    }
}

/// The broker tables of an open snapshot but the agents' records,
/// feedback and embeddings, as the build's search index folder holds them
/// ([`search_index`]); `None` when the build has none.
pub fn load(conn: &Connection) -> Result<Option<Stored>> {
    let Some(SearchIndex { journal_seq, agents, fingerprint }) = search_index(conn)? else { return Ok(None) };
    Ok(Some(Stored { catalog: catalog(conn)?, journal_seq, agents, fingerprint }))
}

const CACHE_SCHEMA: &str =
    "CREATE TABLE IF NOT EXISTS broker_embedding_cache (model VARCHAR, key VARCHAR, vector FLOAT[]);";

/// Embeddings computed by earlier runs for `model`, by `embeddings::key`.
pub fn cached_embeddings(conn: &Connection, model: &str) -> Result<HashMap<String, Vec<f32>>> {
    conn.execute_batch(CACHE_SCHEMA)?;
    let mut out = HashMap::new();
    let mut stmt = conn.prepare("SELECT key, vector FROM broker_embedding_cache WHERE model = ?")?;
    for chunk in stmt.chunks([model])? {
        let keys = chunk.strings(0)?;
        let vectors = chunk.float_lists(1).context("broker_embedding_cache.vector")?;
        for (i, vector) in vectors.into_iter().enumerate() {
            out.insert(keys.value(i).to_string(), vector.context("a cached embedding is NULL")?);
        }
    }
    Ok(out)
}

/// Adds newly computed embeddings to the cache.
pub fn cache_embeddings(conn: &Connection, model: &str, entries: &[(String, Vec<f32>)]) -> Result<()> {
    conn.execute_batch(CACHE_SCHEMA)?;
    if entries.is_empty() {
        return Ok(());
    }
    let vectors = columnar::float_lists(entries.iter().map(|(_, v)| Some(v.as_slice())));
    let batch = columnar::batch(vec![
        ("model", columnar::strings(entries.iter().map(|_| Some(model)))),
        ("key", columnar::strings(entries.iter().map(|(k, _)| Some(k)))),
        ("vector", vectors),
    ])?;
    columnar::append(conn, "broker_embedding_cache", batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::Tally;
    use crate::rows::{Row, Shared};

    /// What a layer reads back from the warehouse (the directory's rows,
    /// the tally) is what a scan of the same agents gathers; a delta's
    /// checks find what is stored.
    #[test]
    fn the_warehouse_gives_back_what_a_scan_gathers() {
        let catalog = broker_model::generate::checked_in_catalog();
        let agents = broker_model::generate::agents(1500, 5);
        let (mut tally, mut shared) = (Tally::new(&catalog), Shared::default());
        let mut rows: Vec<Row> = agents.iter().map(|a| shared.row(a)).collect();
        Row::sort(&mut rows);
        agents.iter().for_each(|a| tally.add(&catalog, a));

        let conn = Connection::open_in_memory().unwrap();
        let mut writer = Writer::begin(&conn).unwrap();
        for batch in agents.chunks(400) {
            let records: Vec<String> = batch.iter().map(|a| serde_json::to_string(a).unwrap()).collect();
            writer.append(batch, &records, None).unwrap();
        }
        let rest = Rest {
            feedback: &[],
            catalog: &catalog,
            embeddings: None,
            journal_seq: 0,
            journal_digest: "j",
            sources: "s",
            digest: &crate::rows::Digest { sources: "s".into(), whole: "d".into() },
            tally: &tally,
        };
        writer.finish(rest).unwrap();

        let stored_rows = super::rows(&conn).unwrap();
        assert_eq!(stored_rows, rows);
        let mut dated = Tally::new(&catalog);
        agents.iter().for_each(|a| dated.add(&catalog, a));
        let (last_update, newest) = super::dates(&conn).unwrap();
        dated.dated(last_update, newest);
        assert_eq!(dated, tally);
        assert_eq!(super::tally(&conn).unwrap(), Some(tally));
        // What a delta is checked against: the changed UAIDs stored (their
        // records), and the ids other agents hold.
        let changed: Vec<&str> =
            agents.iter().step_by(7).map(|a| a.uaid.as_str()).chain(["uaid:aid:unknown"]).collect();
        let ids = [agents[0].id.as_str(), agents[1].id.as_str(), "no-such-id"];
        // Agent 0 is among the changed, so its id clashes with nobody else.
        let clashes = id_clashes(&conn, &changed, &ids).unwrap();
        assert_eq!(clashes, vec![(agents[1].id.clone(), agents[1].uaid.to_string())]);
        let read = records_of(&conn, &changed).unwrap();
        assert_eq!(read.len(), changed.len() - 1);
        assert!(read.iter().all(|(at, agent)| agents[*at as usize] == *agent));
    }
}
