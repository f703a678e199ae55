//! The live store: the api's durable state (accounts, API keys,
//! challenges, credit transactions, registrations and their attempts,
//! encryption keys, adapter submissions, feedback, payment intents,
//! Programmable Secrets' policies and key requests, the plugin catalog and
//! its imports, and the outbox of the
//! journal the next build reads).
//!
//! **The interface.** Handlers see [`Store`] and the domain functions of
//! its submodules (`auth`, `credits`, …), which take and return plain
//! values; no SQL type crosses it. A PostgreSQL implementation for several
//! api replicas replaces what is behind those functions, not their callers.
//!
//! **SQLite.** One file under the data dir, in WAL mode with
//! `synchronous=FULL`: a commit is on disk before it returns, so a change
//! is stored before its 2xx is sent. All writes go through one writer
//! thread that gathers the jobs waiting for it into one transaction (group
//! commit: one fsync for many requests), each job in a savepoint of its
//! own so that a job that fails leaves the others. Concurrent writers
//! therefore never interleave: a debit that checks a balance and spends it
//! is one step. Reads run on a few reader threads, each with a read-only
//! connection of its own, which sees every committed write; reads wait
//! for one in arrival order. Why not tokio's blocking pool: 32 clients
//! registering at once held about 20 blocking threads (and opened a
//! connection for each read beyond the pool's), which ended together
//! after 10 s idle and gave back 20 to 80 MiB at once; on four threads
//! registrations ran a tenth faster.
//!
//! **Versions.** [`MIGRATIONS`] are applied in order at open, each in one
//! transaction that also sets `PRAGMA user_version`; a file whose version
//! is above what this build knows was written by a newer almanac and is
//! refused with an error that says so.

pub mod adapters;
pub mod auth;
pub mod availability;
pub mod chat;
pub mod credits;
pub mod feedback;
pub mod idempotency;
pub mod inscriptions;
pub mod keys;
pub mod outbox;
pub mod payments;
pub mod plugins;
pub mod registry;
pub mod secrets;
pub mod skills;
pub mod verification;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::{mpsc, oneshot};

/// The schema, one step per version: version `n` is the first `n` steps.
/// A step is never edited once released; a change is a new step.
pub const MIGRATIONS: &[&str] = &[
    include_str!("schema/001-live-store.sql"),
    include_str!("schema/002-registrations.sql"),
    include_str!("schema/003-keys-and-feedback.sql"),
    include_str!("schema/004-adapter-registry.sql"),
    include_str!("schema/005-purchases-and-redemptions.sql"),
    include_str!("schema/006-chat.sql"),
    include_str!("schema/007-chat-send-digests.sql"),
    include_str!("schema/008-availability.sql"),
    include_str!("schema/009-verification.sql"),
    include_str!("schema/010-inscriptions.sql"),
    include_str!("schema/011-skills.sql"),
    include_str!("schema/012-skill-publishing.sql"),
    include_str!("schema/013-member-holders-and-idempotency.sql"),
    include_str!("schema/014-programmable-secrets.sql"),
    include_str!("schema/015-secret-catalog.sql"),
    include_str!("schema/016-plugins.sql"),
];

/// The largest `seq` of some kind of live change stored: a build whose
/// journal point is at or past it holds them all, so answers need not
/// look in the store.
#[derive(Default)]
pub struct Newest(std::sync::atomic::AtomicI64);

impl Newest {
    pub fn get(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Change `seq` was stored.
    pub fn saw(&self, seq: i64) {
        self.0.fetch_max(seq, std::sync::atomic::Ordering::AcqRel);
    }
}

/// A database failure (not a refusal: those are values of the domain
/// functions). Answered 500.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Failure {
    #[error("the live store failed: {0}")]
    Database(Arc<rusqlite::Error>),
    #[error("the live store is closed")]
    Closed,
    #[error("stored data is malformed: {0}")]
    Corrupt(String),
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Failure {
        Failure::Database(Arc::new(e))
    }
}

/// Opening the store failed: the message says why and what to do.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "{path}: schema version {found} was written by a newer almanac (this one knows up to {known}); \
         run that version, or point --store at another file"
    )]
    Newer { path: PathBuf, found: i64, known: i64 },
    #[error("{path}: {source}")]
    Sqlite { path: PathBuf, source: rusqlite::Error },
    #[error("starting the live store's writer: {0}")]
    Thread(std::io::Error),
}

