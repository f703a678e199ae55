//! How inscriptions run, from the flags (apart from the handlers, so that
//! the app's state can hold it without naming them).

use std::time::Duration;

use tokio::sync::Notify;

use super::ledger::Ledger;

pub struct Settings {
    /// The network, the broker's account on it, and the mirror node.
    pub ledger: Ledger,
    /// The largest content, in bytes.
    pub max_bytes: usize,
    /// Jobs an account may have open at once.
    pub max_open: usize,
    /// Jobs run at once.
    pub concurrency: usize,
    /// How long a quote holds.
    pub quote_ttl: Duration,
    /// How long a transaction is looked for on the mirror node before it
    /// is sent again.
    pub confirm_timeout: Duration,
    /// How soon a job that had to wait is tried again.
    pub retry_every: Duration,
    /// Wakes the worker when a job is created.
    pub wake: Notify,
}
