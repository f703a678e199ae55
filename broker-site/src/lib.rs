//! Section A as a build publishes it: every static route's document
//! ([`render`], whose functions the api also answers live agents with), the
//! small row per agent and the facts the pages say of them all ([`rows`]),
//! and the broker's tables in the warehouse and snapshots ([`store`]).
//! Knows nothing of HTTP or the async runtime.

pub mod render;
pub mod rows;
pub mod store;
