//! The broker's tables in the warehouse, and so in every build's snapshot:
//! the agents (key columns for analysts plus the whole record as JSON, and
//! the embedding when the deployment computes them), the feedback and the
//! catalog. Replaced whole by every build that publishes; the api loads its
//! search index from a build's snapshot once ([`load`]).

use std::sync::Arc;

use anyhow::{Context, Result};
use duckdb::arrow::array::{Float64Array, StringArray};
use duckdb::arrow::datatypes::DataType;
use duckdb::Connection;
use sha2::{Digest, Sha256};

use super::catalog::{Catalog, FeedbackEntry};
use super::Agent;

use crate::columnar;

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
/// search index folder (`broker::search_folder`).
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
    tx: duckdb::Transaction<'c>,
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
        let positions = start..start + agents.len();
        let vectors = columnar::float_lists(positions.clone().map(|i| embeddings.map(|e| e.vectors[i].as_slice())));
        let batch = columnar::batch(vec![
            ("position", columnar::u32s(positions.map(|i| Some(i as u32)))),
            ("id", columnar::strings(agents.iter().map(|a| Some(&a.id)))),
            ("uaid", columnar::strings(agents.iter().map(|a| Some(&a.uaid)))),
            ("registry", columnar::strings(agents.iter().map(|a| Some(&a.registry)))),
            ("name", columnar::strings(agents.iter().map(|a| Some(&a.name)))),
            ("adapter", columnar::strings(agents.iter().map(|a| Some(&a.adapter)))),
            ("type", columnar::strings(agents.iter().map(|a| Some(&a.kind)))),
            ("verification_status", columnar::strings(agents.iter().map(|a| Some(&a.verification_status)))),
            ("trust_score", Arc::new(agents.iter().map(|a| Some(a.trust_score)).collect::<Float64Array>())),
            ("available", columnar::bools(agents.iter().map(|a| Some(a.available)))),
            ("protocols", columnar::string_lists(agents.iter().map(|a| a.protocols.as_slice()))),
            ("chattable", columnar::bools(agents.iter().map(|a| Some(a.communication_supported)))),
            ("capabilities_mask", columnar::u32s(agents.iter().map(|a| Some(super::render::mask(a))))),
            ("created_at", columnar::strings(agents.iter().map(|a| Some(&a.created_at)))),
            ("updated_at", columnar::strings(agents.iter().map(|a| Some(&a.updated_at)))),
            ("record", columnar::strings(records.iter().map(Some))),
            ("embedding", vectors),
        ])?;
        columnar::append(&self.tx, "broker_agents", batch)?;
        self.position += agents.len();
        Ok(())
    }

    /// The feedback, the catalog and what the build records of its
    /// sources (`sources`: the fingerprint a later run compares its own
    /// with), and the commit.
    pub fn finish(mut self, rest: Rest) -> Result<()> {
        let Rest { feedback, catalog, embeddings, journal_seq, sources, digest, tally } = rest;
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
        tx.execute("INSERT INTO broker_meta VALUES ('digest', ?)", [digest])?;
        let tally = serde_json::to_string(tally).expect("the tally serialises");
        tx.execute("INSERT INTO broker_meta VALUES ('tally', ?)", [tally])?;
        let fingerprint = crate::http::hex(&self.fingerprint.finalize());
        tx.execute("INSERT INTO broker_meta VALUES ('fingerprint', ?)", [fingerprint])?;
        self.tx.commit().context("writing the broker tables")
    }
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
    /// The fingerprint of the sources the build read
    /// ([`super::scan::Summary::fingerprint`]).
    pub sources: &'a str,
    /// The sources by their bytes ([`super::scan::digest`]).
    pub digest: &'a str,
    /// What the catalog files count of the agents.
    pub tally: &'a super::render::Tally,
}

/// Records what the pages say of the agents, once their files are made.
pub fn write_facts(conn: &Connection, facts: &super::scan::Facts) -> Result<()> {
    conn.execute("DELETE FROM broker_meta WHERE key = 'facts'", [])?;
    let json = serde_json::to_string(facts).expect("facts serialise");
    conn.execute("INSERT INTO broker_meta VALUES ('facts', ?)", [json])?;
    Ok(())
}

