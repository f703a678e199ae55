//! The SQLite engine: one file, one writer thread that gathers the writes
//! waiting into one transaction (group commit), each write in a savepoint
//! of its own, and reader threads with read-only connections.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::{mpsc, watch};

use crate::{run_each, steps_after, Conn, Failure, Job, Location, OpenError, Read, Settings, MIGRATIONS};

/// Opens the file, migrates it and starts the writer and the readers.
pub(crate) fn start(
    path: &Path,
    settings: &Settings,
    jobs: mpsc::Receiver<Job>,
    reads: mpsc::Receiver<Read>,
    wrote: watch::Sender<u64>,
) -> Result<(), OpenError> {
    let fail = |source| OpenError::Sqlite { path: path.to_path_buf(), source };
    let mut conn = Connection::open(path).map_err(fail)?;
    configure(&conn, settings).map_err(fail)?;
    migrate(&mut conn, path)?;
    let reads = Arc::new(Mutex::new(reads));
    for _ in 0..settings.readers.max(1) {
        let conn = Conn::sqlite(open_reader(path, settings).map_err(fail)?);
        let reads = reads.clone();
        std::thread::Builder::new()
            .name("store-reader".into())
            .spawn(move || read_loop(&conn, &reads))
            .map_err(OpenError::Thread)?;
    }
    let max_batch = settings.max_batch.max(1);
    std::thread::Builder::new()
        .name("store-writer".into())
        .spawn(move || write_loop(Conn::sqlite(conn), jobs, max_batch, &wrote))
        .map_err(OpenError::Thread)?;
    Ok(())
}

/// One reader thread: the next read in arrival order on its connection,
/// until the store is dropped. The lock is held only while waiting for a
/// read. A read that panics loses its answer, not the thread.
fn read_loop(conn: &Conn, reads: &Mutex<mpsc::Receiver<Read>>) {
    let next = || reads.lock().ok()?.blocking_recv().map(|read| move || read(Ok(conn)));
    run_each(next, "a read of the live store", || {});
}

fn open_reader(path: &Path, settings: &Settings) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    conn.busy_timeout(settings.busy_timeout)?;
    Ok(conn)
}

fn configure(conn: &Connection, settings: &Settings) -> rusqlite::Result<()> {
    conn.busy_timeout(settings.busy_timeout)?;
    // WAL: readers do not block the writer nor it them. FULL: the WAL is
    // synced at every commit, so a committed change survives power loss.
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(rusqlite::Error::InvalidParameterName(format!("journal_mode is {mode}, not wal")));
    }
    conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
}

/// The schema version of the file.
pub(crate) fn version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), OpenError> {
    let fail = |source| OpenError::Sqlite { path: path.to_path_buf(), source };
    let found = version(conn).map_err(fail)?;
    for (version, step) in steps_after(MIGRATIONS, found, &Location::from(path))? {
        let tx = conn.transaction().map_err(fail)?;
        tx.execute_batch(step).map_err(fail)?;
        tx.execute_batch(&format!("PRAGMA user_version = {version}")).map_err(fail)?;
        tx.commit().map_err(fail)?;
        tracing::info!(path = %path.display(), version, "live store migrated");
    }
    Ok(())
}

/// `job` inside a savepoint: released when it succeeds, rolled back when
/// it fails.
fn savepoint(conn: &Conn, job: &mut Job) -> Result<(), Failure> {
    conn.batch("SAVEPOINT job")?;
    let result = job.run(conn);
    match &result {
        Ok(_) => conn.batch("RELEASE SAVEPOINT job")?,
        Err(_) => conn.batch("ROLLBACK TO SAVEPOINT job; RELEASE SAVEPOINT job")?,
    }
    Ok(())
}

/// The writer thread: takes the jobs waiting (at most `max_batch`), runs
/// them in one transaction, commits, then tells each job's caller and the
/// store's followers (`wrote`).
fn write_loop(conn: Conn, mut jobs: mpsc::Receiver<Job>, max_batch: usize, wrote: &watch::Sender<u64>) {
    let mut batch = Vec::with_capacity(max_batch);
    while let Some(first) = jobs.blocking_recv() {
        batch.push(first);
        while batch.len() < max_batch {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let outcome = match conn.batch("BEGIN IMMEDIATE") {
            Ok(()) => batch.iter_mut().try_for_each(|job| savepoint(&conn, job)).and_then(|()| conn.batch("COMMIT")),
            Err(e) => Err(e),
        };
        match &outcome {
            Ok(()) => wrote.send_modify(|n| *n += 1),
            Err(failure) => {
                let _ = conn.batch("ROLLBACK");
                tracing::error!(error = %failure, "a live store transaction failed");
            }
        }
        for job in batch.drain(..) {
            job.finish(outcome.clone());
        }
    }
}
