//! Content inscriptions (`crate::broker::inscription`): quotes, and jobs
//! with the content they write and how far they got.
//!
//! A job is created with its debit in one transaction ([`create`]): a
//! request retried under the same idempotency key finds the job it made
//! and is not charged again. Its progress is stored before each step is
//! taken on the network (the transaction id first, then the call), so a
//! restart resumes where it stopped and never writes a message twice. A
//! failed job is refunded in the transaction that fails it.

use crate::params;
use crate::sql::{Conn, Optional, Row};

use super::credits::{self, Billed, Short};
use super::{closed, idempotency, Failure};

shared::vocabulary! {
    /// Where a job stands (the hosted broker's words).
    Status, STATUSES {
        Pending = "pending",
        InProgress = "in_progress",
        Completed = "completed",
        Failed = "failed",
    }
}

/// A price given for some content, for a while.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quote {
    pub id: String,
    pub account: String,
    pub content_hash: String,
    pub size_bytes: i64,
    pub mime: String,
    pub mode: String,
    pub messages: i64,
    pub tinybars: i64,
    pub credits: i64,
    pub usd_cents: i64,
    pub created_at: i64,
    pub expires_at: i64,
}

pub fn insert_quote(conn: &Conn, q: &Quote) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO inscription_quotes
         (id, account, content_hash, size_bytes, mime, mode, messages, tinybars, credits, usd_cents, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            q.id,
            q.account,
            q.content_hash,
            q.size_bytes,
            q.mime,
            q.mode,
            q.messages,
            q.tinybars,
            q.credits,
            q.usd_cents,
            q.created_at,
            q.expires_at
        ],
    )?;
    Ok(())
}

/// Deletes quotes that expired before `before` (ms).
pub fn prune_quotes(conn: &Conn, before: i64) -> Result<usize, Failure> {
    conn.execute("DELETE FROM inscription_quotes WHERE expires_at < ?1", [before])
}

pub fn quote(conn: &Conn, id: &str) -> Result<Option<Quote>, Failure> {
    conn.query_row(
        "SELECT id, account, content_hash, size_bytes, mime, mode, messages, tinybars, credits, usd_cents,
                    created_at, expires_at FROM inscription_quotes WHERE id = ?1",
        [id],
        |r| {
            Ok(Quote {
                id: r.get(0)?,
                account: r.get(1)?,
                content_hash: r.get(2)?,
                size_bytes: r.get(3)?,
                mime: r.get(4)?,
                mode: r.get(5)?,
                messages: r.get(6)?,
                tinybars: r.get(7)?,
                credits: r.get(8)?,
                usd_cents: r.get(9)?,
                created_at: r.get(10)?,
                expires_at: r.get(11)?,
            })
        },
    )
    .optional()
}

/// A job as stored (its content apart: [`content`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub id: String,
    pub account: String,
    pub idempotency_key: Option<String>,
    pub quote_id: Option<String>,
    pub status: Status,
    pub mode: String,
    pub file_name: Option<String>,
    pub mime: String,
    pub size_bytes: i64,
    pub content_hash: String,
    /// Messages the file takes.
    pub messages: i64,
    pub credits: i64,
    pub usd_cents: i64,
    /// The topic's creation: its transaction id (the SDKs' form), then the
    /// topic once it reached consensus.
    pub topic_tx: Option<String>,
    pub topic_id: Option<String>,
    /// Messages known to have reached consensus (in order).
    pub written: i64,
    /// The transaction id message `written` was last sent under.
    pub pending_tx: Option<String>,
    pub failure: Option<String>,
    /// The skill publish job this file is a part of (`crate::skills`):
    /// charged, listed and run with it, not on its own.
    pub parent: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

const JOB: &str = "SELECT id, account, idempotency_key, quote_id, status, mode, file_name, mime, size_bytes,
                          content_hash, messages, credits, usd_cents, topic_tx, topic_id, written, pending_tx,
                          failure, created_at, updated_at, parent FROM inscription_jobs";

