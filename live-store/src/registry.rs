//! Self-registered agents, their registration attempts and the delivery
//! of each attempt to its additional registries.
//!
//! A registration, update or deletion is one write: the billing, the
//! agent's row, the journal's outbox event and the attempt are stored
//! together or not at all.

use crate::params;
use crate::sql::{Conn, Optional, Row};
use broker_model::journal::Event;
use broker_model::Agent;

use super::credits::{self, Change as Credit, Kind, Posted};
use super::{closed, idempotency, outbox, Failure};

shared::vocabulary! {
    /// What an attempt did.
    Mode, MODES {
        Register = "register",
        Update = "update",
    }
}

shared::vocabulary! {
    /// Where one additional registry of an attempt stands.
    Delivery, DELIVERIES {
        Pending = "pending",
        InProgress = "in_progress",
        Completed = "completed",
        Failed = "failed",
    }
}

/// An agent registered through the api.
#[derive(Clone, Debug, PartialEq)]
pub struct Registration {
    pub agent: Agent,
    pub account: String,
    pub request_hash: Vec<u8>,
    pub seq: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub deleted_at: Option<i64>,
}

/// The attempt a change starts: its id, what it costs, and the additional
/// registries to deliver to as `(key, registry id, credits)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub id: String,
    pub mode: Mode,
    pub base: i64,
    pub additional: Vec<(String, String, i64)>,
}

impl Plan {
    /// A plan with a fresh attempt id.
    pub fn new(mode: Mode, base: i64, additional: Vec<(String, String, i64)>) -> Plan {
        Plan { id: format!("att_{}", shared::http::hex(&super::random::<12>())), mode, base, additional }
    }

    pub fn total(&self) -> i64 {
        self.base + self.additional.iter().map(|(_, _, c)| c).sum::<i64>()
    }
}

/// A registration or update to store.
#[derive(Clone, Debug)]
pub struct Write {
    pub agent: Agent,
    pub account: String,
    pub request_hash: Vec<u8>,
    pub plan: Plan,
    /// The request's idempotency key, if it named one.
    pub key: Option<idempotency::Key>,
    pub now: i64,
}

/// The outcome of [`register`] and [`update`].
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Stored: the journal's `seq` and the attempt's id.
    Done { seq: i64, attempt: String },
    /// Nothing to do: the agent is registered as asked (a retry), with the
    /// last attempt, if any.
    Same { registration: Box<Registration>, attempt: Option<String> },
    /// Another account registered this UAID.
    Taken,
    /// No such agent (or deleted).
    NotFound,
    /// The agent is another account's.
    NotOwner,
    /// The account's credits do not cover the change: nothing stored.
    Short { balance: i64, shortfall: i64 },
    /// The idempotency key was used with another request: nothing stored.
    KeyReused,
}

/// The registration of `uaid`, deleted or not.
/// The account that registered `uaid` here, if one did (and has not
/// deleted it).
pub fn registrant(conn: &Conn, uaid: &str) -> Result<Option<String>, Failure> {
    Ok(find(conn, uaid)?.filter(|r| r.deleted_at.is_none()).map(|r| r.account))
}

pub fn find(conn: &Conn, uaid: &str) -> Result<Option<Registration>, Failure> {
    let sql = "SELECT agent, account_id, request_hash, seq, created_at, updated_at, deleted_at
               FROM registrations WHERE uaid = ?1";
    let row = conn.query_row(sql, [uaid], row).optional()?;
    row.map(parse).transpose()
}

/// A `registrations` row as read, before its agent is parsed.
type Columns = (String, String, Vec<u8>, i64, i64, i64, Option<i64>);

fn row(r: &Row<'_>) -> Result<Columns, Failure> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
}

fn parse(
    (agent, account, request_hash, seq, created_at, updated_at, deleted_at): Columns,
) -> Result<Registration, Failure> {
    let agent = serde_json::from_str(&agent).map_err(|e| Failure::Corrupt(format!("registrations.agent: {e}")))?;
    Ok(Registration { agent, account, request_hash, seq, created_at, updated_at, deleted_at })
}

/// Registers `write.agent` for `write.account`: billed, journaled, and
/// an attempt started. A UAID already registered by the same account is
/// [`Outcome::Same`] (nothing billed); by another, [`Outcome::Taken`].
pub fn register(conn: &Conn, write: &Write) -> Result<Outcome, Failure> {
    keyed(conn, write, register_unkeyed)
}

