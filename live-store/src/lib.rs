//! The live store: the api's durable state (accounts, API keys,
//! challenges, credit transactions, registrations and their attempts,
//! encryption keys, adapter submissions, feedback, payment intents,
//! Programmable Secrets' policies and key requests, the plugin catalog and
//! its imports, and the outbox of the
//! journal the next build reads).
//!
//! **The interface.** Handlers see [`Store`] and the domain functions of
//! its submodules (`auth`, `credits`, …), which take a [`Conn`] and plain
//! values and return plain values; no SQL crosses it. Each domain function
//! is written once, in the SQL both engines speak ([`sql`]).
//!
//! **Two engines.** [`Location`] chooses: a file is SQLite, the embedded
//! default of one api; a `postgres://` URL is PostgreSQL, shared by api
//! replicas. A write is a function of a connection that the store runs in
//! a transaction and that must leave the store as if writes ran one at a
//! time, on either engine.
//!
//! **SQLite** ([`sqlite`]). One file under the data dir, in WAL mode with
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
//! **PostgreSQL** ([`pg`]). Writes run on a few connections at once,
//! each in a `SERIALIZABLE` transaction: PostgreSQL aborts one that
//! could not have run one at a time with the others, and the store runs it
//! again, which is why a write is a function (`Fn`) it may call more than
//! once. Reads run on connections of their own, each statement seeing
//! every committed write. A connection that breaks is opened again for the
//! next job; while PostgreSQL cannot be reached, jobs fail at once with
//! [`Failure::Unavailable`].
//!
//! **Versions.** [`MIGRATIONS`] (SQLite) and [`MIGRATIONS_POSTGRES`] are
//! the same steps in each dialect, applied in order at open, each in one
//! transaction that also records the version (`PRAGMA user_version`; the
//! table `almanac_schema`); a store whose version is above what this
//! build knows was written by a newer almanac and is refused with an error
//! that says so.

pub mod adapters;
pub mod auth;
pub mod availability;
pub mod chat;
pub mod credits;
pub mod feedback;
pub mod idempotency;
pub mod inscriptions;
pub mod keys;
pub mod leases;
pub mod outbox;
pub mod payments;
pub mod plugins;
pub mod registry;
pub mod secrets;
pub mod skills;
pub mod verification;

mod pg;
pub mod sql;
mod sqlite;

use std::any::Any;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

pub use sql::{Conn, Dialect, Optional, Row};

/// The schema, one step per version: version `n` is the first `n` steps.
/// A step is never edited once released; a change is a new step, here
/// and in [`MIGRATIONS_POSTGRES`].
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
    include_str!("schema/017-leases.sql"),
];

/// [`MIGRATIONS`] in PostgreSQL's dialect, step for step.
pub const MIGRATIONS_POSTGRES: &[&str] = &[
    include_str!("schema/postgres/001-live-store.sql"),
    include_str!("schema/postgres/002-registrations.sql"),
    include_str!("schema/postgres/003-keys-and-feedback.sql"),
    include_str!("schema/postgres/004-adapter-registry.sql"),
    include_str!("schema/postgres/005-purchases-and-redemptions.sql"),
    include_str!("schema/postgres/006-chat.sql"),
    include_str!("schema/postgres/007-chat-send-digests.sql"),
    include_str!("schema/postgres/008-availability.sql"),
    include_str!("schema/postgres/009-verification.sql"),
    include_str!("schema/postgres/010-inscriptions.sql"),
    include_str!("schema/postgres/011-skills.sql"),
    include_str!("schema/postgres/012-skill-publishing.sql"),
    include_str!("schema/postgres/013-member-holders-and-idempotency.sql"),
    include_str!("schema/postgres/014-programmable-secrets.sql"),
    include_str!("schema/postgres/015-secret-catalog.sql"),
    include_str!("schema/postgres/016-plugins.sql"),
    include_str!("schema/postgres/017-leases.sql"),
];

/// The steps of `steps` a store at version `found` has yet to take, each
/// with the version it brings the store to; a store past them all was
/// written by a newer almanac.
fn steps_after(
    steps: &'static [&'static str],
    found: i64,
    location: &Location,
) -> Result<impl Iterator<Item = (i64, &'static str)>, OpenError> {
    let known = steps.len() as i64;
    if found > known {
        return Err(OpenError::Newer { location: location.clone(), found, known });
    }
    Ok(steps.iter().copied().zip(1..).skip(found.max(0) as usize).map(|(step, version)| (version, step)))
}

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
/// functions).
#[derive(Debug, Clone, thiserror::Error)]
pub enum Failure {
    #[error("the live store failed: {0}")]
    Sqlite(Arc<rusqlite::Error>),
    #[error("the live store failed: {}", pg::describe(.0))]
    Postgres(Arc<postgres::Error>),
    /// PostgreSQL could not be reached; the next job tries again.
    #[error("the live store cannot be reached: {0}")]
    Unavailable(String),
    /// A write kept colliding with concurrent ones past its retries.
    #[error("the live store is too busy: a write was retried {0} times")]
    Busy(u32),
    /// `query_row` found no row (see [`Optional`]).
    #[error("the live store found no row where one was expected")]
    NoRows,
    #[error("the live store is closed")]
    Closed,
    #[error("stored data is malformed: {0}")]
    Corrupt(String),
}