fn job_row(r: &Row<'_>) -> Result<Job, Failure> {
    Ok(Job {
        id: r.get(0)?,
        account: r.get(1)?,
        idempotency_key: r.get(2)?,
        quote_id: r.get(3)?,
        status: closed(r, 4)?,
        mode: r.get(5)?,
        file_name: r.get(6)?,
        mime: r.get(7)?,
        size_bytes: r.get(8)?,
        content_hash: r.get(9)?,
        messages: r.get(10)?,
        credits: r.get(11)?,
        usd_cents: r.get(12)?,
        topic_tx: r.get(13)?,
        topic_id: r.get(14)?,
        written: r.get(15)?,
        pending_tx: r.get(16)?,
        failure: r.get(17)?,
        created_at: r.get(18)?,
        updated_at: r.get(19)?,
        parent: r.get(20)?,
    })
}

pub fn job(conn: &Conn, id: &str) -> Result<Option<Job>, Failure> {
    conn.query_row(&format!("{JOB} WHERE id = ?1"), [id], job_row).optional()
}

/// The content job `id` writes.
pub fn content(conn: &Conn, id: &str) -> Result<Option<Vec<u8>>, Failure> {
    conn.query_row("SELECT content FROM inscription_jobs WHERE id = ?1", [id], |r| r.get(0)).optional()
}

/// `account`'s jobs, newest first: a page and the total (parts of skill
/// publish jobs are not among them).
pub fn jobs(
    conn: &Conn,
    account: &str,
    status: Option<Status>,
    limit: usize,
    offset: usize,
) -> Result<(Vec<Job>, u64), Failure> {
    let status = status.map(Status::as_str);
    let total: i64 = conn.query_row(
        "SELECT COUNT(*) FROM inscription_jobs WHERE account = ?1 AND (CAST(?2 AS TEXT) IS NULL OR status = ?2) AND parent IS NULL",
        params![account, status],
        |r| r.get(0),
    )?;
    let rows = conn.query_map(
        &format!(
            "{JOB} WHERE account = ?1 AND (CAST(?2 AS TEXT) IS NULL OR status = ?2) AND parent IS NULL
         ORDER BY created_at DESC, id LIMIT ?3 OFFSET ?4"
        ),
        params![account, status, limit as i64, offset as i64],
        job_row,
    )?;
    Ok((rows, total as u64))
}

/// The jobs not yet completed or failed, oldest first (parts apart: their
/// publish job runs them).
pub fn open_jobs(conn: &Conn) -> Result<Vec<Job>, Failure> {
    let rows = conn.query_map(
        &format!("{JOB} WHERE status IN ('pending', 'in_progress') AND parent IS NULL ORDER BY created_at, id"),
        [],
        job_row,
    )?;
    Ok(rows)
}

/// What [`create`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Created {
    /// Stored and charged.
    Done(Box<Job>),
    /// A request with the same idempotency key made this job already.
    Replayed(Box<Job>),
    /// The balance does not cover it: nothing stored.
    Short { balance: i64, shortfall: i64 },
    /// The account has this many jobs open already.
    Busy(usize),
    /// The quote was used by another job.
    QuoteUsed,
    /// The idempotency key was used with another request: nothing stored.
    KeyReused,
}

/// Stores `job` with its `content` and charges it, unless its
/// idempotency `key` names another request, a job of the same account and
/// key exists (then that one), the account already has `max_open` jobs
/// open, or its balance is short. A refusal stores nothing.
pub fn create(
    conn: &Conn,
    job: &Job,
    content: &[u8],
    key: Option<&idempotency::Key>,
    max_open: usize,
) -> Result<Created, Failure> {
    if let Some(key) = key {
        if idempotency::judge(conn, key)? == idempotency::Claimed::Reused {
            return Ok(Created::KeyReused);
        }
        let found = conn
            .query_row(
                &format!("{JOB} WHERE account = ?1 AND idempotency_key = ?2"),
                params![job.account, key.key],
                job_row,
            )
            .optional()?;
        if let Some(found) = found {
            return Ok(Created::Replayed(Box::new(found)));
        }
    }
    let open: i64 = conn.query_row(
        "SELECT COUNT(*) FROM inscription_jobs
         WHERE account = ?1 AND status IN ('pending', 'in_progress') AND parent IS NULL",
        [&job.account],
        |r| r.get(0),
    )?;
    if open as usize >= max_open {
        return Ok(Created::Busy(open as usize));
    }
    // The quote and the debit are written as they go: a refusal undoes both.
    super::all_or_nothing(conn, || create_steps(conn, job, content, key), |c| matches!(c, Created::Done(_)))
}

