//! Payment intents, created pending and settled once by what pays them;
//! and redemptions of points, which pay credits for an HCS-20 balance.
//!
//! Intents:
//! Completing one posts its purchase to the credit ledger in the same
//! transaction, under an idempotency key made of the payment's own
//! reference, so a payment seen twice (a webhook retried, a watcher round
//! repeated after a restart) issues its credits once.

use crate::params;
use crate::sql::{Conn, Optional, Row};

use super::credits::{self, Change, Kind, Posted};
use super::{closed, idempotency, Failure};

shared::vocabulary! {
    /// How an intent is paid.
    Method, METHODS {
        Native = "native",
        Card = "card",
    }
}

shared::vocabulary! {
    /// Where an intent stands.
    State, STATES {
        Pending = "pending",
        Completed = "completed",
        Expired = "expired",
        Failed = "failed",
    }
}

/// One intent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intent {
    pub id: String,
    pub method: Method,
    pub account: String,
    pub credits: i64,
    pub amount: i64,
    pub currency: String,
    pub reference: String,
    pub idempotency_key: Option<String>,
    /// The answer given at creation (JSON).
    pub answer: String,
    pub state: State,
    pub outcome: Option<String>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
}

/// The outcome of [`create`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    New(Intent),
    /// The account's idempotency key already names this intent.
    Existing(Intent),
    /// The key was used with another request: nothing stored.
    KeyReused,
}

/// Stores `intent` unless its idempotency `key` names another request or
/// already names an intent (then that one).
pub fn create(conn: &Conn, intent: &Intent, key: Option<&idempotency::Key>) -> Result<Created, Failure> {
    if let Some(key) = key {
        if idempotency::judge(conn, key)? == idempotency::Claimed::Reused {
            return Ok(Created::KeyReused);
        }
        if let Some(held) = by_key(conn, &intent.account, &key.key)? {
            return Ok(Created::Existing(held));
        }
        idempotency::record(conn, key, intent.created_at)?;
    }
    conn.execute(
        "INSERT INTO payment_intents (id, method, account_id, credits, amount, currency, reference,
             idempotency_key, answer, status, outcome, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            intent.id,
            intent.method.as_str(),
            intent.account,
            intent.credits,
            intent.amount,
            intent.currency,
            intent.reference,
            intent.idempotency_key,
            intent.answer,
            intent.state.as_str(),
            intent.outcome,
            intent.created_at,
            intent.expires_at,
        ],
    )?;
    Ok(Created::New(intent.clone()))
}

pub fn by_key(conn: &Conn, account: &str, key: &str) -> Result<Option<Intent>, Failure> {
    let sql = format!("{SELECT} WHERE account_id = ?1 AND idempotency_key = ?2");
    conn.query_row(&sql, [account, key], intent).optional()
}

pub fn by_reference(conn: &Conn, method: Method, reference: &str) -> Result<Option<Intent>, Failure> {
    let sql = format!("{SELECT} WHERE method = ?1 AND reference = ?2");
    conn.query_row(&sql, [method.as_str(), reference], intent).optional()
}

/// The pending intents paid by `method`, oldest first.
pub fn pending(conn: &Conn, method: Method) -> Result<Vec<Intent>, Failure> {
    let sql = format!("{SELECT} WHERE method = ?1 AND status = 'pending' ORDER BY created_at, id");
    let rows = conn.query_map(&sql, [method.as_str()], intent)?;
    Ok(rows)
}

/// How a payment settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settlement {
    /// Paid: the credits are issued.
    Paid,
    /// Not paid, for good: `expired` or `failed`, with why.
    Unpaid(State, String),
}