/// Runs `change` under the write's idempotency key: refused when the key
/// names another request, recorded once the change is done or found done.
fn keyed(
    conn: &Conn,
    write: &Write,
    change: fn(&Conn, &Write) -> Result<Outcome, Failure>,
) -> Result<Outcome, Failure> {
    let Some(key) = &write.key else { return change(conn, write) };
    if idempotency::judge(conn, key)? == idempotency::Claimed::Reused {
        return Ok(Outcome::KeyReused);
    }
    let outcome = change(conn, write)?;
    if matches!(outcome, Outcome::Done { .. } | Outcome::Same { .. }) {
        idempotency::record(conn, key, write.now)?;
    }
    Ok(outcome)
}

fn register_unkeyed(conn: &Conn, write: &Write) -> Result<Outcome, Failure> {
    let uaid = write.agent.uaid.as_str();
    if let Some(existing) = find(conn, uaid)?.filter(|r| r.deleted_at.is_none()) {
        if existing.account != write.account {
            return Ok(Outcome::Taken);
        }
        let attempt = latest_attempt(conn, uaid)?;
        return Ok(Outcome::Same { registration: Box::new(existing), attempt });
    }
    if let Some(short) = charge(conn, write)? {
        return Ok(short);
    }
    let event = Event::Register { agent: Box::new(write.agent.clone()) };
    let seq = outbox::push(conn, write.now, &event)?;
    conn.execute(
        "INSERT INTO registrations (uaid, account_id, agent, request_hash, seq, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
         ON CONFLICT (uaid) DO UPDATE SET account_id = ?2, agent = ?3, request_hash = ?4, seq = ?5,
             created_at = ?6, updated_at = ?6, deleted_at = NULL",
        params![uaid, write.account, json(&write.agent)?, write.request_hash, seq, write.now],
    )?;
    start_attempt(conn, write)?;
    Ok(Outcome::Done { seq, attempt: write.plan.id.clone() })
}

/// Replaces the record of an agent `write.account` registered. The same
/// request again is [`Outcome::Same`] (nothing billed).
pub fn update(conn: &Conn, write: &Write) -> Result<Outcome, Failure> {
    keyed(conn, write, update_unkeyed)
}

fn update_unkeyed(conn: &Conn, write: &Write) -> Result<Outcome, Failure> {
    let uaid = write.agent.uaid.as_str();
    let Some(existing) = find(conn, uaid)?.filter(|r| r.deleted_at.is_none()) else {
        return Ok(Outcome::NotFound);
    };
    if existing.account != write.account {
        return Ok(Outcome::NotOwner);
    }
    if existing.request_hash == write.request_hash {
        let attempt = latest_attempt(conn, uaid)?;
        return Ok(Outcome::Same { registration: Box::new(existing), attempt });
    }
    if let Some(short) = charge(conn, write)? {
        return Ok(short);
    }
    let seq = outbox::push(conn, write.now, &Event::Update { agent: Box::new(write.agent.clone()) })?;
    conn.execute(
        "UPDATE registrations SET agent = ?2, request_hash = ?3, seq = ?4, updated_at = ?5 WHERE uaid = ?1",
        params![uaid, json(&write.agent)?, write.request_hash, seq, write.now],
    )?;
    start_attempt(conn, write)?;
    Ok(Outcome::Done { seq, attempt: write.plan.id.clone() })
}

/// Deletes an agent `account` registered; `Done` carries no attempt.
pub fn delete(conn: &Conn, uaid: &str, account: &str, now: i64) -> Result<Outcome, Failure> {
    let Some(existing) = find(conn, uaid)?.filter(|r| r.deleted_at.is_none()) else {
        return Ok(Outcome::NotFound);
    };
    if existing.account != account {
        return Ok(Outcome::NotOwner);
    }
    let seq = outbox::push(conn, now, &Event::Delete { uaid: uaid.to_string() })?;
    conn.execute("UPDATE registrations SET seq = ?2, deleted_at = ?3 WHERE uaid = ?1", params![uaid, seq, now])?;
    Ok(Outcome::Done { seq, attempt: String::new() })
}

/// Debits the plan's total; `Some(Short)` when the balance is too low.
fn charge(conn: &Conn, write: &Write) -> Result<Option<Outcome>, Failure> {
    let total = write.plan.total();
    if total == 0 {
        return Ok(None);
    }
    let debit = Credit {
        account: write.account.clone(),
        kind: Kind::Debit,
        credits: total,
        idempotency_key: format!("{}:{}", write.plan.mode.as_str(), write.plan.id),
        reason: format!("agent {}", write.plan.mode.as_str()),
        reference: Some(write.agent.uaid.to_string()),
    };
    match credits::post(conn, &debit, write.now)? {
        Posted::Done { .. } => Ok(None),
        Posted::Short { balance, shortfall } => Ok(Some(Outcome::Short { balance, shortfall })),
        Posted::Conflict { entry } => Err(Failure::Corrupt(format!("attempt id reused: {}", entry.idempotency_key))),
    }
}

fn json(agent: &Agent) -> Result<String, Failure> {
    serde_json::to_string(agent).map_err(|e| Failure::Corrupt(e.to_string()))
}

