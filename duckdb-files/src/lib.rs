//! almanac's DuckDB files: how the warehouse and the snapshots are opened
//! ([`database`]), statements against them ([`sql`]), how rows move in and
//! out of them a column at a time ([`columnar`]), and a build's immutable
//! snapshot ([`snapshot`]). Which tables a file holds is each surface's
//! business (`hcs20::tables`, the generator's `broker::store`). Knows
//! nothing of HTTP or the async runtime.
//!
//! DuckDB is reached through its C API ([`ffi`]), nothing else: no Arrow.

// The `bundled` fallback: DuckDB compiled from source by `libduckdb-sys`
// and linked statically; [`ffi`]'s declarations resolve against it.
#[cfg(feature = "bundled")]
extern crate libduckdb_sys;

pub mod chunk;
pub mod columnar;
pub mod database;
mod ffi;
pub mod snapshot;
pub mod sql;
mod value;

pub use sql::{Connection, Error};
