//! The credit ledger: every change of a balance is a transaction with an
//! idempotency key; a balance is the sum of an account's completed
//! transactions and is never negative.

use crate::params;
use crate::sql::ToValue;
use crate::sql::{Conn, Optional, Row};

use super::{closed, Failure};

shared::vocabulary! {
    /// What a transaction is.
    Kind, KINDS {
        Purchase = "purchase",
        Debit = "debit",
        Refund = "refund",
        Redemption = "redemption",
        Grant = "grant",
    }
}

shared::vocabulary! {
    /// Where a transaction stands.
    Status, STATUSES {
        Pending = "pending",
        Completed = "completed",
        Failed = "failed",
    }
}

impl Kind {
    /// Whether the kind takes credits away (its amount is stored negative).
    pub fn spends(self) -> bool {
        self == Kind::Debit
    }
}

/// A change to post: `credits` is the magnitude (the kind gives the sign).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub account: String,
    pub kind: Kind,
    pub credits: i64,
    pub idempotency_key: String,
    /// What it was for (`registration`, `chat message`, …).
    pub reason: String,
    /// What it refers to (a UAID, a transaction id), if anything.
    pub reference: Option<String>,
}

/// One stored transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub id: i64,
    pub account: String,
    pub kind: Kind,
    /// Signed: debits are negative.
    pub amount: i64,
    /// The balance once it was posted.
    pub balance_after: i64,
    pub status: Status,
    pub idempotency_key: String,
    pub reason: String,
    pub reference: Option<String>,
    pub created_at: i64,
}

/// The outcome of [`post`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Posted {
    /// Stored now, or found stored under the same key (`replayed`).
    Done { entry: Entry, balance: i64, replayed: bool },
    /// A debit larger than the balance: nothing stored.
    Short { balance: i64, shortfall: i64 },
    /// The key was used for a different change: nothing stored.
    Conflict { entry: Entry },
}

/// A job that is charged when it is made and refunded if it fails (an
/// inscription, a skill publish, a review): its kind (the transactions'
/// key prefix: `inscription`, `skill-publish`, …), its id (their
/// reference) and what it is for.
#[derive(Clone, Copy, Debug)]
pub struct Billed<'a> {
    pub kind: &'a str,
    pub id: &'a str,
    pub reason: &'a str,
    pub account: &'a str,
    pub credits: i64,
}

/// A balance that does not cover a charge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Short {
    pub balance: i64,
    pub shortfall: i64,
}

/// Charges `job` at `at`, once (keyed `<kind>:<id>`): `Err(Short)` when
/// the balance does not cover it, nothing stored.
pub fn charge(conn: &Conn, job: Billed<'_>, at: i64) -> Result<Result<(), Short>, Failure> {
    let debit = Change {
        account: job.account.to_string(),
        kind: Kind::Debit,
        credits: job.credits,
        idempotency_key: format!("{}:{}", job.kind, job.id),
        reason: job.reason.to_string(),
        reference: Some(job.id.to_string()),
    };
    match post(conn, &debit, at)? {
        Posted::Done { .. } => Ok(Ok(())),
        Posted::Short { balance, shortfall } => Ok(Err(Short { balance, shortfall })),
        Posted::Conflict { .. } => Err(Failure::Corrupt(format!("{} {} was charged already", job.kind, job.id))),
    }
}

/// Refunds `job`'s charge at `at`, once (keyed `<kind>-refund:<id>`).
pub fn refund(conn: &Conn, job: Billed<'_>, at: i64) -> Result<(), Failure> {
    let refund = Change {
        account: job.account.to_string(),
        kind: Kind::Refund,
        credits: job.credits,
        idempotency_key: format!("{}-refund:{}", job.kind, job.id),
        reason: format!("{} failed", job.reason),
        reference: Some(job.id.to_string()),
    };
    match post(conn, &refund, at)? {
        Posted::Done { .. } => Ok(()),
        other => Err(Failure::Corrupt(format!("refund of {} {}: {other:?}", job.kind, job.id))),
    }
}

