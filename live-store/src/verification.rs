//! Ownership verification (`crate::broker::verification`): challenges,
//! and each agent's last proof of ownership.
//!
//! A challenge is used at most once: [`prove`] marks it used, stores the
//! ownership and journals it in one transaction, so two verifications of
//! one challenge cannot both succeed. An ownership's every change of
//! state (proven, revoked, expired) is an `ownership` event in the outbox,
//! which the next build folds ([`broker_model::ownership::settle`]); a
//! re-check that finds the proof still there costs a row update, not an
//! event.

use crate::params;
use crate::sql::{Conn, Optional, Row};
use broker_model::journal::Event;
use broker_model::ownership::{Method, Ownership, Prior, State};

use super::{closed, outbox, rfc3339, Failure};

/// A challenge as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Challenge {
    pub id: String,
    pub uaid: String,
    /// The account that asked for it: the owner a proof records.
    pub account: String,
    /// That account's network (`hedera:testnet`).
    pub chain: String,
    pub code: String,
    pub created_at: i64,
    pub expires_at: i64,
    /// When a proof used it.
    pub used_at: Option<i64>,
    pub method: Option<Method>,
    /// Why the last attempt did not prove ownership.
    pub message: Option<String>,
}

impl Challenge {
    /// `pending`, `verified` (used) or `expired`, at `now`.
    pub fn status(&self, now: i64) -> &'static str {
        match (self.used_at, now >= self.expires_at) {
            (Some(_), _) => "verified",
            (None, true) => "expired",
            (None, false) => "pending",
        }
    }
}

/// An agent's ownership as stored: the journaled record and how it is
/// re-checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    pub ownership: Ownership,
    pub chain: String,
    /// Where the proof is re-checked: the TXT name, the URL, the account.
    pub proof: String,
    /// What the proof must hold.
    pub code: String,
    /// When a check last found the proof (ms).
    pub confirmed_at: i64,
    /// When it was last checked (ms).
    pub checked_at: i64,
    /// Why the last check did not find it, if it did not.
    pub last_error: Option<String>,
    /// The outbox `seq` of its last state change.
    pub seq: i64,
}

pub fn insert_challenge(conn: &Conn, c: &Challenge) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO verification_challenges (id, uaid, account, chain, code, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![c.id, c.uaid, c.account, c.chain, c.code, c.created_at, c.expires_at],
    )?;
    Ok(())
}

/// Deletes challenges that expired before `before` (ms).
pub fn prune_challenges(conn: &Conn, before: i64) -> Result<usize, Failure> {
    conn.execute("DELETE FROM verification_challenges WHERE expires_at < ?1", [before])
}

/// How many unexpired, unused challenges `account` holds at `now`.
pub fn pending(conn: &Conn, account: &str, now: i64) -> Result<usize, Failure> {
    let n: i64 = conn.query_row(
        "SELECT COUNT(*) FROM verification_challenges WHERE account = ?1 AND used_at IS NULL AND expires_at > ?2",
        params![account, now],
        |r| r.get(0),
    )?;
    Ok(n as usize)
}

fn challenge_row(r: &Row<'_>) -> Result<Challenge, Failure> {
    Ok(Challenge {
        id: r.get(0)?,
        uaid: r.get(1)?,
        account: r.get(2)?,
        chain: r.get(3)?,
        code: r.get(4)?,
        created_at: r.get(5)?,
        expires_at: r.get(6)?,
        used_at: r.get(7)?,
        method: match r.get::<Option<String>>(8)? {
            Some(_) => Some(closed(r, 8)?),
            None => None,
        },
        message: r.get(9)?,
    })
}

pub fn challenge(conn: &Conn, id: &str) -> Result<Option<Challenge>, Failure> {
    conn.query_row(
        "SELECT id, uaid, account, chain, code, created_at, expires_at, used_at, method, message
             FROM verification_challenges WHERE id = ?1",
        [id],
        challenge_row,
    )
    .optional()
}

