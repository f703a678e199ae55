//! Availability measured, not asserted: the api checks every agent it can
//! chat with, through the egress gate, and what the checks find is what
//! search, the agent routes, badges and pages show
//! ([`broker_model::availability`] has the rule; `store::availability`
//! what is recorded and when a change is published).
//!
//! **A check** is the cheapest call that tells whether a chat session
//! would open: an A2A agent's card (fetched and read, as a session's
//! opening does), MCP's `initialize` or stateless discovery (the session
//! it opens ended at once), and for plain HTTP and model-routing
//! endpoints a GET that any answer below 500 passes. Nothing is sent to
//! an address the gate refuses.
//!
//! **Rounds.** Every `every`, a round walks the build's agents in order,
//! then the overlay's new ones, skipping those checked within `every`
//! (a restart resumes rather than starts over). Checks start at most
//! `rate` a second, `concurrency` at once, and one at a time per host;
//! an agent recorded without a call (below) is paced the same.
//! A host that does not answer (no address, no connection, no answer in
//! `timeout`) is given time before it is tried again (doubling from 30 s
//! to `backoff_max`); its other agents are recorded as `host_down`
//! meanwhile without a call. The round reads ahead at most `window`
//! agents: O(window) memory whatever the index holds.
//!
//! **Soon.** An agent registered or updated through the api is asked for
//! ([`Soon`]) and checked ahead of the round, or between rounds, rather
//! than when a round reaches it.
//!
//! **Live.** A published change is shown at once through the live
//! overlay, with the agent as the store or the build holds it, up to
//! `live_max` changes per build ([`Shown`]: counted by the checker and
//! by the api's start, which shows what the store holds since the build);
//! past that, changes wait for the next build (each overlay agent is
//! indexed and searched beside the build, so the bound is memory's and
//! search's).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;

pub mod checks;
pub mod live;

/// How the checks run.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How often an agent is checked; zero: never (availability stays
    /// `unknown`).
    pub every: Duration,
    /// Checks started a second, at most.
    pub rate: u32,
    /// Checks in flight at once, at most (and one per host).
    pub concurrency: usize,
    /// Time one check may take, everything included.
    pub timeout: Duration,
    /// Longest wait before a host that did not answer is tried again.
    pub backoff_max: Duration,
    /// Largest answer read (an agent card, an MCP answer), in bytes.
    pub max_answer_bytes: usize,
    /// Changes shown through the live overlay per build.
    pub live_max: usize,
}

/// Agents asked for [`Soon`] at most; past that, the round reaches them.
const SOON_MAX: usize = 4096;

/// How many availability changes the live overlay shows over the build
/// at a journal point: at most `bound` ([`Settings::live_max`]) per
/// build, whether the api's start loaded them from the store or the
/// checker measured them since. A restarted api shows no more than one
/// that ran on.
pub struct Shown {
    bound: usize,
    /// The build's journal point, and how many are shown over it.
    shown: Mutex<(i64, usize)>,
}

impl Shown {
    pub fn new(bound: usize) -> Shown {
        Shown { bound, shown: Mutex::new((i64::MIN, 0)) }
    }

    /// How many more may be shown over the build at journal point `seq`.
    pub fn room(&self, seq: i64) -> usize {
        let shown = self.shown.lock().expect("availability: shown changes");
        self.bound - if shown.0 == seq { shown.1 } else { 0 }
    }

    /// Of `wanted` more changes over the build at journal point `seq`, how
    /// many may be shown (and are counted as shown).
    pub fn take(&self, seq: i64, wanted: usize) -> usize {
        let mut shown = self.shown.lock().expect("availability: shown changes");
        if shown.0 != seq {
            *shown = (seq, 0);
        }
        let room = (self.bound - shown.1).min(wanted);
        shown.1 += room;
        debug_assert!(shown.1 <= self.bound, "never past the bound");
        room
    }
}

/// Agents to check before a round reaches them: those registered or
/// updated just now.
#[derive(Default)]
pub struct Soon {
    uaids: Mutex<VecDeque<String>>,
    pub(crate) wake: Notify,
}

impl Soon {
    /// Asks for `uaid` to be checked soon (dropped past [`SOON_MAX`]).
    pub fn ask(&self, uaid: &str) {
        let mut uaids = self.uaids.lock().expect("soon");
        if uaids.len() < SOON_MAX {
            uaids.push_back(uaid.to_string());
        }
        drop(uaids);
        self.wake.notify_one();
    }

    pub(crate) fn take(&self) -> Vec<String> {
        self.uaids.lock().expect("soon").drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Shown;

    /// Takes, each `(journal point, wanted)`, and what each may show
    /// within a bound of 10: the count starts again with another build.
    #[test]
    fn shown_changes_stay_within_the_bound_of_each_build() {
        let shown = Shown::new(10);
        let takes =
            [((7, 4), 4), ((7, 0), 0), ((7, 5), 5), ((7, 3), 1), ((7, 2), 0), ((9, 12), 10), ((9, 1), 0), ((7, 3), 3)];
        for ((seq, wanted), expected) in takes {
            let room = shown.room(seq);
            assert_eq!(shown.take(seq, wanted), expected, "{seq} {wanted}");
            assert_eq!(room.min(wanted), expected, "{seq} {wanted}: room");
        }
    }
}