/// Posts `change` (completed at once): a debit only when the balance
/// covers it. Run it inside [`super::Store::write`], whose single writer
/// makes the check and the spending one step.
pub fn post(conn: &Conn, change: &Change, now: i64) -> Result<Posted, Failure> {
    if change.credits <= 0 {
        return Err(Failure::Corrupt(format!("a transaction of {} credits", change.credits)));
    }
    let amount = if change.kind.spends() { -change.credits } else { change.credits };
    if let Some(entry) = find(conn, &change.account, &change.idempotency_key)? {
        let same = entry.kind == change.kind && entry.amount == amount && entry.reference == change.reference;
        if !same {
            return Ok(Posted::Conflict { entry });
        }
        let balance = balance(conn, &change.account)?;
        return Ok(Posted::Done { entry, balance, replayed: true });
    }
    let before = balance(conn, &change.account)?;
    let after = before + amount;
    if after < 0 {
        return Ok(Posted::Short { balance: before, shortfall: -after });
    }
    conn.execute(
        "INSERT INTO accounts (account_id, balance, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (account_id) DO UPDATE SET balance = ?2",
        params![change.account, after, now],
    )?;
    let id = conn.query_row(
        "INSERT INTO credit_transactions
             (account_id, kind, amount, balance_after, status, idempotency_key, reason, reference, created_at)
         VALUES (?1, ?2, ?3, ?4, 'completed', ?5, ?6, ?7, ?8) RETURNING id",
        params![
            change.account,
            change.kind.as_str(),
            amount,
            after,
            change.idempotency_key,
            change.reason,
            change.reference,
            now
        ],
        |r| r.get(0),
    )?;
    let entry = Entry {
        id,
        account: change.account.clone(),
        kind: change.kind,
        amount,
        balance_after: after,
        status: Status::Completed,
        idempotency_key: change.idempotency_key.clone(),
        reason: change.reason.clone(),
        reference: change.reference.clone(),
        created_at: now,
    };
    Ok(Posted::Done { entry, balance: after, replayed: false })
}

/// The account's balance (0 for an account never seen).
pub fn balance(conn: &Conn, account: &str) -> Result<i64, Failure> {
    let found =
        conn.query_row("SELECT balance FROM accounts WHERE account_id = ?1", [account], |r| r.get(0)).optional()?;
    Ok(found.unwrap_or(0))
}

/// The balance as the ledger's sum, for checks: always equal to
/// [`balance`].
pub fn ledger_sum(conn: &Conn, account: &str) -> Result<i64, Failure> {
    conn.query_row(
        "SELECT COALESCE(SUM(amount), 0) FROM credit_transactions WHERE account_id = ?1 AND status = 'completed'",
        [account],
        |r| r.get(0),
    )
}

fn find(conn: &Conn, account: &str, key: &str) -> Result<Option<Entry>, Failure> {
    let sql = format!("{SELECT} WHERE account_id = ?1 AND idempotency_key = ?2");
    conn.query_row(&sql, [account, key], entry).optional()
}

/// Which transactions to list.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub account: String,
    pub kind: Option<Kind>,
    /// Only debits (`true`) or only credits (`false`).
    pub spends: Option<bool>,
    pub status: Option<Status>,
    /// Inclusive bounds, in milliseconds.
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub limit: usize,
    pub offset: usize,
}

/// A page of an account's transactions, newest first, and how many match.
pub fn transactions(conn: &Conn, filter: &Filter) -> Result<(Vec<Entry>, u64), Failure> {
    // A filter left out is NULL; the casts give PostgreSQL the type of a
    // parameter that is only tested for NULL.
    let conditions = "account_id = ?1
         AND (CAST(?2 AS TEXT) IS NULL OR kind = ?2) AND (CAST(?3 AS TEXT) IS NULL OR status = ?3)
         AND (CAST(?4 AS BIGINT) IS NULL OR created_at >= ?4) AND (CAST(?5 AS BIGINT) IS NULL OR created_at <= ?5)
         AND (CAST(?6 AS BIGINT) IS NULL OR (CASE WHEN amount < 0 THEN 1 ELSE 0 END) = ?6)";
    let kind = filter.kind.map(Kind::as_str);
    let status = filter.status.map(Status::as_str);
    let matching = params![filter.account, kind, status, filter.start, filter.end, filter.spends];
    let count = format!("SELECT COUNT(*) FROM credit_transactions WHERE {conditions}");
    let total: i64 = conn.query_row(&count, matching, |r| r.get(0))?;
    let (limit, offset) = (filter.limit as i64, filter.offset as i64);
    let page: Vec<&dyn ToValue> = matching.iter().copied().chain([&limit as &dyn ToValue, &offset]).collect();
    let sql = format!("{SELECT} WHERE {conditions} ORDER BY created_at DESC, id DESC LIMIT ?7 OFFSET ?8");
    let entries = conn.query_map(&sql, page.as_slice(), entry)?;
    Ok((entries, total as u64))
}

const SELECT: &str =
    "SELECT id, account_id, kind, amount, balance_after, status, idempotency_key, reason, reference, created_at
     FROM credit_transactions";

/// A row of [`SELECT`]; a kind or status outside its vocabulary is a
/// conversion error naming the column.
fn entry(r: &Row<'_>) -> Result<Entry, Failure> {
    Ok(Entry {
        id: r.get(0)?,
        account: r.get(1)?,
        kind: closed(r, 2)?,
        amount: r.get(3)?,
        balance_after: r.get(4)?,
        status: closed(r, 5)?,
        idempotency_key: r.get(6)?,
        reason: r.get(7)?,
        reference: r.get(8)?,
        created_at: r.get(9)?,
    })
}