/// Records why an attempt with challenge `id` did not prove ownership.
pub fn attempted(conn: &Conn, id: &str, method: Method, message: &str) -> Result<(), Failure> {
    conn.execute(
        "UPDATE verification_challenges SET method = ?2, message = ?3 WHERE id = ?1 AND used_at IS NULL",
        params![id, method.as_str(), message],
    )?;
    Ok(())
}

/// A proof just made with a challenge.
#[derive(Clone, Debug)]
pub struct Proof {
    pub challenge: String,
    pub method: Method,
    pub proof: String,
    /// What the agent shows now (kept as its prior unless an earlier
    /// proof already recorded one).
    pub shown: Prior,
    pub at: i64,
}

/// What [`prove`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Proven {
    /// Stored and journaled at `seq`.
    Done { seq: i64, held: Box<Held> },
    /// The challenge was used already (by this proof's twin, say).
    Used,
    /// The challenge expired.
    Expired,
}

/// Uses the challenge, stores the agent's ownership and journals it, in
/// one transaction.
pub fn prove(conn: &Conn, proof: &Proof) -> Result<Proven, Failure> {
    let Some(challenge) = challenge(conn, &proof.challenge)? else { return Ok(Proven::Expired) };
    if challenge.used_at.is_some() {
        return Ok(Proven::Used);
    }
    if proof.at >= challenge.expires_at {
        return Ok(Proven::Expired);
    }
    conn.execute(
        "UPDATE verification_challenges SET used_at = ?2, method = ?3, message = NULL WHERE id = ?1",
        params![challenge.id, proof.at, proof.method.as_str()],
    )?;
    let prior = match of(conn, &challenge.uaid)? {
        Some(earlier) => earlier.ownership.prior,
        None => proof.shown.clone(),
    };
    let ownership = Ownership {
        uaid: challenge.uaid.clone(),
        state: State::Verified,
        method: proof.method,
        owner_id: challenge.account.clone(),
        verified_at: rfc3339(proof.at),
        prior,
    };
    let seq = journal(conn, proof.at, &ownership)?;
    let held = Held {
        ownership,
        chain: challenge.chain,
        proof: proof.proof.clone(),
        code: challenge.code,
        confirmed_at: proof.at,
        checked_at: proof.at,
        last_error: None,
        seq,
    };
    let prior = serde_json::to_string(&held.ownership.prior).map_err(|e| Failure::Corrupt(e.to_string()))?;
    conn.execute(
        "INSERT INTO ownerships
         (uaid, state, method, owner_id, chain, proof, code, verified_at, confirmed_at, checked_at, last_error, prior, seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?8, NULL, ?9, ?10)
         ON CONFLICT (uaid) DO UPDATE SET state = excluded.state, method = excluded.method,
             owner_id = excluded.owner_id, chain = excluded.chain, proof = excluded.proof, code = excluded.code,
             verified_at = excluded.verified_at, confirmed_at = excluded.confirmed_at,
             checked_at = excluded.checked_at, last_error = excluded.last_error, prior = excluded.prior,
             seq = excluded.seq",
        params![
            held.ownership.uaid,
            held.ownership.state.as_str(),
            held.ownership.method.as_str(),
            held.ownership.owner_id,
            held.chain,
            held.proof,
            held.code,
            proof.at,
            prior,
            seq
        ],
    )?;
    Ok(Proven::Done { seq, held: Box::new(held) })
}

fn journal(conn: &Conn, at: i64, ownership: &Ownership) -> Result<i64, Failure> {
    outbox::push(conn, at, &Event::Ownership { ownership: Box::new(ownership.clone()) })
}

const HELD: &str = "SELECT uaid, state, method, owner_id, verified_at, prior, chain, proof, code, confirmed_at,
                           checked_at, last_error, seq FROM ownerships";

