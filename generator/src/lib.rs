//! almanac's generator library: sources, the HCS-20 rules, the warehouse,
//! the analytics queries and the site writer. The api links this library so
//! that both sides answer every query through the same functions.

pub mod analytics;
pub mod broker;
pub mod build;
pub mod columnar;
pub mod datagen;
pub mod entity;
pub mod guard;
pub mod hcs20;
pub mod ledger;
pub mod manifest;
pub mod routes;
pub mod site;
pub mod snapshot;
pub mod timestamp;
pub mod uaid;
pub mod warehouse;

/// Content type of every JSON answer.
pub const JSON: &str = "application/json";

/// Debug-level timings of the parts of a step (`RUST_LOG=almanac=debug`).
pub(crate) struct Lap(std::cell::Cell<std::time::Instant>);

impl Lap {
    pub(crate) fn new() -> Lap {
        Lap(std::cell::Cell::new(std::time::Instant::now()))
    }

    /// Logs the time since the previous mark (or since `new`).
    pub(crate) fn mark(&self, what: &str) {
        tracing::debug!(what, ms = build::ms(self.0.get()), "lap");
        self.0.set(std::time::Instant::now());
    }
}