/// Settings of the store.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Jobs the writer may gather into one transaction.
    pub max_batch: usize,
    /// Jobs that may wait for the writer (callers wait beyond it).
    pub queue: usize,
    /// Reader threads, each with a read-only connection.
    pub readers: usize,
    /// How long a connection waits for a lock held by another process.
    pub busy_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings { max_batch: 512, queue: 4096, readers: 4, busy_timeout: Duration::from_secs(5) }
    }
}

/// A job for the writer: runs in its savepoint, returns what to do once
/// the transaction's fate is known.
type Job = Box<dyn FnOnce(&Connection) -> Finish + Send>;
type Finish = Box<dyn FnOnce(Result<(), Failure>) + Send>;

/// A read for the reader threads: runs on one's connection.
type Read = Box<dyn FnOnce(&Connection) + Send>;

/// The live store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    writer: mpsc::Sender<Job>,
    readers: mpsc::Sender<Read>,
}

impl Store {
    /// Opens (creating if needed) the store at `path`, brings its schema
    /// up to date, and starts the writer thread (which ends when the last
    /// clone of the store is dropped).
    pub fn open(path: &Path, settings: Settings) -> Result<Store, OpenError> {
        let fail = |source| OpenError::Sqlite { path: path.to_path_buf(), source };
        let mut conn = Connection::open(path).map_err(fail)?;
        configure(&conn, &settings).map_err(fail)?;
        migrate(&mut conn, path)?;
        let (readers, reads) = mpsc::channel::<Read>(settings.queue.max(1));
        let reads = Arc::new(Mutex::new(reads));
        for _ in 0..settings.readers.max(1) {
            let conn = open_reader(path, &settings).map_err(fail)?;
            let reads = reads.clone();
            std::thread::Builder::new()
                .name("store-reader".into())
                .spawn(move || read_loop(&conn, &reads))
                .map_err(OpenError::Thread)?;
        }
        let (writer, jobs) = mpsc::channel(settings.queue.max(1));
        let max_batch = settings.max_batch.max(1);
        std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || write_loop(conn, jobs, max_batch))
            .map_err(OpenError::Thread)?;
        Ok(Store { writer, readers })
    }

    /// Runs `f` in the writer's next transaction and answers once that
    /// transaction is committed (on disk). When `f` fails, what it wrote
    /// is undone and the rest of the transaction stands.
    pub async fn write<T, F>(&self, f: F) -> Result<T, Failure>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, Failure> + Send + 'static,
    {
        let (tell, told) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let result = savepoint(conn, f);
            Box::new(move |committed: Result<(), Failure>| {
                let _ = tell.send(committed.and(result));
            })
        });
        self.writer.send(job).await.map_err(|_| Failure::Closed)?;
        told.await.map_err(|_| Failure::Closed)?
    }

    /// Runs `f` on a read-only connection, off the async threads, after
    /// the reads asked before it. It sees every write whose `write` has
    /// returned.
    pub async fn read<T, F>(&self, f: F) -> Result<T, Failure>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, Failure> + Send + 'static,
    {
        let (tell, told) = oneshot::channel();
        let read: Read = Box::new(move |conn| {
            let _ = tell.send(f(conn));
        });
        self.readers.send(read).await.map_err(|_| Failure::Closed)?;
        // Dropped unanswered only when `f` panicked.
        told.await.map_err(|_| Failure::Closed)?
    }
}

/// One reader thread: the next read in arrival order on its connection,
/// until the store is dropped. The lock is held only while waiting for a
/// read. A read that panics loses its answer, not the thread.
fn read_loop(conn: &Connection, reads: &Mutex<mpsc::Receiver<Read>>) {
    let next = || reads.lock().ok()?.blocking_recv().map(|read| move || read(conn));
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
pub fn version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), OpenError> {
    let fail = |source| OpenError::Sqlite { path: path.to_path_buf(), source };
    let found = version(conn).map_err(fail)?;
    let known = MIGRATIONS.len() as i64;
    if found > known {
        return Err(OpenError::Newer { path: path.to_path_buf(), found, known });
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        let tx = conn.transaction().map_err(fail)?;
        tx.execute_batch(step).map_err(fail)?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1)).map_err(fail)?;
        tx.commit().map_err(fail)?;
        tracing::info!(path = %path.display(), version = i + 1, "live store migrated");
    }
    Ok(())
}

