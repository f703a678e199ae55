//! What the store's tests run against: a new SQLite file in a folder
//! removed when the test ends, and a new database in one throwaway
//! PostgreSQL cluster per test run (`pg-scratch`), started at first use
//! and gone when the run ends.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{sql::Conn, Dialect, Location, MIGRATIONS, MIGRATIONS_POSTGRES};

/// Both engines, for tests that run on each.
pub(crate) const ENGINES: [Dialect; 2] = [Dialect::Sqlite, Dialect::Postgres];

/// What a scratch store lives in; dropping it removes a SQLite folder (a
/// PostgreSQL database goes with its cluster).
pub(crate) struct Scratch {
    _folder: Option<tempfile::TempDir>,
}

/// A new, empty store of `engine`, named after `test`.
pub(crate) fn location(engine: Dialect, test: &str) -> (Scratch, Location) {
    match engine {
        Dialect::Sqlite => {
            let folder = tempfile::Builder::new().prefix(&format!("almanac-store-{test}-")).tempdir().unwrap();
            let path: PathBuf = folder.path().join("store.sqlite");
            (Scratch { _folder: Some(folder) }, Location::File(path))
        }
        Dialect::Postgres => {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let name = format!("t{}_{}", NEXT.fetch_add(1, Ordering::Relaxed), test.replace('-', "_"));
            let url = pg_scratch::shared().create_database(&name).expect("a new database");
            (Scratch { _folder: None }, Location::Postgres(url))
        }
    }
}

/// A connection to a new store of `engine` with every migration applied:
/// what the domain functions' unit tests run against.
pub(crate) fn migrated(engine: Dialect) -> (Scratch, Conn) {
    let (scratch, location) = location(engine, "unit");
    let conn = match location {
        Location::File(path) => {
            let conn = rusqlite::Connection::open(path).expect("a new store file");
            conn.execute_batch("PRAGMA foreign_keys=ON").unwrap();
            Conn::sqlite(conn)
        }
        Location::Postgres(url) => Conn::postgres(postgres::Client::connect(&url, postgres::NoTls).unwrap()),
    };
    let steps = match engine {
        Dialect::Sqlite => MIGRATIONS,
        Dialect::Postgres => MIGRATIONS_POSTGRES,
    };
    for step in steps {
        conn.batch(step).expect("the migrations apply");
    }
    // Domain functions run inside a writer's transaction (their
    // savepoints need one on PostgreSQL); this one is never committed.
    conn.batch("BEGIN").expect("a transaction");
    (scratch, conn)
}