/// What the pages say of the agents of a warehouse or snapshot, and the
/// digest of the sources they were made from (`None`: no agents, or
/// written before these were kept).
pub fn facts(conn: &Connection) -> Result<Option<(super::scan::Facts, String)>> {
    let (Some(facts), Some(digest)) = (meta(conn, "facts")?, meta(conn, "digest")?) else { return Ok(None) };
    Ok(Some((serde_json::from_str(&facts).context("broker_meta.facts")?, digest)))
}

/// The tally of a warehouse's or snapshot's agents (`None`: written
/// before it was kept).
pub fn tally(conn: &Connection) -> Result<Option<super::render::Tally>> {
    let Some(text) = meta(conn, "tally")? else { return Ok(None) };
    Ok(Some(serde_json::from_str(&text).context("broker_meta.tally")?))
}

/// The directory's rows of every agent stored, in the directory's order,
/// and the greatest `updatedAt` text (with the rows' latest time, what
/// [`super::render::Tally::dated`] takes): read without a record.
pub fn rows(conn: &Connection) -> Result<(Vec<super::scan::Row>, Option<String>)> {
    use duckdb::arrow::array::BooleanArray;
    let mut statement =
        conn.prepare("SELECT name, uaid, registry, protocols, trust_score, available, updated_at FROM broker_agents")?;
    let mut shared = super::scan::Shared::default();
    let (mut rows, mut last_update) = (Vec::new(), None::<String>);
    for batch in statement.query_arrow([])? {
        let text = |i| columnar::column::<StringArray>(&batch, i, DataType::Utf8);
        let (names, uaids, registries, updated) = (text(0)?, text(1)?, text(2)?, text(6)?);
        let protocols = columnar::string_lists_of(&batch, 3)?;
        let trust: Float64Array = columnar::column(&batch, 4, DataType::Float64)?;
        let available: BooleanArray = columnar::column(&batch, 5, DataType::Boolean)?;
        for (i, protocols) in protocols.into_iter().enumerate() {
            let parts = super::scan::RowParts {
                name: names.value(i),
                uaid: uaids.value(i),
                registry: registries.value(i),
                protocols: &protocols,
                trust_score: trust.value(i),
                available: available.value(i),
                updated_at: updated.value(i),
            };
            rows.push(shared.row_of(parts));
            if last_update.as_deref().is_none_or(|l| l < updated.value(i)) {
                last_update = Some(updated.value(i).to_string());
            }
        }
    }
    super::scan::Row::sort(&mut rows);
    Ok((rows, last_update))
}

/// The similar agents of every agent stored, ranked as a build ranks
/// them. Only the best of each capability set can be on a list, so the
/// sets are ranked from three columns and only their best agents' records
/// are read (through a temporary table of their ids: `conn` is the
/// warehouse, writable, not a snapshot opened read-only).
pub fn similar(conn: &Connection) -> Result<super::render::SimilarIndex> {
    use duckdb::arrow::array::UInt32Array;
    use rayon::prelude::*;
    let mut best: std::collections::HashMap<u32, Vec<(f64, String)>> = std::collections::HashMap::new();
    let mut statement = conn.prepare("SELECT capabilities_mask, trust_score, id FROM broker_agents")?;
    for batch in statement.query_arrow([])? {
        let masks: UInt32Array = columnar::column(&batch, 0, DataType::UInt32)?;
        let trust: Float64Array = columnar::column(&batch, 1, DataType::Float64)?;
        let ids: StringArray = columnar::column(&batch, 2, DataType::Utf8)?;
        for i in 0..batch.num_rows() {
            let (group, key) = (best.entry(masks.value(i)).or_default(), (trust.value(i), ids.value(i)));
            super::render::offer(group, key, |(t, id)| (*t, id.as_str()), || (key.0, key.1.to_string()));
        }
    }
    let ids: Vec<&String> = best.values().flatten().map(|(_, id)| id).collect();
    conn.execute_batch("CREATE OR REPLACE TEMP TABLE similar_ids (id VARCHAR)")?;
    columnar::append(
        conn,
        "similar_ids",
        columnar::batch(vec![("id", columnar::strings(ids.into_iter().map(Some)))])?,
    )?;
    let mut similar = super::render::Similar::default();
    let mut statement = conn.prepare("SELECT record FROM broker_agents JOIN similar_ids USING (id)")?;
    for batch in statement.query_arrow([])? {
        let records: StringArray = columnar::column(&batch, 0, DataType::Utf8)?;
        let agents: Vec<Agent> = (0..batch.num_rows())
            .into_par_iter()
            .map(|i| serde_json::from_str(records.value(i)).context("broker_agents.record"))
            .collect::<Result<_>>()?;
        agents.iter().for_each(|a| similar.add(a));
    }
    conn.execute_batch("DROP TABLE similar_ids")?;
    Ok(similar.finish())
}

