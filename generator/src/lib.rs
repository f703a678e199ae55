//! almanac's generator library: sources, the HCS-20 rules, the warehouse,
//! the analytics queries and the site writer. The api links this library so
//! that both sides answer every query through the same functions.

pub mod analytics;
pub mod build;
pub mod columnar;
pub mod datagen;
pub mod entity;
pub mod hcs20;
pub mod ledger;
pub mod manifest;
pub mod routes;
pub mod site;
pub mod snapshot;
pub mod timestamp;
pub mod warehouse;

/// Content type of every JSON answer.
pub const JSON: &str = "application/json";
