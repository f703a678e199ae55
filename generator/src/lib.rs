//! almanac's generator library: sources, the HCS-20 rules, the warehouse,
//! the analytics queries and the site writer. The api links this library so
//! that both sides answer every query through the same functions.

pub mod analysts;
pub mod broker;
pub mod build;
#[cfg(feature = "cli")]
pub mod cli;
pub mod columnar;
#[cfg(feature = "cli")]
pub mod command;
pub mod database;
pub mod hcs20;
pub mod hosts;
pub mod layer;
pub mod pages;
pub mod progress;
pub mod snapshot;
pub mod warehouse;
