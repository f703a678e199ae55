//! Who has proven they own an agent, and what that changes in its record.
//!
//! The api verifies ownership (`api::broker::verification`: a DNS TXT
//! record, a ledger signature, or a code served at the agent's endpoint)
//! and journals an [`Ownership`] each time an agent's ownership is proven,
//! revoked or expires; a build folds the journal's last one of each agent
//! into its record with [`settle`], and the api does the same for the
//! agents its live overlay holds. One rule, here, for both:
//!
//! - A verified ownership makes the agent `verificationStatus:
//!   registered` (what `verified=true` keeps) and its `verifiedOwner`
//!   trust signal 100.
//! - A revoked or expired one puts back what the agent showed before its
//!   first proof ([`Prior`]), so an agent that was verified and is no
//!   longer reads as it did before.
//!
//! The trust score is left as its source gave it: how a source weighs
//! its signals is the source's.

use serde::{Deserialize, Serialize};

use crate::{Agent, Verification};

/// The trust signal a verified ownership sets.
pub const SIGNAL: &str = "verifiedOwner";

shared::vocabulary! {
    /// How an ownership was proven: `dns-txt` (a TXT record at
    /// `_agent.<nativeId>`, the HCS-14 AID resolution profile's name,
    /// holding the challenge's code), `ledger-signature` (the code signed
    /// by the key of the agent's ledger account), `agent-endpoint` (the
    /// code served by the agent at its own endpoint).
    Method, METHODS {
        DnsTxt = "dns-txt",
        LedgerSignature = "ledger-signature",
        AgentEndpoint = "agent-endpoint",
    }
}

shared::vocabulary! {
    /// Where an ownership stands: `verified`, `revoked` (a re-check found
    /// the proof gone) or `expired` (not confirmed within its lifetime).
    State, STATES {
        Verified = "verified",
        Revoked = "revoked",
        Expired = "expired",
    }
}

/// What an agent showed before its first verified ownership.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Prior {
    pub verification_status: Verification,
    /// Its `verifiedOwner` signal (absent: it had none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_owner: Option<f64>,
}

impl Prior {
    /// What `agent` shows now.
    pub fn of(agent: &Agent) -> Prior {
        Prior {
            verification_status: agent.verification_status,
            verified_owner: agent.trust_signals.get(SIGNAL).copied(),
        }
    }
}

/// One agent's ownership as it last changed: the journal's `ownership`
/// event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ownership {
    pub uaid: String,
    pub state: State,
    pub method: Method,
    /// The account that proved it.
    pub owner_id: String,
    /// When it was proven (RFC 3339).
    pub verified_at: String,
    pub prior: Prior,
}

/// `agent` as its ownership leaves it (none: as it is).
pub fn settle(agent: &mut Agent, ownership: Option<&Ownership>) {
    let Some(ownership) = ownership else { return };
    debug_assert_eq!(agent.uaid.as_str(), ownership.uaid, "an ownership settles its own agent");
    match ownership.state {
        State::Verified => {
            agent.verification_status = Verification::Registered;
            agent.trust_signals.insert(SIGNAL.to_string(), 100.0);
        }
        State::Revoked | State::Expired => {
            agent.verification_status = ownership.prior.verification_status;
            match ownership.prior.verified_owner {
                Some(value) => agent.trust_signals.insert(SIGNAL.to_string(), value),
                None => agent.trust_signals.remove(SIGNAL),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ownership(agent: &Agent, state: State, prior: Prior) -> Ownership {
        Ownership {
            uaid: agent.uaid.to_string(),
            state,
            method: Method::DnsTxt,
            owner_id: "0.0.1001".into(),
            verified_at: "2026-01-01T00:00:00Z".into(),
            prior,
        }
    }

    #[test]
    fn verified_sets_the_status_and_the_signal_and_revoked_puts_back_the_prior() {
        let agents = crate::generate::agents(40, 7);
        let indexed = agents.iter().find(|a| a.verification_status == Verification::Indexed).unwrap();
        let cases: Vec<(Prior, State, Verification, Option<f64>)> = vec![
            (Prior::of(indexed), State::Verified, Verification::Registered, Some(100.0)),
            (
                Prior { verification_status: Verification::Indexed, verified_owner: None },
                State::Revoked,
                Verification::Indexed,
                None,
            ),
            (
                Prior { verification_status: Verification::Pending, verified_owner: Some(0.0) },
                State::Expired,
                Verification::Pending,
                Some(0.0),
            ),
        ];
        for (prior, state, status, signal) in cases {
            let mut agent = indexed.clone();
            settle(&mut agent, Some(&ownership(indexed, state, prior.clone())));
            assert_eq!(agent.verification_status, status, "{state:?} over {prior:?}");
            assert_eq!(agent.trust_signals.get(SIGNAL).copied(), signal, "{state:?} over {prior:?}");
            assert_eq!(agent.trust_score, indexed.trust_score, "the score is the source's");
        }
        let mut untouched = indexed.clone();
        settle(&mut untouched, None);
        assert_eq!(&untouched, indexed);
    }

    #[test]
    fn verified_then_revoked_is_the_agent_before() {
        let agents = crate::generate::agents(40, 7);
        for agent in &agents {
            let mut changed = agent.clone();
            settle(&mut changed, Some(&ownership(agent, State::Verified, Prior::of(agent))));
            settle(&mut changed, Some(&ownership(agent, State::Revoked, Prior::of(agent))));
            assert_eq!(&changed, agent);
        }
    }
}
