//! The generator's DuckDB warehouse (`data/warehouse.duckdb`).
//!
//! It keeps every message fetched, so a build never refetches history, and
//! a cursor per topic (the last sequence number stored), so the next run
//! asks the source only for what is new. A topic's messages and its cursor
//! are written in one transaction: a run killed mid-fetch leaves the two
//! consistent. The derived tables of the last build live here too
//! ([`crate::snapshot`]), and each build's snapshot is a copy of this file.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use duckdb::arrow::array::{Array, BinaryArray, StringArray, UInt32Array, UInt64Array};
use duckdb::arrow::datatypes::DataType;
use duckdb::{params, Connection};

use crate::columnar;
use crate::database::{self, Access};

use crate::entity::EntityId;
use crate::hcs20::{Chunk, Message};
use crate::timestamp::Timestamp;

pub struct Warehouse {
    conn: Connection,
    path: std::path::PathBuf,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS messages (
    topic        VARCHAR NOT NULL,
    sequence     UBIGINT NOT NULL,
    consensus_ns UBIGINT NOT NULL,
    payer        VARCHAR NOT NULL,
    body         BLOB NOT NULL,
    chunk_group  VARCHAR,
    chunk_number UINTEGER,
    chunk_total  UINTEGER
);
CREATE TABLE IF NOT EXISTS cursors (
    topic         VARCHAR PRIMARY KEY,
    last_sequence UBIGINT NOT NULL
);
";

impl Warehouse {
    /// Opens (creating) the warehouse, DuckDB's memory held to
    /// `memory_limit` (DuckDB's own form, `1GB`): past it, DuckDB writes
    /// to disk what it can, or fails the run, rather than grow with the
    /// sources.
    pub fn open(path: &Path, memory_limit: &str) -> Result<Warehouse> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        const FIX: &str = "the warehouse cannot be opened: rebuild it from the sources with \
                           `generator build --full` (which sets the unreadable file aside), or delete it";
        let conn = database::open(path, Access::ReadWrite).map_err(|error| database::advise(error, FIX))?;
        conn.execute_batch(&format!("SET memory_limit = '{}'", memory_limit.replace('\'', "")))
            .with_context(|| format!("DuckDB's memory limit {memory_limit:?}"))?;
        conn.execute_batch(SCHEMA).context("creating the warehouse schema")?;
        Ok(Warehouse { conn, path: path.to_path_buf() })
    }

    /// A second connection to the same warehouse, for storing on another
    /// thread (DuckDB appends to one table while others are read).
    pub fn writer(&self) -> Result<Warehouse> {
        Ok(Warehouse { conn: self.conn.try_clone()?, path: self.path.clone() })
    }

