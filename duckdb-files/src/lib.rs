//! almanac's DuckDB files: how the warehouse and the snapshots are opened
//! ([`database`]), how rows move in and out of them as Arrow batches
//! ([`columnar`]), and a build's immutable snapshot ([`snapshot`]). Which
//! tables a file holds is each surface's business (`hcs20::tables`, the
//! generator's `broker::store`). Knows nothing of HTTP or the async runtime.

pub mod columnar;
pub mod database;
pub mod snapshot;