fn start_attempt(conn: &Conn, write: &Write) -> Result<(), Failure> {
    let plan = &write.plan;
    let additional: i64 = plan.additional.iter().map(|(_, _, c)| c).sum();
    let done = plan.additional.is_empty().then_some(write.now);
    conn.execute(
        "INSERT INTO registration_attempts
             (id, uaid, agent_id, account_id, mode, registry, credits_base, credits_additional, started_at, completed_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            plan.id,
            write.agent.uaid.as_str(),
            write.agent.id,
            write.account,
            plan.mode.as_str(),
            write.agent.registry,
            plan.base,
            additional,
            write.now,
            done
        ],
    )?;
    for (key, registry, credits) in &plan.additional {
        conn.execute(
            "INSERT INTO attempt_registries (attempt_id, key, registry_id, credits, status, next_try_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5)",
            params![plan.id, key, registry, credits, write.now],
        )?;
    }
    Ok(())
}

/// The newest attempt for `uaid`.
pub fn latest_attempt(conn: &Conn, uaid: &str) -> Result<Option<String>, Failure> {
    let sql = "SELECT id FROM registration_attempts WHERE uaid = ?1 ORDER BY started_at DESC, rowid DESC LIMIT 1";
    conn.query_row(sql, [uaid], |r| r.get(0)).optional()
}

/// An attempt and its deliveries.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    pub id: String,
    pub uaid: String,
    pub agent_id: String,
    pub account: String,
    pub mode: Mode,
    pub registry: String,
    pub credits_base: i64,
    pub credits_additional: i64,
    pub started_at: i64,
    pub completed_at: Option<i64>,
    pub deliveries: Vec<Delivered>,
}

/// One additional registry of an attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivered {
    pub key: String,
    pub registry: String,
    pub credits: i64,
    pub status: Delivery,
    pub tries: i64,
    pub error: Option<String>,
    pub agent_id: Option<String>,
    pub agent_uri: Option<String>,
    pub updated_at: i64,
}

/// Where an attempt as a whole stands (the progress record's `status`).
impl Attempt {
    pub fn status(&self) -> &'static str {
        let open = self.deliveries.iter().any(|d| matches!(d.status, Delivery::Pending | Delivery::InProgress));
        if open {
            "pending"
        } else if self.deliveries.iter().any(|d| d.status == Delivery::Failed) {
            "partial"
        } else {
            "completed"
        }
    }
}

pub fn attempt(conn: &Conn, id: &str) -> Result<Option<Attempt>, Failure> {
    let sql = "SELECT id, uaid, agent_id, account_id, mode, registry, credits_base, credits_additional,
                      started_at, completed_at
               FROM registration_attempts WHERE id = ?1";
    let found = conn
        .query_row(sql, [id], |r| {
            Ok(Attempt {
                id: r.get(0)?,
                uaid: r.get(1)?,
                agent_id: r.get(2)?,
                account: r.get(3)?,
                mode: closed(r, 4)?,
                registry: r.get(5)?,
                credits_base: r.get(6)?,
                credits_additional: r.get(7)?,
                started_at: r.get(8)?,
                completed_at: r.get(9)?,
                deliveries: Vec::new(),
            })
        })
        .optional()?;
    let Some(mut attempt) = found else { return Ok(None) };
    let rows = conn.query_map(
        "SELECT key, registry_id, credits, status, tries, error, agent_id, agent_uri, updated_at
         FROM attempt_registries WHERE attempt_id = ?1 ORDER BY rowid",
        [id],
        |r| {
            Ok(Delivered {
                key: r.get(0)?,
                registry: r.get(1)?,
                credits: r.get(2)?,
                status: closed(r, 3)?,
                tries: r.get(4)?,
                error: r.get(5)?,
                agent_id: r.get(6)?,
                agent_uri: r.get(7)?,
                updated_at: r.get(8)?,
            })
        },
    )?;
    attempt.deliveries = rows;
    Ok(Some(attempt))
}

/// A delivery due now: what to send where.
#[derive(Clone, Debug, PartialEq)]
pub struct Due {
    pub attempt: String,
    pub key: String,
    pub mode: Mode,
    pub tries: i64,
    /// The agent as registered now; `None` once it was deleted.
    pub agent: Option<Agent>,
}