/// Settles a pending intent: completes it and posts its purchase, or
/// marks it expired or failed. An intent already settled is left as it
/// is; the answer is its state.
pub fn settle(conn: &Conn, id: &str, settlement: &Settlement, now: i64) -> Result<State, Failure> {
    let sql = format!("{SELECT} WHERE id = ?1");
    let Some(held) = conn.query_row(&sql, [id], intent).optional()? else {
        return Err(Failure::Corrupt(format!("no payment intent {id}")));
    };
    if held.state != State::Pending {
        return Ok(held.state);
    }
    let (state, outcome) = match settlement {
        Settlement::Paid => {
            let change = Change {
                account: held.account.clone(),
                kind: Kind::Purchase,
                credits: held.credits,
                idempotency_key: format!("{}:{}", held.method.as_str(), held.reference),
                reason: match held.method {
                    Method::Native => "HBAR purchase".to_string(),
                    Method::Card => "card purchase".to_string(),
                },
                reference: Some(held.reference.clone()),
            };
            match credits::post(conn, &change, now)? {
                Posted::Done { .. } => {}
                other => return Err(Failure::Corrupt(format!("purchase of intent {id} not posted: {other:?}"))),
            }
            (State::Completed, None)
        }
        Settlement::Unpaid(state, why) => (*state, Some(why.clone())),
    };
    conn.execute(
        "UPDATE payment_intents SET status = ?2, outcome = ?3, settled_at = ?4 WHERE id = ?1",
        params![id, state.as_str(), outcome, now],
    )?;
    Ok(state)
}

/// Points of `token` the account has redeemed so far.
pub fn redeemed(conn: &Conn, account: &str, token: &str) -> Result<i64, Failure> {
    conn.query_row(
        "SELECT COALESCE(SUM(points), 0) FROM point_redemptions WHERE account_id = ?1 AND token = ?2",
        [account, token],
        |r| r.get(0),
    )
}

/// A redemption to make: `points` of `token` (at most what remains of
/// `held`, the account's balance in the build) for `credits_per_point`
/// credits each; all that remains when `points` is `None`.
#[derive(Clone, Debug)]
pub struct Redeem {
    pub id: String,
    pub account: String,
    pub token: String,
    pub held: i64,
    pub points: Option<i64>,
    pub credits_per_point: i64,
}

/// The outcome of [`redeem`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redeemed {
    Done {
        points: i64,
        credits: i64,
        balance: i64,
    },
    /// Fewer points remain than asked (or none).
    Short {
        available: i64,
    },
}

/// Redeems in one step: what remains is computed and spent inside the
/// store's single writer, so concurrent redemptions never spend a point
/// twice.
pub fn redeem(conn: &Conn, redeem: &Redeem, now: i64) -> Result<Redeemed, Failure> {
    let available = (redeem.held - redeemed(conn, &redeem.account, &redeem.token)?).max(0);
    let points = redeem.points.unwrap_or(available);
    if points <= 0 || points > available {
        return Ok(Redeemed::Short { available });
    }
    let credits = points * redeem.credits_per_point;
    conn.execute(
        "INSERT INTO point_redemptions (id, account_id, token, points, credits, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![redeem.id, redeem.account, redeem.token, points, credits, now],
    )?;
    let change = Change {
        account: redeem.account.clone(),
        kind: Kind::Redemption,
        credits,
        idempotency_key: format!("redeem:{}", redeem.id),
        reason: format!("{points} points of {} redeemed", redeem.token),
        reference: Some(redeem.token.clone()),
    };
    match credits::post(conn, &change, now)? {
        Posted::Done { balance, .. } => Ok(Redeemed::Done { points, credits, balance }),
        other => Err(Failure::Corrupt(format!("redemption {} not posted: {other:?}", redeem.id))),
    }
}

const SELECT: &str = "SELECT id, method, account_id, credits, amount, currency, reference, idempotency_key,
     answer, status, outcome, created_at, expires_at FROM payment_intents";

fn intent(r: &Row<'_>) -> Result<Intent, Failure> {
    Ok(Intent {
        id: r.get(0)?,
        method: closed(r, 1)?,
        account: r.get(2)?,
        credits: r.get(3)?,
        amount: r.get(4)?,
        currency: r.get(5)?,
        reference: r.get(6)?,
        idempotency_key: r.get(7)?,
        answer: r.get(8)?,
        state: closed(r, 9)?,
        outcome: r.get(10)?,
        created_at: r.get(11)?,
        expires_at: r.get(12)?,
    })
}