fn held(r: &Row<'_>) -> Result<Held, Failure> {
    let prior: String = r.get(5)?;
    let prior = serde_json::from_str(&prior)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(5, rusqlite::types::Type::Text, Box::new(e)))?;
    Ok(Held {
        ownership: Ownership {
            uaid: r.get(0)?,
            state: closed(r, 1)?,
            method: closed(r, 2)?,
            owner_id: r.get(3)?,
            verified_at: rfc3339(r.get(4)?),
            prior,
        },
        chain: r.get(6)?,
        proof: r.get(7)?,
        code: r.get(8)?,
        confirmed_at: r.get(9)?,
        checked_at: r.get(10)?,
        last_error: r.get(11)?,
        seq: r.get(12)?,
    })
}

/// `uaid`'s ownership, if one was ever proven.
pub fn of(conn: &Conn, uaid: &str) -> Result<Option<Held>, Failure> {
    conn.query_row(&format!("{HELD} WHERE uaid = ?1"), [uaid], held).optional()
}

/// The ownerships whose state changed after `seq` (a build's journal
/// point), in order.
pub fn changed_after(conn: &Conn, seq: i64) -> Result<Vec<Held>, Failure> {
    conn.query_map(&format!("{HELD} WHERE seq > ?1 ORDER BY seq"), [seq], held)
}

/// Up to `limit` verified ownerships last checked before `before` (ms),
/// the longest unchecked first.
pub fn due(conn: &Conn, before: i64, limit: usize) -> Result<Vec<Held>, Failure> {
    let sql = format!("{HELD} WHERE state = 'verified' AND checked_at < ?1 ORDER BY checked_at LIMIT ?2");
    conn.query_map(&sql, params![before, limit as i64], held)
}

/// What a re-check of an ownership found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// The proof is there.
    Present,
    /// The proof is gone (no record, another code): why.
    Gone(String),
    /// The proof could not be read (no answer): why.
    Unknown(String),
}

