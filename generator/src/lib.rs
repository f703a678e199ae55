//! almanac's generator library: the sources, the warehouse, the broker's
//! build, the pages and the site writer; section C's rules and tables are
//! the `hcs20` crate's. The api links this library for the renderers it
//! shares with a build (`pages`, `broker::render`).

pub mod analysts;
pub mod broker;
pub mod build;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod command;
pub mod hosts;
pub mod layer;
pub mod message_sources;
pub mod pages;
pub mod progress;
pub mod warehouse;
