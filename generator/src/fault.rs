//! Fault points: named places in a run where a test can end the generator
//! as `kill -9` would (no destructor runs, nothing more is written), so
//! that crash safety is tested at every step, deterministically, instead
//! of by killing after guessed delays.
//!
//! The api has fault points too ([`SWAP_POINTS`]): there loading a new
//! build fails once, as a damaged or vanishing file would make it fail.
//!
//! Only a build with the `faults` feature (which the `tests` crate turns
//! on) reads `ALMANAC_FAULT`; elsewhere [`point`] and [`fails_once`] do
//! nothing.

/// Every fault point, in the order a run that publishes reaches them.
pub const POINTS: [&str; 8] = [
    // Sources loaded and rendered; the warehouse not yet opened.
    "sources",
    // New messages fetched (and, into a warehouse with cursors, stored).
    "ingested",
    // Messages fetched into an empty warehouse stored by their connection.
    "stored",
    // The run's answers computed in memory.
    "applied",
    // The build's folder staged and named `builds/<id>`, not yet live.
    "staged",
    // The warehouse named for the build and copied to its snapshot.
    "snapshot",
    // `current` flipped to the new build; old builds not yet pruned.
    "published",
    // Old builds pruned; the run is about to report.
    "pruned",
];

/// Ends the process at once when `ALMANAC_FAULT` names `name` (with the
/// `faults` feature).
#[inline]
pub fn point(name: &'static str) {
    debug_assert!(POINTS.contains(&name) || API_POINTS.contains(&name), "{name} is not a fault point");
    #[cfg(feature = "faults")]
    if std::env::var("ALMANAC_FAULT").is_ok_and(|wanted| wanted == name) {
        std::process::abort();
    }
}

/// The api's points where it can be ended as `kill -9` would.
pub const API_POINTS: [&str; 1] = [
    // Outbox events appended to the journal and synced, not yet deleted
    // from the outbox.
    "journal-appended",
];

/// The api's fault points while it swaps in a new build, in order.
pub const SWAP_POINTS: [&str; 3] = [
    // The new build's manifest read.
    "load-manifest",
    // Its files read (or shared with the serving build).
    "load-files",
    // Its snapshot loaded: the last step before the swap.
    "load-snapshot",
];

/// Whether the failure `name` is to be injected now: the first time the
/// api reaches it, when `ALMANAC_FAULT` names it (with the `faults`
/// feature).
pub fn fails_once(name: &'static str) -> bool {
    debug_assert!(SWAP_POINTS.contains(&name), "{name} is not a swap fault point");
    #[cfg(feature = "faults")]
    {
        static FIRED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if std::env::var("ALMANAC_FAULT").is_ok_and(|wanted| wanted == name) {
            return !FIRED.swap(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    false
}
