//! The generator's DuckDB warehouse (`data/warehouse.duckdb`).
//!
//! It keeps every message fetched, so a build never refetches history, and
//! a cursor per topic (the last sequence number stored), so the next run
//! asks the source only for what is new. A topic's messages and its cursor
//! are written in one transaction: a run killed mid-fetch leaves the two
//! consistent. The derived tables of the last build live here too
//! ([`duckdb_files::snapshot`]), and each build's snapshot is a copy of this file.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use duckdb_files::columnar;
use duckdb_files::database::{self, Access};
use duckdb_files::params;
use duckdb_files::sql::Connection;

use hcs20::{Chunk, Message};
use shared::entity::EntityId;
use shared::timestamp::Timestamp;

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

    /// Writes the warehouse anew, through a temporary file and a rename,
    /// when a quarter of its blocks or more are free; returns its sizes
    /// before and after (`None` when it was kept). A whole build replaces
    /// the broker's tables in one transaction, so until it commits the old
    /// and the new are both in the file, and DuckDB reuses the space freed
    /// but never gives it back: at a million agents half of the warehouse's
    /// 2.2 GB were free blocks, which every layer's snapshot copied.
    pub fn compact_if_sparse(self) -> Result<Option<(u64, u64)>> {
        let (total, free) = blocks(&self.conn)?;
        if free * 4 < total {
            return Ok(None);
        }
        let Warehouse { conn, path } = self;
        let before = std::fs::metadata(&path)?.len();
        let temp = path.with_extension("duckdb.compact");
        for leftover in [temp.clone(), temp.with_extension("compact.wal")] {
            let _ = std::fs::remove_file(leftover);
        }
        let name: String = conn.query_row("SELECT current_database()", [], |row| row.get(0))?;
        let quoted = |text: &str, mark: char| format!("{mark}{}{mark}", text.replace(mark, &format!("{mark}{mark}")));
        conn.execute_batch(&format!(
            "CHECKPOINT; ATTACH {} AS compacted; COPY FROM DATABASE {} TO compacted; DETACH compacted;",
            quoted(&temp.display().to_string(), '\''),
            quoted(&name, '"'),
        ))
        .context("copying the warehouse into a compact file")?;
        drop(conn);
        // Detached, the copy is checkpointed: a log left beside it would
        // not follow it through the rename.
        let log = temp.with_extension("compact.wal");
        anyhow::ensure!(
            std::fs::metadata(&log).map_or(true, |m| m.len() == 0),
            "the compact copy of the warehouse left a log ({}); the warehouse is kept as it was",
            log.display()
        );
        std::fs::File::open(&temp)?.sync_all()?;
        std::fs::rename(&temp, &path).with_context(|| format!("naming {}", path.display()))?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(Some((before, std::fs::metadata(&path)?.len())))
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
        for chunk in stmt.chunks([])? {
            let (topics, sequences, consensus, payers) =
                (chunk.strings(0)?, chunk.u64s(1)?, chunk.u64s(2)?, chunk.strings(3)?);
            let (bodies, groups, numbers, totals) =
                (chunk.binaries(4)?, chunk.strings(5)?, chunk.u32s(6)?, chunk.u32s(7)?);
            out.reserve(chunk.len());
            // A batch is mostly one topic: parse its id once per run of it.
            let mut topic_cache: Option<(String, EntityId)> = None;
            for i in 0..chunk.len() {
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

    /// The connection, for the derived tables ([`duckdb_files::snapshot`]).
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The blocks of the file `conn` opened: (total, free).
fn blocks(conn: &Connection) -> Result<(i64, i64)> {
    let query = "SELECT total_blocks, free_blocks FROM pragma_database_size() WHERE database_name = current_database()";
    Ok(conn.query_row(query, [], |row| Ok((row.get(0)?, row.get(1)?)))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warehouse_half_free_is_written_anew_with_everything_it_holds() {
        let dir = std::env::temp_dir().join(format!("almanac-warehouse-compact-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("warehouse.duckdb");
        let warehouse = Warehouse::open(&path, "1GB").unwrap();
        warehouse
            .conn()
            .execute_batch(
                "CREATE TABLE t AS SELECT range AS n, range::VARCHAR || 'x' AS s FROM range(3000000);
                 COMMENT ON TABLE t IS 'kept'; CREATE VIEW v AS SELECT n FROM t WHERE n % 2 = 0;
                 INSERT INTO cursors VALUES ('0.0.1', 7); CHECKPOINT;",
            )
            .unwrap();
        // Kept: hardly a block is free.
        let warehouse = match warehouse.compact_if_sparse().unwrap() {
            None => Warehouse::open(&path, "1GB").unwrap(),
            Some(sizes) => panic!("a warehouse without free blocks was written anew: {sizes:?}"),
        };
        // The table replaced in one transaction, as a whole build replaces
        // the broker's: the old copy's blocks are free after it.
        warehouse
            .conn()
            .execute_batch(
                "BEGIN; CREATE OR REPLACE TABLE t AS SELECT n, s FROM t; COMMENT ON TABLE t IS 'kept'; COMMIT; CHECKPOINT;",
            )
            .unwrap();
        let (total, free) = blocks(warehouse.conn()).unwrap();
        assert!(free * 4 >= total, "{free} of {total} blocks free");
        let (before, after) = warehouse.compact_if_sparse().unwrap().expect("written anew");
        assert!(after * 3 < before * 2, "{before} bytes became {after}");

        let warehouse = Warehouse::open(&path, "1GB").unwrap();
        let conn = warehouse.conn();
        let (total, free) = blocks(conn).unwrap();
        assert!(free * 4 < total, "{free} of {total} blocks free after");
        let sums: (i64, i64, String) = conn
            .query_row("SELECT count(*), sum(n)::BIGINT, max(s) FROM t", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap();
        assert_eq!(sums, (3_000_000, 4_499_998_500_000, "9x".to_string()));
        let evens: i64 = conn.query_row("SELECT count(*) FROM v", [], |r| r.get(0)).unwrap();
        assert_eq!(evens, 1_500_000);
        let comment: String =
            conn.query_row("SELECT comment FROM duckdb_tables() WHERE table_name = 't'", [], |r| r.get(0)).unwrap();
        assert_eq!(comment, "kept");
        assert_eq!(warehouse.cursors().unwrap().into_values().collect::<Vec<_>>(), [7]);
        // The key is still a key.
        assert!(conn.execute_batch("INSERT INTO cursors VALUES ('0.0.1', 8)").is_err());
        assert!(!path.with_extension("duckdb.compact").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
