//! The generator's DuckDB warehouse (`data/warehouse.duckdb`).
//!
//! It keeps every message fetched, so a build never refetches history, and
//! a cursor per topic (the last sequence number stored), so the next run
//! asks the source only for what is new. A topic's messages and its cursor
//! are written in one transaction: a run killed mid-fetch leaves the two
//! consistent. The derived tables of the last build are copied in from its
//! snapshot for analysts who work on the warehouse.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use duckdb::{params, Connection};

use crate::entity::EntityId;
use crate::hcs20::{Chunk, Message};
use crate::timestamp::Timestamp;

pub struct Warehouse {
    conn: Connection,
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

/// Derived tables copied from the newest snapshot.
pub const DERIVED_TABLES: [&str; 5] = ["topics", "tokens", "holdings", "events", "operations"];

impl Warehouse {
    pub fn open(path: &Path) -> Result<Warehouse> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let conn = Connection::open(path).with_context(|| format!("opening the warehouse {}", path.display()))?;
        conn.execute_batch(SCHEMA).context("creating the warehouse schema")?;
        Ok(Warehouse { conn })
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
        {
            let mut appender = tx.appender("messages")?;
            for m in messages {
                appender.append_row(params![
                    m.topic.to_string(),
                    m.sequence,
                    m.consensus.0,
                    m.payer.to_string(),
                    m.body.as_slice(),
                    m.chunk.as_ref().map(|c| c.group.as_str()),
                    m.chunk.as_ref().map(|c| c.number),
                    m.chunk.as_ref().map(|c| c.total),
                ])?;
            }
            appender.flush()?;
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

    /// The stored messages of one topic.
    pub fn messages_of(&self, topic: EntityId) -> Result<Vec<Message>> {
        self.select(&format!("WHERE topic = '{topic}'"))
    }

    fn select(&self, filter: &str) -> Result<Vec<Message>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT topic, sequence, consensus_ns, payer, body, chunk_group, chunk_number, chunk_total FROM messages {filter}"
        ))?;
        let rows = stmt.query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, u64>(1)?,
                row.get::<_, u64>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, Vec<u8>>(4)?,
                row.get::<_, Option<String>>(5)?,
                row.get::<_, Option<u32>>(6)?,
                row.get::<_, Option<u32>>(7)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (topic, sequence, consensus, payer, body, group, number, total) = row?;
            out.push(Message {
                topic: topic.parse()?,
                sequence,
                consensus: Timestamp(consensus),
                payer: payer.parse()?,
                body,
                chunk: match (group, number, total) {
                    (Some(group), Some(number), Some(total)) => Some(Chunk { group, number, total }),
                    _ => None,
                },
            });
        }
        Ok(out)
    }

    /// Replaces the derived tables with those of a snapshot.
    pub fn copy_derived(&self, snapshot: &Path) -> Result<()> {
        let path = snapshot.to_string_lossy().replace('\'', "''");
        let mut sql = format!("ATTACH '{path}' AS snap (READ_ONLY);\nBEGIN;\n");
        for table in DERIVED_TABLES {
            sql.push_str(&format!("CREATE OR REPLACE TABLE {table} AS SELECT * FROM snap.{table};\n"));
        }
        sql.push_str("COMMIT;\nDETACH snap;\n");
        self.conn.execute_batch(&sql).context("copying the build's tables into the warehouse")
    }
}