fn create_steps(conn: &Conn, job: &Job, content: &[u8], key: Option<&idempotency::Key>) -> Result<Created, Failure> {
    if let Some(quote) = &job.quote_id {
        let used = conn.execute(
            "UPDATE inscription_quotes SET used_by = ?2 WHERE id = ?1 AND used_by IS NULL",
            params![quote, job.id],
        )?;
        if used == 0 {
            return Ok(Created::QuoteUsed);
        }
    }
    if let Err(Short { balance, shortfall }) = credits::charge(conn, billed(job), job.created_at)? {
        return Ok(Created::Short { balance, shortfall });
    }
    insert(conn, job, content)?;
    if let Some(key) = key {
        idempotency::record(conn, key, job.created_at)?;
    }
    Ok(Created::Done(Box::new(job.clone())))
}

fn insert(conn: &Conn, job: &Job, content: &[u8]) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO inscription_jobs
         (id, account, idempotency_key, quote_id, status, mode, file_name, mime, size_bytes, content, content_hash,
          messages, credits, usd_cents, written, created_at, updated_at, parent)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, 0, ?15, ?15, ?16)",
        params![
            job.id,
            job.account,
            job.idempotency_key,
            job.quote_id,
            job.status.as_str(),
            job.mode,
            job.file_name,
            job.mime,
            job.size_bytes,
            content,
            job.content_hash,
            job.messages,
            job.credits,
            job.usd_cents,
            job.created_at,
            job.parent
        ],
    )?;
    Ok(())
}

/// Stores `part` (a file of the publish job `part.parent`, charged with
/// it: `credits` 0) with its `content`.
pub fn create_part(conn: &Conn, part: &Job, content: &[u8]) -> Result<(), Failure> {
    debug_assert!(part.parent.is_some() && part.credits == 0, "a part is charged with its publish job");
    insert(conn, part, content)
}

/// The parts of publish job `parent`, by id (the publish job knows their
/// order).
pub fn parts(conn: &Conn, parent: &str) -> Result<Vec<Job>, Failure> {
    let rows = conn.query_map(&format!("{JOB} WHERE parent = ?1 ORDER BY id"), [parent], job_row)?;
    Ok(rows)
}

/// A step of a job, stored before (`Sending`) or after (`Reached`) it is
/// taken on the network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// The topic is about to be created as transaction `tx`.
    CreatingTopic {
        tx: String,
    },
    /// The topic reached consensus.
    TopicCreated {
        topic: String,
    },
    /// Message `written` is about to be sent as transaction `tx`.
    SendingMessage {
        tx: String,
    },
    /// Message `written` reached consensus.
    MessageWritten,
    Completed,
}

/// Records `step` of job `id` at `at` (ms).
pub fn step(conn: &Conn, id: &str, step: &Step, at: i64) -> Result<(), Failure> {
    let changed = match step {
        Step::CreatingTopic { tx } => conn.execute(
            "UPDATE inscription_jobs SET status = 'in_progress', topic_tx = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, tx, at],
        )?,
        Step::TopicCreated { topic } => conn.execute(
            "UPDATE inscription_jobs SET topic_id = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, topic, at],
        )?,
        Step::SendingMessage { tx } => conn.execute(
            "UPDATE inscription_jobs SET pending_tx = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, tx, at],
        )?,
        Step::MessageWritten => conn.execute(
            "UPDATE inscription_jobs SET written = written + 1, pending_tx = NULL, updated_at = ?2 WHERE id = ?1",
            params![id, at],
        )?,
        Step::Completed => conn.execute(
            "UPDATE inscription_jobs SET status = 'completed', updated_at = ?2 WHERE id = ?1",
            params![id, at],
        )?,
    };
    if changed != 1 {
        return Err(Failure::Corrupt(format!("inscription job {id} is not stored")));
    }
    Ok(())
}

/// Fails job `id` for `why` and refunds its credits, once.
pub fn fail(conn: &Conn, id: &str, why: &str, at: i64) -> Result<(), Failure> {
    let Some(job) = job(conn, id)? else { return Err(Failure::Corrupt(format!("inscription job {id} is not stored"))) };
    if matches!(job.status, Status::Completed | Status::Failed) {
        return Ok(());
    }
    conn.execute(
        "UPDATE inscription_jobs SET status = 'failed', failure = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, why, at],
    )?;
    if job.credits == 0 {
        // A part: its publish job is refunded.
        return Ok(());
    }
    credits::refund(conn, billed(&job), at)
}