/// The fingerprint of the sources a snapshot's build read (`None`: no
/// broker tables, or written before it was recorded).
pub fn sources_fingerprint(conn: &Connection) -> Result<Option<String>> {
    meta(conn, "sources")
}

fn meta(conn: &Connection, key: &str) -> Result<Option<String>> {
    if !crate::database::has_table(conn, "broker_meta")? {
        return Ok(None);
    }
    match conn.query_row("SELECT value FROM broker_meta WHERE key = ?", [key], |r| r.get(0)) {
        Ok(value) => Ok(Some(value)),
        Err(duckdb::Error::QueryReturnedNoRows) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The fingerprint of an open snapshot's broker tables, without loading
/// them (the api keeps its index when a new build's is the same).
pub fn fingerprint(conn: &Connection) -> Result<Option<String>> {
    meta(conn, "fingerprint")
}

/// The broker tables of an open snapshot but the agents' records,
/// feedback and embeddings; `None` when the build has none.
pub fn load(conn: &Connection) -> Result<Option<Stored>> {
    let Some(fingerprint) = meta(conn, "fingerprint")? else { return Ok(None) };
    let catalog: String = conn.query_row("SELECT record FROM broker_catalog", [], |r| r.get(0))?;
    let catalog: Catalog = serde_json::from_str(&catalog).context("broker_catalog")?;
    let agents: u64 = conn.query_row("SELECT count(*) FROM broker_agents", [], |r| r.get(0))?;
    let journal_seq = match meta(conn, "journal_seq")? {
        Some(text) => text.parse().context("broker_meta.journal_seq")?,
        None => 0,
    };
    Ok(Some(Stored { catalog, journal_seq, agents: agents as usize, fingerprint }))
}

const CACHE_SCHEMA: &str =
    "CREATE TABLE IF NOT EXISTS broker_embedding_cache (model VARCHAR, key VARCHAR, vector FLOAT[]);";

/// Embeddings computed by earlier runs for `model`, by [`super::embed::key`].
pub fn cached_embeddings(conn: &Connection, model: &str) -> Result<std::collections::HashMap<String, Vec<f32>>> {
    conn.execute_batch(CACHE_SCHEMA)?;
    let mut out = std::collections::HashMap::new();
    let mut stmt = conn.prepare("SELECT key, vector FROM broker_embedding_cache WHERE model = ?")?;
    for batch in stmt.query_arrow([model])? {
        let keys: StringArray = columnar::column(&batch, 0, DataType::Utf8)?;
        let vectors = columnar::float_lists_of(&batch, 1).context("broker_embedding_cache.vector")?;
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
    use crate::broker::render::{Similar, Tally};
    use crate::broker::scan::{Row, Shared};

    /// What a layer reads back from the warehouse (the directory's rows,
    /// the similar agents, the tally) is what a scan of the same agents
    /// gathers.
    #[test]
    fn the_warehouse_gives_back_what_a_scan_gathers() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/broker");
        let catalog = crate::broker::load(&dir).unwrap().catalog;
        let agents = crate::broker::generate::agents(1500, 5);
        let (mut tally, mut similar, mut shared) = (Tally::new(&catalog), Similar::default(), Shared::default());
        let mut rows: Vec<Row> = agents.iter().map(|a| shared.row(a)).collect();
        Row::sort(&mut rows);
        agents.iter().for_each(|a| (tally.add(&catalog, a), similar.add(a)).1);

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
            sources: "s",
            digest: "d",
            tally: &tally,
        };
        writer.finish(rest).unwrap();

        let (stored_rows, last_update) = super::rows(&conn).unwrap();
        assert_eq!(stored_rows, rows);
        let mut dated = Tally::new(&catalog);
        agents.iter().for_each(|a| dated.add(&catalog, a));
        dated.dated(last_update, stored_rows.iter().map(|r| r.updated).max());
        assert_eq!(dated, tally);
        assert_eq!(super::tally(&conn).unwrap(), Some(tally));
        assert_eq!(super::similar(&conn).unwrap(), similar.finish());
    }
}
