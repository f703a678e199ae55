//! almanac's generator library: sources, the HCS-20 rules, the warehouse,
//! the analytics queries and the site writer. The api links this library so
//! that both sides answer every query through the same functions.

pub mod broker;
pub mod build;
#[cfg(feature = "cli")]
pub mod cli;
pub mod columnar;
pub mod database;
pub mod entity;
pub mod fault;
pub mod guard;
pub mod hcs20;
pub mod http;
pub mod manifest;
pub mod site;
pub mod snapshot;
pub mod timestamp;
pub mod uaid;
pub mod warehouse;

/// `f` over `items` on the thread pool, results in `items`' order.
pub(crate) fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync + Send) -> Vec<R> {
    use rayon::prelude::*;
    items.par_iter().map(f).collect()
}
