//! almanac's generator library: sources, the HCS-20 rules, the warehouse,
//! the analytics queries and the site writer. The api links this library so
//! that both sides answer every query through the same functions.

pub mod broker;
pub mod build;
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

/// `f` over `items` on every core, results in `items`' order.
pub(crate) fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = items.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let f = &f;
        let handles: Vec<_> =
            items.chunks(chunk).map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<R>>())).collect();
        handles.into_iter().flat_map(|h| h.join().expect("a worker panicked")).collect()
    })
}

/// Debug-level timings of the parts of a step (`RUST_LOG=almanac=debug`).
pub(crate) struct Lap(std::cell::Cell<std::time::Instant>);

impl Lap {
    pub(crate) fn new() -> Lap {
        Lap(std::cell::Cell::new(std::time::Instant::now()))
    }

    /// Logs the time since the previous mark (or since `new`).
    pub(crate) fn mark(&self, what: &str) {
        tracing::debug!(what, ms = build::ms(self.0.get()), "lap");
        self.0.set(std::time::Instant::now());
    }
}
