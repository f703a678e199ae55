//! How verification runs, from the flags (apart from the handlers, so
//! that the app's state can hold it without naming them).

use std::time::Duration;

use super::dns::Txt;

pub struct Settings {
    pub challenge_ttl: Duration,
    /// Unused, unexpired challenges an account may hold at once.
    pub max_pending: usize,
    /// How often each proof is looked at again; zero: never.
    pub recheck_every: Duration,
    /// How long a proof that cannot be read stays verified since it was
    /// last found.
    pub lifetime: Duration,
    /// Where DNS TXT proofs are read.
    pub txt: Txt,
}