/// Records a re-check of `uaid`'s verified ownership at `at` (ms): gone,
/// it is revoked; unread and unconfirmed for longer than `lifetime_ms`,
/// it expires. Returns the ownership as it now stands, and the `seq` at
/// which a change of state was journaled.
pub fn rechecked(
    conn: &Conn,
    uaid: &str,
    found: &Found,
    at: i64,
    lifetime_ms: i64,
) -> Result<Option<(Held, Option<i64>)>, Failure> {
    let Some(mut current) = of(conn, uaid)? else { return Ok(None) };
    if current.ownership.state != State::Verified {
        return Ok(Some((current, None)));
    }
    current.checked_at = at;
    let next = match found {
        Found::Present => {
            current.confirmed_at = at;
            current.last_error = None;
            None
        }
        Found::Gone(why) => {
            current.last_error = Some(why.clone());
            Some(State::Revoked)
        }
        Found::Unknown(why) => {
            current.last_error = Some(why.clone());
            (at - current.confirmed_at > lifetime_ms).then_some(State::Expired)
        }
    };
    let seq = match next {
        Some(state) => {
            current.ownership.state = state;
            current.seq = journal(conn, at, &current.ownership)?;
            Some(current.seq)
        }
        None => None,
    };
    conn.execute(
        "UPDATE ownerships SET state = ?2, confirmed_at = ?3, checked_at = ?4, last_error = ?5, seq = ?6
         WHERE uaid = ?1",
        params![
            uaid,
            current.ownership.state.as_str(),
            current.confirmed_at,
            current.checked_at,
            current.last_error,
            current.seq
        ],
    )?;
    Ok(Some((current, seq)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_model::Verification;

    fn challenge(id: &str, expires_at: i64) -> Challenge {
        Challenge {
            id: id.into(),
            uaid: "uaid:aid:x;nativeId=agent.example".into(),
            account: "0.0.1001".into(),
            chain: "hedera:testnet".into(),
            code: "code-1".into(),
            created_at: 0,
            expires_at,
            used_at: None,
            method: None,
            message: None,
        }
    }

    fn proof(id: &str, at: i64) -> Proof {
        Proof {
            challenge: id.into(),
            method: Method::DnsTxt,
            proof: "_agent.agent.example".into(),
            shown: Prior { verification_status: Verification::Indexed, verified_owner: None },
            at,
        }
    }

    #[test]
    fn a_challenge_proves_once_and_not_after_it_expires() {
        for engine in crate::testing::ENGINES {
            let (_scratch, conn) = crate::testing::migrated(engine);
            insert_challenge(&conn, &challenge("c1", 1_000)).unwrap();
            insert_challenge(&conn, &challenge("c2", 1_000)).unwrap();
            let Proven::Done { seq, held } = prove(&conn, &proof("c1", 10)).unwrap() else { panic!("proven") };
            assert_eq!(held.ownership.state, State::Verified);
            assert_eq!(of(&conn, &held.ownership.uaid).unwrap().unwrap().seq, seq);
            assert_eq!(prove(&conn, &proof("c1", 11)).unwrap(), Proven::Used);
            assert_eq!(prove(&conn, &proof("c2", 1_000)).unwrap(), Proven::Expired);
            assert_eq!(prove(&conn, &proof("missing", 1)).unwrap(), Proven::Expired);
            let journaled = outbox::waiting(&conn, 0, 10).unwrap();
            assert_eq!(journaled.len(), 1, "one event for one proof");
        }
    }

    #[test]
    fn rechecks_keep_revoke_or_expire_and_journal_only_changes() {
        // (found, at, lifetime) -> state after, journaled
        let cases = [
            (Found::Present, 500, 100, State::Verified, false),
            (Found::Gone("no record".into()), 20, 100, State::Revoked, true),
            (Found::Unknown("timed out".into()), 50, 100, State::Verified, false),
            (Found::Unknown("timed out".into()), 200, 100, State::Expired, true),
        ];
        for ((found, at, lifetime, state, journaled), engine) in
            cases.iter().cloned().flat_map(|case| crate::testing::ENGINES.map(|engine| (case.clone(), engine)))
        {
            let (_scratch, conn) = crate::testing::migrated(engine);
            insert_challenge(&conn, &challenge("c", 1_000)).unwrap();
            let Proven::Done { held, .. } = prove(&conn, &proof("c", 10)).unwrap() else { panic!("proven") };
            let (after, seq) = rechecked(&conn, &held.ownership.uaid, &found, at, lifetime).unwrap().unwrap();
            assert_eq!(after.ownership.state, state, "{found:?} at {at}");
            assert_eq!(seq.is_some(), journaled, "{found:?} at {at}");
            assert_eq!(outbox::waiting(&conn, 0, 10).unwrap().len(), 1 + journaled as usize);
            assert_eq!(of(&conn, &held.ownership.uaid).unwrap().unwrap(), after, "stored as answered");
            let again = rechecked(&conn, &held.ownership.uaid, &Found::Present, at + 1, lifetime).unwrap().unwrap();
            assert_eq!(again.0.ownership.state, state, "a revoked or expired ownership stays so");
        }
    }

    #[test]
    fn a_second_proof_keeps_the_first_prior() {
        for engine in crate::testing::ENGINES {
            let (_scratch, conn) = crate::testing::migrated(engine);
            insert_challenge(&conn, &challenge("c1", 1_000)).unwrap();
            insert_challenge(&conn, &challenge("c2", 1_000)).unwrap();
            prove(&conn, &proof("c1", 10)).unwrap();
            let mut second = proof("c2", 20);
            second.shown = Prior { verification_status: Verification::Registered, verified_owner: Some(100.0) };
            let Proven::Done { held, .. } = prove(&conn, &second).unwrap() else { panic!("proven") };
            assert_eq!(held.ownership.prior.verification_status, Verification::Indexed);
            assert_eq!(changed_after(&conn, 0).unwrap().len(), 1, "one row per agent");
        }
    }
}