/// `f` inside a savepoint: released when it succeeds, rolled back when it
/// fails.
fn savepoint<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T, Failure>) -> Result<T, Failure> {
    conn.execute_batch("SAVEPOINT job")?;
    let result = f(conn);
    match &result {
        Ok(_) => conn.execute_batch("RELEASE job")?,
        Err(_) => conn.execute_batch("ROLLBACK TO job; RELEASE job")?,
    }
    result
}

/// The writer thread: takes the jobs waiting (at most `max_batch`), runs
/// them in one transaction, commits, then tells each job's caller.
fn write_loop(conn: Connection, mut jobs: mpsc::Receiver<Job>, max_batch: usize) {
    let mut batch = Vec::with_capacity(max_batch);
    while let Some(first) = jobs.blocking_recv() {
        batch.push(first);
        while batch.len() < max_batch {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let mut finishes = Vec::with_capacity(batch.len());
        let begun = conn.execute_batch("BEGIN IMMEDIATE");
        let outcome = match begun {
            Ok(()) => {
                finishes.extend(batch.drain(..).map(|job| job(&conn)));
                conn.execute_batch("COMMIT").map_err(Failure::from)
            }
            Err(e) => Err(Failure::from(e)),
        };
        if let Err(failure) = &outcome {
            let _ = conn.execute_batch("ROLLBACK");
            tracing::error!(error = %failure, "a live store transaction failed");
        }
        // Jobs never run (BEGIN failed) are dropped with their senders:
        // their callers see the store fail instead of waiting.
        batch.clear();
        for finish in finishes {
            finish(outcome.clone());
        }
    }
}

/// A text column holding a value of a closed set (a `vocabulary!`): a
/// value outside it is a conversion error naming the column.
pub(crate) fn closed<T: std::str::FromStr>(r: &rusqlite::Row<'_>, column: usize) -> rusqlite::Result<T> {
    let text: String = r.get(column)?;
    text.parse().map_err(|_| {
        let problem = format!("{text:?} is not a known value");
        rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, problem.into())
    })
}

/// Runs `steps`, which write as they go, and keeps what they wrote only
/// when `kept` says so of their outcome: a refusal (or a failure) undoes
/// them all, and the rest of the writer's transaction stands.
pub(crate) fn all_or_nothing<T>(
    conn: &Connection,
    steps: impl FnOnce() -> Result<T, Failure>,
    kept: impl FnOnce(&T) -> bool,
) -> Result<T, Failure> {
    conn.execute_batch("SAVEPOINT all_or_nothing")?;
    let outcome = steps();
    match &outcome {
        Ok(done) if kept(done) => conn.execute_batch("RELEASE all_or_nothing")?,
        _ => conn.execute_batch("ROLLBACK TO all_or_nothing; RELEASE all_or_nothing")?,
    }
    outcome
}

/// A connection to a new store file with every migration applied, in a
/// folder removed when the test ends: what the domain functions' unit
/// tests run against.
#[cfg(test)]
pub(crate) fn migrated() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let conn = Connection::open(dir.path().join("store.sqlite")).expect("a new store file");
    for migration in MIGRATIONS {
        conn.execute_batch(migration).expect("the migrations apply");
    }
    (dir, conn)
}

/// Now, in milliseconds since the Unix epoch (the store's times).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A time of the store as RFC 3339 in UTC with milliseconds (the wire's).
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `bytes` of fresh randomness from the operating system.
pub fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    bytes
}

#[cfg(test)]
mod tests;

/// Runs each job `next` hands out, one at a time, then `after`, until it
/// hands out none: a worker thread's loop over a shared queue (the live
/// store's readers, the api's search threads). A job that panics loses its
/// answer (its asker sees the answer's channel closed and answers 500),
/// not the thread; it is logged as `what`.
pub fn run_each<J: FnOnce()>(mut next: impl FnMut() -> Option<J>, what: &str, mut after: impl FnMut()) {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    while let Some(job) = next() {
        if catch_unwind(AssertUnwindSafe(job)).is_err() {
            tracing::error!("{what} panicked; its request was answered 500");
        }
        after();
    }
}
