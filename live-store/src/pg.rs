//! The PostgreSQL engine: a few writer threads and a few reader threads,
//! each with a connection of its own, opened again when it breaks.
//!
//! Each write is one `SERIALIZABLE` transaction. Domain functions are
//! written as if writes ran one at a time (SQLite's single writer makes it
//! so); serializable isolation keeps that true across connections and api
//! replicas: PostgreSQL aborts a transaction that could not have run in
//! some serial order with the others (SQLSTATE 40001, or a deadlock,
//! 40P01), and the writer runs it again after a short randomized pause,
//! up to [`Settings::retries`] times; from its third run on, alone (see
//! [`ALONE_AFTER`]), so that writes of one hot row (debits of one account
//! from every replica) all end. A balance, for instance, is checked and
//! spent in one step whatever replica posts the debit; the `CHECK
//! (balance >= 0)` of the schema stands behind it.
//!
//! A connection that breaks fails the job it was running (its transaction
//! is gone with it, so nothing half-done is kept) and is opened again for
//! the next job; while PostgreSQL cannot be reached, each job fails once
//! the connection attempt does ([`Settings::connect_timeout`]) with
//! [`Failure::Unavailable`], which the api answers 503.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use tokio::sync::{mpsc, watch};

use crate::{run_each, steps_after, Conn, Failure, Job, Location, OpenError, Read, Settings, MIGRATIONS_POSTGRES};

/// The advisory lock that replicas opening one database at once take
/// while they migrate it: one migrates, the others then find it done.
const MIGRATION_LOCK: i64 = 0x616c_6d61_6e61_6300; // "almanac\0"

/// Connects, migrates and starts the writers and the readers.
pub(crate) fn start(
    url: &str,
    settings: &Settings,
    jobs: mpsc::Receiver<Job>,
    reads: mpsc::Receiver<Read>,
    wrote: watch::Sender<u64>,
) -> Result<(), OpenError> {
    let location = Location::Postgres(url.to_string());
    let fail = |source| OpenError::Postgres { location: location.clone(), source };
    let mut config: postgres::Config = url.parse().map_err(fail)?;
    config.connect_timeout(settings.connect_timeout);
    if config.get_application_name().is_none() {
        config.application_name("almanac-api");
    }
    let connector = Connector { config, readers_only: false };
    // On a thread of its own: the blocking client runs a runtime of its
    // own, which may not start on one of the caller's async threads.
    let first = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut first = connector.connect().map_err(fail)?;
                migrate(&mut first, &location)?;
                Ok::<_, OpenError>(first)
            })
            .join()
            .expect("opening the store does not panic")
    })?;
    let jobs = Arc::new(Mutex::new(jobs));
    let mut first = Some(Conn::postgres(first));
    for _ in 0..settings.writers.max(1) {
        let (connector, jobs, retries) = (connector.clone(), jobs.clone(), settings.retries);
        let conn = first.take();
        std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || write_loop(connector, conn, &jobs, retries))
            .map_err(OpenError::Thread)?;
    }
    let listener = Connector { readers_only: true, ..connector.clone() };
    std::thread::Builder::new()
        .name("store-listener".into())
        .spawn(move || listen(&listener, &wrote))
        .map_err(OpenError::Thread)?;
    let reads = Arc::new(Mutex::new(reads));
    for _ in 0..settings.readers.max(1) {
        let connector = Connector { readers_only: true, ..connector.clone() };
        let reads = reads.clone();
        std::thread::Builder::new()
            .name("store-reader".into())
            .spawn(move || read_loop(&connector, &reads))
            .map_err(OpenError::Thread)?;
    }
    Ok(())
}

/// How a thread opens its connection.
#[derive(Clone)]
struct Connector {
    config: postgres::Config,
    /// A reader's connection refuses writes, as SQLite's readers do.
    readers_only: bool,
}

impl Connector {
    fn connect(&self) -> Result<postgres::Client, postgres::Error> {
        let mut client = self.config.connect(postgres::NoTls)?;
        if self.readers_only {
            client.batch_execute("SET default_transaction_read_only = on")?;
        }
        Ok(client)
    }

    /// `conn` when it still works, else a new connection in its place.
    fn ensure<'c>(&self, conn: &'c mut Option<Conn>) -> Result<&'c Conn, Failure> {
        if conn.as_ref().is_none_or(Conn::is_closed) {
            *conn = None;
            *conn = Some(Conn::postgres(self.connect()?));
        }
        Ok(conn.as_ref().expect("a connection was just made"))
    }
}