impl Failure {
    /// Whether a caller may ask again soon with a fair chance (the store
    /// unreachable or busy) rather than a fault to report.
    pub fn is_transient(&self) -> bool {
        matches!(self, Failure::Unavailable(_) | Failure::Busy(_))
    }
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Failure {
        Failure::Sqlite(Arc::new(e))
    }
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Failure {
        if pg::is_connection_error(&e) {
            Failure::Unavailable(e.to_string())
        } else {
            Failure::Postgres(Arc::new(e))
        }
    }
}

/// Opening the store failed: the message says why and what to do.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "{location}: schema version {found} was written by a newer almanac (this one knows up to {known}); \
         run that version, or point --store at another store"
    )]
    Newer { location: Location, found: i64, known: i64 },
    #[error("{path}: {source}")]
    Sqlite { path: PathBuf, source: rusqlite::Error },
    #[error("{location}: {}", pg::describe(source))]
    Postgres { location: Location, source: postgres::Error },
    #[error("starting the live store's threads: {0}")]
    Thread(std::io::Error),
}

/// Where the store is: a SQLite file, or a PostgreSQL database by URL.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    File(PathBuf),
    Postgres(String),
}

impl Location {
    /// `postgres://…` or `postgresql://…` is PostgreSQL; anything else a
    /// file path.
    pub fn parse(text: &str) -> Location {
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            Location::Postgres(text.to_string())
        } else {
            Location::File(PathBuf::from(text))
        }
    }
}

impl From<&Path> for Location {
    fn from(path: &Path) -> Location {
        Location::File(path.to_path_buf())
    }
}

impl From<&PathBuf> for Location {
    fn from(path: &PathBuf) -> Location {
        Location::File(path.clone())
    }
}

/// Shown without a URL's password.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => f.write_str(&pg::without_password(url)),
        }
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Settings of the store.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Jobs SQLite's writer may gather into one transaction.
    pub max_batch: usize,
    /// Jobs that may wait for a writer (callers wait beyond it).
    pub queue: usize,
    /// Reader threads, each with a connection of its own.
    pub readers: usize,
    /// PostgreSQL: connections that write at once (SQLite has one writer).
    pub writers: usize,
    /// SQLite: how long a connection waits for a lock held by another
    /// process.
    pub busy_timeout: Duration,
    /// PostgreSQL: how long opening a connection may take.
    pub connect_timeout: Duration,
    /// PostgreSQL: how many times a write that collided with concurrent
    /// ones is run again before it fails [`Failure::Busy`].
    pub retries: u32,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            max_batch: 512,
            queue: 4096,
            readers: 4,
            writers: 8,
            busy_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            retries: 50,
        }
    }
}

impl Conn {
    /// A connection of its own to the store at `location`, outside any
    /// [`Store`]'s threads and transactions (each statement commits on
    /// its own): for tools and tests that look at, or arrange, a store an
    /// api uses. It neither creates nor migrates a store. Blocking (the
    /// PostgreSQL client runs a runtime of its own): not on an async
    /// thread.
    pub fn open(location: &Location) -> Result<Conn, Failure> {
        match location {
            Location::File(path) => {
                let conn = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)?;
                conn.busy_timeout(Settings::default().busy_timeout)?;
                Ok(Conn::sqlite(conn))
            }
            Location::Postgres(url) => Ok(Conn::postgres(postgres::Client::connect(url, postgres::NoTls)?)),
        }
    }
}

/// What a read or a write answers, boxed. [`Store::read`] and
/// [`Store::write`] are generic over the caller's function and its answer,
/// and the api calls them from about 150 places: with the answer boxed,
/// everything under them (the job, the channel, the waiting) is compiled
/// once instead of once per caller. It costs one allocation per call, beside
/// a round trip to SQLite's threads or to PostgreSQL.
type Answer = Box<dyn Any + Send>;
/// A caller's write, answering in a box.
type WriteAnswering = Box<dyn Fn(&Conn) -> Result<Answer, Failure> + Send>;
/// A caller's read, answering in a box.
type ReadAnswering = Box<dyn FnOnce(&Conn) -> Result<Answer, Failure> + Send>;

/// A caller's answer, taken out of its box.
fn unbox<T: 'static>(answer: Answer) -> T {
    *answer.downcast::<T>().expect("a store call answers with its function's type")
}

/// A write waiting for a writer: run (perhaps more than once, each time in
/// a new transaction), then told how its transaction ended.
struct Job {
    write: WriteAnswering,
    result: Option<Result<Answer, Failure>>,
    tell: oneshot::Sender<Result<Answer, Failure>>,
}

impl Job {
    /// Runs the write; an `Err` undoes what it wrote.
    fn run(&mut self, conn: &Conn) -> Result<(), Failure> {
        let result = (self.write)(conn);
        let status = result.as_ref().map(|_| ()).map_err(Failure::clone);
        self.result = Some(result);
        status
    }

