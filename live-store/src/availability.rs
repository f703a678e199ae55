//! Availability checks (`crate::broker::availability`): one row per
//! agent with its last check and the running uptime of the endpoint
//! checked, and what the agent shows, journaled when it changes.
//!
//! **What is published.** A check changes what an agent shows when it is
//! the agent's first, checks another endpoint, turns its status (`online`
//! or `offline`), or moves its uptime a whole point or more from the one
//! shown. Only then is an `availability` event journaled (the next build
//! folds it) and handed back for the live overlay: an agent that stays as
//! it was costs a row update, not an event, so a steady round of a
//! million agents adds nothing to the journal.

use crate::params;
use crate::sql::{Conn, Optional, Row};
use broker_model::availability::{uptime_after, Measurement, Status};
use broker_model::journal::Event;

use super::{outbox, rfc3339, Failure};

shared::vocabulary! {
    /// What one check found: `reached` (the agent answered in its
    /// protocol); `unreachable` (no address, no connection, or no answer
    /// in time); `refused` (an answer that is not the protocol's, or an
    /// error status); `not_allowed` (the egress gate refused the address:
    /// nothing was sent); `host_down` (not contacted: its host went
    /// unanswered moments ago and is given time before the next try).
    Outcome, OUTCOMES {
        Reached = "reached",
        Unreachable = "unreachable",
        Refused = "refused",
        NotAllowed = "not_allowed",
        HostDown = "host_down",
    }
}

impl Outcome {
    pub fn status(self) -> Status {
        match self {
            Outcome::Reached => Status::Online,
            _ => Status::Offline,
        }
    }
}

/// A check to record.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub uaid: String,
    /// The URL checked.
    pub endpoint: String,
    pub outcome: Outcome,
    /// When it ended (ms).
    pub at: i64,
    pub latency_ms: Option<u64>,
}

/// How far the uptime moves before it is shown again.
const UPTIME_STEP: f64 = 1.0;

/// Records `checks` in order; the changes they publish, each journaled,
/// as `(seq, measurement)`.
pub fn record(conn: &Conn, checks: &[Check]) -> Result<Vec<(i64, Measurement)>, Failure> {
    let mut published = Vec::new();
    for check in checks {
        if let Some(change) = record_one(conn, check)? {
            published.push(change);
        }
    }
    Ok(published)
}

/// The row's fields a check reads.
struct Held {
    endpoint: String,
    checks: u32,
    uptime: f64,
    last_seen_at: Option<i64>,
    status: Status,
    shown_uptime: f64,
}

fn record_one(conn: &Conn, check: &Check) -> Result<Option<(i64, Measurement)>, Failure> {
    let held = conn
        .query_row(
            "SELECT endpoint, checks, uptime, last_seen_at, published_status, published_uptime
             FROM availability WHERE uaid = ?1",
            [&check.uaid],
            |r| {
                Ok(Held {
                    endpoint: r.get(0)?,
                    checks: r.get(1)?,
                    uptime: r.get(2)?,
                    last_seen_at: r.get(3)?,
                    status: super::closed(r, 4)?,
                    shown_uptime: r.get(5)?,
                })
            },
        )
        .optional()?;
    // Another endpoint starts afresh: its history is not this one's.
    let held = held.filter(|h| h.endpoint == check.endpoint);
    let reached = check.outcome == Outcome::Reached;
    let (checks, previous) = held.as_ref().map_or((0, 0.0), |h| (h.checks, h.uptime));
    let uptime = uptime_after(previous, checks, reached);
    let last_seen_at = if reached { Some(check.at) } else { held.as_ref().and_then(|h| h.last_seen_at) };
    let status = check.outcome.status();
    let latency = check.latency_ms.map(|ms| ms as i64);
    let shows_change = match &held {
        None => true,
        Some(h) => h.status != status || (uptime - h.shown_uptime).abs() >= UPTIME_STEP,
    };
    if !shows_change {
        conn.execute(
            "UPDATE availability SET outcome = ?2, checked_at = ?3, last_seen_at = ?4, latency_ms = ?5,
                 checks = ?6, uptime = ?7 WHERE uaid = ?1",
            params![check.uaid, check.outcome.as_str(), check.at, last_seen_at, latency, checks + 1, uptime],
        )?;
        return Ok(None);
    }
    let measurement = Measurement {
        uaid: check.uaid.clone(),
        endpoint: check.endpoint.clone(),
        status,
        checked_at: rfc3339(check.at),
        last_seen: last_seen_at.map(rfc3339),
        latency_ms: check.latency_ms,
        uptime,
    };
    let seq = outbox::push(conn, check.at, &Event::Availability { availability: Box::new(measurement.clone()) })?;
    conn.execute(
        "INSERT INTO availability (uaid, endpoint, outcome, checked_at, last_seen_at, latency_ms, checks, uptime,
             published_status, published_uptime, published_checked_at, published_latency_ms,
             published_last_seen_at, seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?8, ?4, ?6, ?5, ?10)
         ON CONFLICT (uaid) DO UPDATE SET endpoint = ?2, outcome = ?3, checked_at = ?4, last_seen_at = ?5,
             latency_ms = ?6, checks = ?7, uptime = ?8, published_status = ?9, published_uptime = ?8,
             published_checked_at = ?4, published_latency_ms = ?6, published_last_seen_at = ?5, seq = ?10",
        params![
            check.uaid,
            check.endpoint,
            check.outcome.as_str(),
            check.at,
            last_seen_at,
            latency,
            checks + 1,
            uptime,
            status.as_str(),
            seq
        ],
    )?;
    Ok(Some((seq, measurement)))
}