/// One writer thread: each job in a transaction of its own, again when
/// it collided.
fn write_loop(connector: Connector, mut conn: Option<Conn>, jobs: &Mutex<mpsc::Receiver<Job>>, retries: u32) {
    let next = || jobs.lock().ok()?.blocking_recv();
    while let Some(mut job) = next() {
        let outcome = match connector.ensure(&mut conn) {
            Ok(c) => run_serializable(c, &mut job, retries),
            Err(failure) => Err(failure),
        };
        if let Err(failure) = &outcome {
            if !matches!(failure, Failure::Corrupt(_)) {
                tracing::warn!(error = %failure, "a live store write failed");
            }
        }
        job.finish(outcome);
    }
}

/// Runs `job` in a serializable transaction, again after a collision.
fn run_serializable(conn: &Conn, job: &mut Job, retries: u32) -> Result<(), Failure> {
    let mut tries = 0;
    loop {
        let turn = match tries < ALONE_AFTER {
            true => Turn::Shared,
            false => Turn::Alone,
        };
        let (lock, unlock) = turn.functions();
        // The lock is the session's, taken on its own before the
        // transaction begins (a statement in the same string would take
        // the transaction's snapshot before the lock is granted): a write
        // run alone sees every write that ran before it. The notice goes
        // out on commit, to every replica listening.
        conn.batch(&format!("SELECT {lock}({WRITERS})"))?;
        let outcome = conn.batch("BEGIN ISOLATION LEVEL SERIALIZABLE").and_then(|()| match job.run(conn) {
            Ok(()) => conn.batch(&format!("NOTIFY {WRITES}; COMMIT; SELECT {unlock}({WRITERS})")),
            Err(failure) => Err(failure),
        });
        let Err(failure) = outcome else { return Ok(()) };
        // A failed statement left the transaction aborted; a failed
        // COMMIT ended it. Either way nothing of it stays. (A broken
        // connection took its lock with it.)
        let _ = conn.batch(&format!("ROLLBACK; SELECT {unlock}({WRITERS})"));
        if !collided(&failure) {
            return Err(failure);
        }
        if tries == retries {
            return Err(Failure::Busy(tries));
        }
        tries += 1;
        std::thread::sleep(pause(tries));
    }
}

/// The advisory lock every write holds while it runs: shared by writes
/// that run side by side, exclusive for a write that runs alone.
const WRITERS: i64 = 0x616c_6d61_6e61_6301; // "almanac\x01"

/// How many times a write runs beside others before it runs alone: one
/// that keeps colliding (many debits of one account at once, from any
/// replica) then waits for the writes in flight, keeps new ones waiting
/// behind it, and cannot collide. Contention thus costs a turn alone per
/// write at worst, as SQLite's single writer does, instead of retries
/// without end.
const ALONE_AFTER: u32 = 2;

/// How a write holds [`WRITERS`].
#[derive(Clone, Copy)]
enum Turn {
    Shared,
    Alone,
}

impl Turn {
    /// The functions that take and give back the lock.
    fn functions(self) -> (&'static str, &'static str) {
        match self {
            Turn::Shared => ("pg_advisory_lock_shared", "pg_advisory_unlock_shared"),
            Turn::Alone => ("pg_advisory_lock", "pg_advisory_unlock"),
        }
    }
}

/// Whether `failure` is PostgreSQL aborting a transaction that collided
/// with concurrent ones (it would succeed run again).
fn collided(failure: &Failure) -> bool {
    let Failure::Postgres(e) = failure else { return false };
    matches!(e.code(), Some(code) if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED)
}

/// A random pause before try `n`, growing with `n` (up to about 50 ms), so
/// that writes that collided do not collide again in step.
fn pause(n: u32) -> Duration {
    let ceiling_us = 200u64 << n.min(8);
    let random = u64::from_le_bytes(crate::random::<8>());
    Duration::from_micros(random % ceiling_us)
}

/// The channel each committed write notifies (`NOTIFY`, sent by
/// PostgreSQL on commit) and every api sharing the store listens on.
const WRITES: &str = "almanac_writes";

/// How long the listener waits for a notice before it looks whether the
/// store is still open.
const LISTEN_TICK: Duration = Duration::from_millis(500);

