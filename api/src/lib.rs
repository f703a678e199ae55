//! almanac's api: serves the published site from memory with correct HTTP
//! caching, answers the live routes, and picks up new builds as the
//! generator publishes them. The binary (`main.rs`) parses [`Config`] and
//! calls [`serve`].

pub mod app;
pub mod auth;
pub mod body;
pub mod broker;
pub mod chat;
pub mod command;
pub mod conditional;
pub mod config;
pub mod connection;
pub mod cors;
pub mod demo;
pub mod egress;
pub mod guard;
pub mod hcs20;
pub mod head;
pub mod idempotency;
pub mod journal;
pub mod limit;
pub mod openapi;
pub mod path;
pub mod pipeline;
pub mod pool;
pub mod published;
pub mod reload;
pub mod replicas;
pub mod reply;
pub mod request;
pub mod routes;
pub mod server;
pub mod service;
/// The live store, its own crate (`live-store`), under the name the api's
/// modules use.
pub use live_store as store;
pub mod wording;

pub use app::App;
pub use config::Config;
pub use server::serve;