/// Claims up to `limit` deliveries due by `now`: each is marked in
/// progress with one more try, so that no other worker takes it.
pub fn claim_due(conn: &Conn, now: i64, limit: usize) -> Result<Vec<Due>, Failure> {
    let claimed = conn.query_map(
        "UPDATE attempt_registries SET status = 'in_progress', tries = tries + 1, updated_at = ?1
         WHERE rowid IN (SELECT rowid FROM attempt_registries WHERE status = 'pending' AND next_try_at <= ?1
                         ORDER BY next_try_at LIMIT ?2)
         RETURNING attempt_id, key, tries",
        params![now, limit as i64],
        |r| Ok((r.get::<String>(0)?, r.get::<String>(1)?, r.get(2)?)),
    )?;
    let mut out = Vec::with_capacity(claimed.len());
    for (attempt, key, tries) in claimed {
        let (uaid, mode): (String, Mode) =
            conn.query_row("SELECT uaid, mode FROM registration_attempts WHERE id = ?1", [&attempt], |r| {
                Ok((r.get(0)?, closed(r, 1)?))
            })?;
        let agent = find(conn, &uaid)?.filter(|r| r.deleted_at.is_none()).map(|r| r.agent);
        out.push(Due { attempt, key, mode, tries, agent });
    }
    Ok(out)
}

/// How a delivery ended this time.
#[derive(Clone, Debug, PartialEq)]
pub enum Settle {
    Completed {
        agent_id: Option<String>,
        agent_uri: Option<String>,
    },
    /// Try again at `at` (ms).
    Retry {
        at: i64,
        error: String,
    },
    /// For good: its credits are refunded.
    Failed {
        error: String,
    },
}

/// Records a delivery's outcome; the attempt completes with its last.
pub fn settle(conn: &Conn, attempt: &str, key: &str, outcome: &Settle, now: i64) -> Result<(), Failure> {
    let (status, next, error, agent_id, agent_uri) = match outcome {
        Settle::Completed { agent_id, agent_uri } => ("completed", now, None, agent_id.clone(), agent_uri.clone()),
        Settle::Retry { at, error } => ("pending", *at, Some(error.clone()), None, None),
        Settle::Failed { error } => ("failed", now, Some(error.clone()), None, None),
    };
    conn.execute(
        "UPDATE attempt_registries SET status = ?3, next_try_at = ?4, error = ?5, agent_id = ?6, agent_uri = ?7,
             updated_at = ?8
         WHERE attempt_id = ?1 AND key = ?2",
        params![attempt, key, status, next, error, agent_id, agent_uri, now],
    )?;
    if let Settle::Failed { .. } = outcome {
        let (account, uaid, credits): (String, String, i64) = conn.query_row(
            "SELECT a.account_id, a.uaid, r.credits FROM registration_attempts a
             JOIN attempt_registries r ON r.attempt_id = a.id WHERE a.id = ?1 AND r.key = ?2",
            [attempt, key],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        if credits > 0 {
            let refund = Credit {
                account,
                kind: Kind::Refund,
                credits,
                idempotency_key: format!("refund:{attempt}:{key}"),
                reason: format!("additional registry {key} failed"),
                reference: Some(uaid),
            };
            credits::post(conn, &refund, now)?;
        }
    }
    conn.execute(
        "UPDATE registration_attempts SET completed_at = ?2
         WHERE id = ?1 AND completed_at IS NULL AND NOT EXISTS
             (SELECT 1 FROM attempt_registries WHERE attempt_id = ?1 AND status IN ('pending', 'in_progress'))",
        params![attempt, now],
    )?;
    Ok(())
}

/// At start: deliveries a previous run left in progress are due again
/// (the api died mid-call; the registry may have it, so the next call is
/// the same request again). Returns how many.
pub fn resume(conn: &Conn, now: i64) -> Result<usize, Failure> {
    conn.execute(
        "UPDATE attempt_registries SET status = 'pending', next_try_at = ?1, updated_at = ?1 WHERE status = 'in_progress'",
        [now],
    )
}

/// The earliest time a pending delivery is due, if any.
pub fn next_due(conn: &Conn) -> Result<Option<i64>, Failure> {
    conn.query_row("SELECT MIN(next_try_at) FROM attempt_registries WHERE status = 'pending'", [], |r| r.get(0))
}

/// Live changes after `seq` (a build's journal point), in order: each
/// UAID's last change, its agent or `None` when deleted.
pub fn changes_after(conn: &Conn, seq: i64) -> Result<Vec<(i64, String, Option<Agent>)>, Failure> {
    let rows = conn.query_map(
        "SELECT uaid, seq, agent, deleted_at FROM registrations WHERE seq > ?1 ORDER BY seq",
        [seq],
        |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?, r.get::<String>(2)?, r.get::<Option<i64>>(3)?)),
    )?;
    let mut out = Vec::new();
    for row in rows {
        let (uaid, seq, agent, deleted) = row;
        let agent = match deleted {
            Some(_) => None,
            None => Some(serde_json::from_str(&agent).map_err(|e| Failure::Corrupt(format!("{uaid}: {e}")))?),
        };
        out.push((seq, uaid, agent));
    }
    Ok(out)
}