/// The listener thread: counts the notices of committed writes into
/// `wrote`, until the store is dropped. A connection that breaks is opened
/// again (a try each `LISTEN_TICK` at most), and the count moves once more
/// then, for what may have been written meanwhile.
fn listen(connector: &Connector, wrote: &watch::Sender<u64>) {
    while !wrote.is_closed() {
        let mut client = match connector
            .connect()
            .and_then(|mut c| c.batch_execute(&format!("LISTEN {WRITES}")).map(|()| c))
        {
            Ok(client) => client,
            Err(e) => {
                tracing::warn!(error = %describe(&e), "the live store's notices cannot be listened to; trying again");
                std::thread::sleep(LISTEN_TICK);
                continue;
            }
        };
        wrote.send_modify(|n| *n += 1);
        while !wrote.is_closed() && !client.is_closed() {
            let mut notices = client.notifications();
            let mut waiting = notices.timeout_iter(LISTEN_TICK);
            // Each notice at once; none for a tick, or a broken
            // connection, ends the round.
            while let Ok(Some(_)) = waiting.next() {
                wrote.send_modify(|n| *n += 1);
            }
        }
    }
}

/// One reader thread.
fn read_loop(connector: &Connector, reads: &Mutex<mpsc::Receiver<Read>>) {
    let conn = std::cell::RefCell::new(None);
    let conn = &conn;
    let next = || {
        let read = reads.lock().ok()?.blocking_recv()?;
        Some(move || read(connector.ensure(&mut conn.borrow_mut())))
    };
    run_each(next, "a read of the live store", || {});
}

/// The version recorded in `almanac_schema`, 0 for a new database.
pub(crate) fn version(client: &mut postgres::Client) -> Result<i64, postgres::Error> {
    client.batch_execute("CREATE TABLE IF NOT EXISTS almanac_schema (version BIGINT NOT NULL)")?;
    Ok(client.query_one("SELECT COALESCE(MAX(version), 0) FROM almanac_schema", &[])?.get(0))
}

fn migrate(client: &mut postgres::Client, location: &Location) -> Result<(), OpenError> {
    let fail = |source| OpenError::Postgres { location: location.clone(), source };
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]).map_err(fail)?;
    let outcome = migrate_locked(client, location);
    let unlocked = client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]);
    outcome?;
    unlocked.map_err(fail)?;
    Ok(())
}

fn migrate_locked(client: &mut postgres::Client, location: &Location) -> Result<(), OpenError> {
    let fail = |source| OpenError::Postgres { location: location.clone(), source };
    let found = version(client).map_err(fail)?;
    for (version, step) in steps_after(MIGRATIONS_POSTGRES, found, location)? {
        let mut tx = client.transaction().map_err(fail)?;
        tx.batch_execute(step).map_err(fail)?;
        tx.execute("DELETE FROM almanac_schema", &[]).map_err(fail)?;
        tx.execute("INSERT INTO almanac_schema (version) VALUES ($1)", &[&version]).map_err(fail)?;
        tx.commit().map_err(fail)?;
        tracing::info!(store = %location, version, "live store migrated");
    }
    Ok(())
}

/// Whether a client error means the server could not be reached or the
/// connection broke (rather than a statement's fault).
pub(crate) fn is_connection_error(e: &postgres::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(cause) = source {
        if cause.is::<std::io::Error>() {
            return true;
        }
        source = cause.source();
    }
    e.is_closed()
}

/// A client error as a line to log: the server's message, detail and
/// SQLSTATE when it answered (the error's own text is only "db error").
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let detail = db.detail().map(|d| format!(" ({d})")).unwrap_or_default();
            format!("{}{detail} [{}]", db.message(), db.code().code())
        }
        None => e.to_string(),
    }
}

/// `url` without its password, to be shown.
pub(crate) fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (authority, path) = rest.split_once('/').map_or((rest, None), |(a, p)| (a, Some(p)));
    let authority = match authority.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => format!("{credentials}@{host}"),
        },
        None => authority.to_string(),
    };
    match path {
        Some(path) => format!("{scheme}://{authority}/{path}"),
        None => format!("{scheme}://{authority}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn urls_are_shown_without_their_password() {
        let cases = [
            ("postgres://almanac:secret@127.0.0.1:5432/live", "postgres://almanac:***@127.0.0.1:5432/live"),
            ("postgres://almanac@127.0.0.1/live", "postgres://almanac@127.0.0.1/live"),
            ("postgresql://127.0.0.1", "postgresql://127.0.0.1"),
        ];
        for (url, shown) in cases {
            assert_eq!(super::without_password(url), shown);
        }
    }
}