    pub fn cursors(&self) -> Result<BTreeMap<EntityId, u64>> {
        let mut stmt = self.conn.prepare("SELECT topic, last_sequence FROM cursors")?;
        let rows = stmt.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, u64>(1)?)))?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (topic, last) = row?;
            out.insert(topic.parse().with_context(|| format!("cursor of {topic}"))?, last);
        }
        Ok(out)
    }

    /// Stores the messages fetched for one topic and moves its cursor to
    /// the last of them, atomically.
    pub fn append(&mut self, topic: EntityId, messages: &[Message]) -> Result<()> {
        let Some(last) = messages.iter().map(|m| m.sequence).max() else { return Ok(()) };
        let tx = self.conn.transaction()?;
        for part in messages.chunks(100_000) {
            let topic_text = topic.to_string();
            let batch = columnar::batch(vec![
                ("topic", columnar::strings(part.iter().map(|_| Some(topic_text.as_str())))),
                ("sequence", columnar::u64s(part.iter().map(|m| Some(m.sequence)))),
                ("consensus_ns", columnar::u64s(part.iter().map(|m| Some(m.consensus.0)))),
                ("payer", columnar::strings(part.iter().map(|m| Some(m.payer.text())))),
                ("body", columnar::binaries(part.iter().map(|m| Some(m.body.as_slice())))),
                ("chunk_group", columnar::strings(part.iter().map(|m| m.chunk.as_ref().map(|c| c.group.as_str())))),
                ("chunk_number", columnar::u32s(part.iter().map(|m| m.chunk.as_ref().map(|c| c.number)))),
                ("chunk_total", columnar::u32s(part.iter().map(|m| m.chunk.as_ref().map(|c| c.total)))),
            ])?;
            columnar::append(&tx, "messages", batch)?;
        }
        tx.execute(
            "INSERT INTO cursors VALUES (?, ?) ON CONFLICT (topic) DO UPDATE SET last_sequence = excluded.last_sequence",
            params![topic.to_string(), last],
        )?;
        tx.commit().with_context(|| format!("storing messages of {topic}"))?;
        Ok(())
    }

    /// Every stored message.
    pub fn messages(&self) -> Result<Vec<Message>> {
        self.select("")
    }

    /// Messages after each topic's given sequence number (every message of
    /// a topic not listed).
    pub fn messages_after(&self, applied: &BTreeMap<EntityId, u64>) -> Result<Vec<Message>> {
        let mut conditions: Vec<String> =
            applied.iter().map(|(topic, last)| format!("(topic = '{topic}' AND sequence > {last})")).collect();
        let listed: Vec<String> = applied.keys().map(|t| format!("'{t}'")).collect();
        conditions.push(if listed.is_empty() {
            "true".into()
        } else {
            format!("topic NOT IN ({})", listed.join(", "))
        });
        self.select(&format!("WHERE {}", conditions.join(" OR ")))
    }

    /// The stored messages of one topic.
    pub fn messages_of(&self, topic: EntityId) -> Result<Vec<Message>> {
        self.select(&format!("WHERE topic = '{topic}'"))
    }

    fn select(&self, filter: &str) -> Result<Vec<Message>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT topic, sequence, consensus_ns, payer, body, chunk_group, chunk_number, chunk_total FROM messages {filter}"
        ))?;
        let mut out = Vec::new();
        for batch in stmt.query_arrow([])? {
            let topics: StringArray = columnar::column(&batch, 0, DataType::Utf8)?;
            let sequences: UInt64Array = columnar::column(&batch, 1, DataType::UInt64)?;
            let consensus: UInt64Array = columnar::column(&batch, 2, DataType::UInt64)?;
            let payers: StringArray = columnar::column(&batch, 3, DataType::Utf8)?;
            let bodies: BinaryArray = columnar::column(&batch, 4, DataType::Binary)?;
            let groups: StringArray = columnar::column(&batch, 5, DataType::Utf8)?;
            let numbers: UInt32Array = columnar::column(&batch, 6, DataType::UInt32)?;
            let totals: UInt32Array = columnar::column(&batch, 7, DataType::UInt32)?;
            out.reserve(batch.num_rows());
            // A batch is mostly one topic: parse its id once per run of it.
            let mut topic_cache: Option<(String, EntityId)> = None;
            for i in 0..batch.num_rows() {
                let topic = match &topic_cache {
                    Some((text, id)) if text == topics.value(i) => *id,
                    _ => {
                        let id: EntityId = topics.value(i).parse()?;
                        topic_cache = Some((topics.value(i).to_string(), id));
                        id
                    }
                };
                out.push(Message {
                    topic,
                    sequence: sequences.value(i),
                    consensus: Timestamp(consensus.value(i)),
                    payer: payers.value(i).parse()?,
                    body: bodies.value(i).to_vec(),
                    chunk: (!groups.is_null(i)).then(|| Chunk {
                        group: groups.value(i).to_string(),
                        number: numbers.value(i),
                        total: totals.value(i),
                    }),
                });
            }
        }
        Ok(out)
    }

    /// The connection, for the derived tables ([`crate::snapshot`]).
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}
