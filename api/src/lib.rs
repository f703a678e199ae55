//! almanac's api: serves the published site from memory with correct HTTP
//! caching, answers the live routes, and picks up new builds as the
//! generator publishes them. The binary (`main.rs`) parses [`Config`] and
//! calls [`serve`].

pub mod agents;
pub mod body;
pub mod broker;
pub mod conditional;
pub mod config;
pub mod cors;
pub mod limit;
pub mod mcp;
pub mod path;
pub mod published;
pub mod reload;
pub mod reply;
pub mod router;
pub mod server;
pub mod tools;

pub use config::Config;
pub use router::App;
pub use server::serve;
