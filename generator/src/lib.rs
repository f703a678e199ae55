//! almanac's generator library: the sources, the warehouse, the build's
//! steps and the site writer. What the api answers with the same functions
//! is in the crates below it (`hcs20`, `broker_site`, `pages`,
//! `embeddings`): the api does not link this library.

pub mod analysts;
pub mod broker;
pub mod build;
#[cfg(feature = "cli")]
pub mod command;
pub mod hosts;
pub mod layer;
pub mod message_sources;
pub mod plugin_folder;
pub mod progress;
pub mod warehouse;