const SHOWN: &str = "SELECT uaid, endpoint, published_status, published_checked_at, published_last_seen_at,
    published_latency_ms, published_uptime, seq FROM availability";

fn shown(r: &Row<'_>) -> Result<(i64, Measurement), Failure> {
    let measurement = Measurement {
        uaid: r.get(0)?,
        endpoint: r.get(1)?,
        status: super::closed(r, 2)?,
        checked_at: rfc3339(r.get(3)?),
        last_seen: r.get::<Option<i64>>(4)?.map(rfc3339),
        latency_ms: r.get::<Option<i64>>(5)?.map(|ms| ms.max(0) as u64),
        uptime: r.get(6)?,
    };
    Ok((r.get(7)?, measurement))
}

/// What `uaid` shows, if it was ever checked.
pub fn shown_of(conn: &Conn, uaid: &str) -> Result<Option<Measurement>, Failure> {
    Ok(conn.query_row(&format!("{SHOWN} WHERE uaid = ?1"), [uaid], shown).optional()?.map(|(_, m)| m))
}

/// The first `limit` changes after `seq` (a build's journal point), in order.
pub fn shown_after(conn: &Conn, seq: i64, limit: usize) -> Result<Vec<(i64, Measurement)>, Failure> {
    let sql = format!("{SHOWN} WHERE seq > ?1 ORDER BY seq LIMIT ?2");
    conn.query_map(&sql, params![seq, i64::try_from(limit).unwrap_or(i64::MAX)], shown)
}

/// When each of `uaids` was last checked (ms), for those ever checked.
pub fn checked_at(conn: &Conn, uaids: &[String]) -> Result<Vec<Option<i64>>, Failure> {
    let sql = "SELECT checked_at FROM availability WHERE uaid = ?1";
    uaids.iter().map(|uaid| conn.query_row(sql, [uaid], |r| r.get(0)).optional()).collect()
}

/// What the store holds of an agent a measurement is about.
#[derive(Clone, Debug, PartialEq)]
pub enum Registered {
    /// Registered through the api: its record.
    Live(Box<broker_model::Agent>),
    /// Registered through the api and deleted since.
    Deleted,
    /// Not registered through the api: the build's.
    No,
}

/// What the store holds of each of `uaids`, in order.
pub fn registered(conn: &Conn, uaids: &[String]) -> Result<Vec<Registered>, Failure> {
    uaids
        .iter()
        .map(|uaid| {
            Ok(match super::registry::find(conn, uaid)? {
                Some(r) if r.deleted_at.is_none() => Registered::Live(Box::new(r.agent)),
                Some(_) => Registered::Deleted,
                None => Registered::No,
            })
        })
        .collect()
}
