//! The outbox: changes the next build must include (registrations,
//! updates, deletions, feedback), stored in the same transaction as the
//! change itself. The journal writer (`crate::journal`) appends them to
//! the generator's journal with `seq` as the journal's sequence number,
//! then deletes them here. If the api dies between those two writes, the
//! next start finds the journal's last `seq` and deletes instead of
//! appending again: each change reaches the journal exactly once.

use crate::params;
use crate::sql::{Conn, Dialect};
use broker_model::journal::Event;

use super::Failure;

/// The PostgreSQL advisory lock a transaction holds from its first push
/// until it ends: transactions that push commit in the order of their
/// `seq`s, so a reader that has seen `seq` has seen every smaller one (on
/// SQLite, the single writer makes it so).
const PUSH_LOCK: i64 = 0x6f75_7462_6f78; // "outbox"

/// Stores `event`, happened at `at` (ms), for the journal.
pub fn push(conn: &Conn, at: i64, event: &Event) -> Result<i64, Failure> {
    let text = serde_json::to_string(event).map_err(|e| Failure::Corrupt(e.to_string()))?;
    if conn.dialect() == Dialect::Postgres {
        conn.query_row("SELECT pg_advisory_xact_lock(?1)", [PUSH_LOCK], |_| Ok(()))?;
    }
    conn.query_row("INSERT INTO outbox (at, event) VALUES (?1, ?2) RETURNING seq", params![at, text], |r| r.get(0))
}

/// Up to `limit` waiting events after `after`, in order: `(seq, at, event)`.
pub fn waiting(conn: &Conn, after: i64, limit: usize) -> Result<Vec<(i64, i64, Event)>, Failure> {
    let rows = conn.query_map(
        "SELECT seq, at, event FROM outbox WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        params![after, limit as i64],
        |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?, r.get::<String>(2)?)),
    )?;
    rows.into_iter()
        .map(|row| {
            let (seq, at, text) = row;
            let event = serde_json::from_str(&text).map_err(|e| Failure::Corrupt(format!("outbox {seq}: {e}")))?;
            Ok((seq, at, event))
        })
        .collect()
}

/// Deletes the events up to `seq` (they are in the journal).
pub fn delete_through(conn: &Conn, seq: i64) -> Result<usize, Failure> {
    conn.execute("DELETE FROM outbox WHERE seq <= ?1", [seq])
}

/// Makes the next `seq` larger than `journaled` (a journal that already
/// holds records from before this store, or from a store since replaced).
pub fn follow(conn: &Conn, journaled: i64) -> Result<(), Failure> {
    match conn.dialect() {
        Dialect::Sqlite => {
            let current: i64 = conn.query_row(
                "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0)",
                [],
                |r| r.get(0),
            )?;
            if current < journaled {
                conn.execute("DELETE FROM sqlite_sequence WHERE name = 'outbox'", [])?;
                conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('outbox', ?1)", [journaled])?;
            }
        }
        Dialect::Postgres => {
            let sequence = "CAST(pg_get_serial_sequence('outbox', 'seq') AS regclass)";
            let current: i64 =
                conn.query_row(&format!("SELECT COALESCE(pg_sequence_last_value({sequence}), 0)"), [], |r| r.get(0))?;
            if current < journaled {
                conn.query_row(&format!("SELECT setval({sequence}, ?1)"), [journaled], |_| Ok(()))?;
            }
        }
    }
    Ok(())
}
