//! Fault points: named places in a run where a test can end the generator
//! as `kill -9` would (no destructor runs, nothing more is written), so
//! that crash safety is tested at every step, deterministically, instead
//! of by killing after guessed delays.
//!
//! The api has fault points too ([`SWAP_POINTS`]): there loading a new
//! build fails once, as a damaged or vanishing file would make it fail.
//!
//! A point fires only once [`arm`]ed, and only the test binaries
//! `generator-with-faults` and `api-with-faults` (the `tests` crate) arm
//! one: the binaries a server runs never do, and hold no way to.
//! Unarmed, [`point`] and [`fails_once`] cost one atomic load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// The point armed, once for the process.
static ARMED: OnceLock<String> = OnceLock::new();

/// Arms the fault point named `name` for the rest of the process; a
/// second call is ignored. `name` must be one of [`POINTS`],
/// [`API_POINTS`], [`SWAP_POINTS`] or [`UPLOAD_POINTS`].
pub fn arm(name: &str) {
    assert!(
        POINTS.contains(&name)
            || API_POINTS.contains(&name)
            || SWAP_POINTS.contains(&name)
            || UPLOAD_POINTS.contains(&name),
        "{name} is not a fault point"
    );
    let _ = ARMED.set(name.to_string());
}

fn armed(name: &str) -> bool {
    ARMED.get().is_some_and(|armed| armed == name)
}

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

/// Ends the process at once when `name` is [`arm`]ed.
#[inline]
pub fn point(name: &'static str) {
    debug_assert!(
        POINTS.contains(&name) || API_POINTS.contains(&name) || UPLOAD_POINTS.contains(&name),
        "{name} is not a fault point"
    );
    if armed(name) {
        std::process::abort();
    }
}

/// The api's points where it can be ended as `kill -9` would.
pub const API_POINTS: [&str; 1] = [
    // Outbox events appended to the journal and synced, not yet deleted
    // from the outbox.
    "journal-appended",
];

/// The points of `generator publish`, uploading a build to a bucket.
pub const UPLOAD_POINTS: [&str; 1] = [
    // Half the build's missing objects uploaded; its manifest and the
    // pointer not.
    "uploaded-half",
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
/// api reaches it, when `name` is [`arm`]ed.
pub fn fails_once(name: &'static str) -> bool {
    debug_assert!(SWAP_POINTS.contains(&name), "{name} is not a swap fault point");
    static FIRED: AtomicBool = AtomicBool::new(false);
    armed(name) && !FIRED.swap(true, Ordering::SeqCst)
}