    /// Answers the caller: the write's last result once its transaction
    /// is committed, or why the transaction failed.
    fn finish(self, committed: Result<(), Failure>) {
        let result = self.result.unwrap_or(Err(Failure::Closed));
        let _ = self.tell.send(committed.and(result));
    }
}

/// A read for the reader threads: given a connection, or why there is
/// none.
type Read = Box<dyn FnOnce(Result<&Conn, Failure>) + Send>;

/// The live store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    writer: mpsc::Sender<Job>,
    readers: mpsc::Sender<Read>,
    dialect: Dialect,
    writes: watch::Receiver<u64>,
}

impl Store {
    /// Opens the store at `location` (creating a SQLite file if needed),
    /// brings its schema up to date, and starts its threads (which end
    /// when the last clone of the store is dropped).
    pub fn open(location: impl Into<Location>, settings: Settings) -> Result<Store, OpenError> {
        let (writer, jobs) = mpsc::channel::<Job>(settings.queue.max(1));
        let (readers, reads) = mpsc::channel::<Read>(settings.queue.max(1));
        let (wrote, writes) = watch::channel(0);
        let dialect = match location.into() {
            Location::File(path) => {
                sqlite::start(&path, &settings, jobs, reads, wrote)?;
                Dialect::Sqlite
            }
            Location::Postgres(url) => {
                pg::start(&url, &settings, jobs, reads, wrote)?;
                Dialect::Postgres
            }
        };
        Ok(Store { writer, readers, dialect, writes })
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Changes each time writes were committed to the store, by this api
    /// or (on PostgreSQL) by any replica sharing it: what followers of the
    /// store wait on instead of polling it. Many commits may come to one
    /// change, and a change may come with no new write (after the store's
    /// notifications were cut off, in case one was missed).
    pub fn writes(&self) -> watch::Receiver<u64> {
        self.writes.clone()
    }

    /// Runs `write` in a transaction and answers once that transaction is
    /// committed (on disk). When `write` fails, what it wrote is undone.
    /// It may run more than once (PostgreSQL runs it again when it
    /// collided with concurrent writes), so it must not act outside the
    /// store.
    pub async fn write<T, F>(&self, write: F) -> Result<T, Failure>
    where
        T: Send + 'static,
        F: Fn(&Conn) -> Result<T, Failure> + Send + 'static,
    {
        let write = Box::new(move |conn: &Conn| write(conn).map(|answer| Box::new(answer) as Answer));
        self.write_answer(write).await.map(unbox)
    }

    async fn write_answer(&self, write: WriteAnswering) -> Result<Answer, Failure> {
        let (tell, told) = oneshot::channel();
        self.writer.send(Job { write, result: None, tell }).await.map_err(|_| Failure::Closed)?;
        told.await.map_err(|_| Failure::Closed)?
    }

    /// Runs `f` on a reader's connection, off the async threads, after
    /// the reads asked before it. It sees every write whose `write` has
    /// returned.
    pub async fn read<T, F>(&self, f: F) -> Result<T, Failure>
    where
        T: Send + 'static,
        F: FnOnce(&Conn) -> Result<T, Failure> + Send + 'static,
    {
        let f = Box::new(move |conn: &Conn| f(conn).map(|answer| Box::new(answer) as Answer));
        self.read_answer(f).await.map(unbox)
    }

    async fn read_answer(&self, f: ReadAnswering) -> Result<Answer, Failure> {
        let (tell, told) = oneshot::channel();
        let read: Read = Box::new(move |conn| {
            let _ = tell.send(conn.and_then(f));
        });
        self.readers.send(read).await.map_err(|_| Failure::Closed)?;
        // Dropped unanswered only when `f` panicked.
        told.await.map_err(|_| Failure::Closed)?
    }
}

/// A text column holding a value of a closed set (a `vocabulary!`): a
/// value outside it is a conversion error naming the column.
pub(crate) fn closed<T: std::str::FromStr>(r: &Row<'_>, column: usize) -> Result<T, Failure> {
    let text: String = r.get(column)?;
    text.parse().map_err(|_| Failure::Corrupt(format!("column {column}: {text:?} is not a known value")))
}

/// Runs `steps`, which write as they go, and keeps what they wrote only
/// when `kept` says so of their outcome: a refusal (or a failure) undoes
/// them all, and the rest of the writer's transaction stands.
pub(crate) fn all_or_nothing<T>(
    conn: &Conn,
    steps: impl FnOnce() -> Result<T, Failure>,
    kept: impl FnOnce(&T) -> bool,
) -> Result<T, Failure> {
    conn.batch("SAVEPOINT all_or_nothing")?;
    let outcome = steps();
    match &outcome {
        Ok(done) if kept(done) => conn.batch("RELEASE SAVEPOINT all_or_nothing")?,
        _ => conn.batch("ROLLBACK TO SAVEPOINT all_or_nothing; RELEASE SAVEPOINT all_or_nothing")?,
    }
    outcome
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
pub(crate) mod testing;
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