/// How job `job` is charged.
fn billed(job: &Job) -> Billed<'_> {
    Billed {
        kind: "inscription",
        id: &job.id,
        reason: "content inscription",
        account: &job.account,
        credits: job.credits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credits::{Change, Kind};

    fn store(engine: crate::Dialect) -> (crate::testing::Scratch, Conn) {
        let (dir, conn) = crate::testing::migrated(engine);
        let grant = Change {
            account: "0.0.1001".into(),
            kind: Kind::Grant,
            credits: 10,
            idempotency_key: "g".into(),
            reason: "grant".into(),
            reference: None,
        };
        credits::post(&conn, &grant, 0).unwrap();
        (dir, conn)
    }

    fn job(id: &str, key: Option<&str>, credits: i64) -> Job {
        Job {
            id: id.into(),
            account: "0.0.1001".into(),
            idempotency_key: key.map(str::to_string),
            quote_id: None,
            status: Status::Pending,
            mode: "file".into(),
            file_name: None,
            mime: "text/plain".into(),
            size_bytes: 5,
            content_hash: "h".into(),
            messages: 1,
            credits,
            usd_cents: 1,
            topic_tx: None,
            topic_id: None,
            written: 0,
            pending_tx: None,
            failure: None,
            parent: None,
            created_at: 1,
            updated_at: 1,
        }
    }

    #[test]
    fn a_job_is_charged_once_bounded_and_refunded_once_when_it_fails() {
        for engine in crate::testing::ENGINES {
            let (_scratch, conn) = store(engine);
            let created = |j: Job, digest: &str, max_open| {
                let key = j.idempotency_key.clone().map(|key| idempotency::Key {
                    account: j.account.clone(),
                    scope: "inscription",
                    key,
                    digest: digest.into(),
                });
                create(&conn, &j, b"hello", key.as_ref(), max_open).unwrap()
            };
            assert!(matches!(created(job("a", Some("k"), 4), "d1", 2), Created::Done(_)));
            assert!(
                matches!(created(job("b", Some("k"), 4), "d1", 2), Created::Replayed(j) if j.id == "a"),
                "same key"
            );
            assert_eq!(created(job("b", Some("k"), 4), "d2", 2), Created::KeyReused, "the key with another request");
            assert!(matches!(created(job("c", None, 7), "", 2), Created::Short { balance: 6, shortfall: 1 }));
            assert!(matches!(created(job("d", None, 1), "", 2), Created::Done(_)));
            assert!(matches!(created(job("e", None, 1), "", 2), Created::Busy(2)), "two open already");
            assert_eq!(credits::balance(&conn, "0.0.1001").unwrap(), 5);
            fail(&conn, "a", "refused", 2).unwrap();
            fail(&conn, "a", "refused", 3).unwrap();
            assert_eq!(credits::balance(&conn, "0.0.1001").unwrap(), 9, "refunded once");
            let failed = super::job(&conn, "a").unwrap().unwrap();
            assert_eq!((failed.status, failed.failure.as_deref()), (Status::Failed, Some("refused")));
            assert_eq!(content(&conn, "a").unwrap().unwrap(), b"hello");
        }
    }

    #[test]
    fn steps_are_stored_in_order_and_a_completed_job_is_not_failed() {
        for engine in crate::testing::ENGINES {
            let (_scratch, conn) = store(engine);
            create(&conn, &job("a", None, 1), b"x", None, 4).unwrap();
            for step_taken in [
                Step::CreatingTopic { tx: "0.0.1003@1.000000001".into() },
                Step::TopicCreated { topic: "0.0.5001".into() },
                Step::SendingMessage { tx: "0.0.1003@1.000000002".into() },
                Step::MessageWritten,
                Step::Completed,
            ] {
                step(&conn, "a", &step_taken, 5).unwrap();
            }
            let done = super::job(&conn, "a").unwrap().unwrap();
            assert_eq!(
                (done.status, done.written, done.pending_tx, done.topic_id.as_deref()),
                (Status::Completed, 1, None, Some("0.0.5001"))
            );
            fail(&conn, "a", "late", 6).unwrap();
            assert_eq!(super::job(&conn, "a").unwrap().unwrap().status, Status::Completed);
            assert_eq!(credits::balance(&conn, "0.0.1001").unwrap(), 9, "no refund for a completed job");
            assert!(open_jobs(&conn).unwrap().is_empty());
            assert!(step(&conn, "missing", &Step::Completed, 7).is_err());
        }
    }
}
