//! How this api holds the background duties among replicas.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How this api holds the duties, and whether it does now.
#[derive(Debug)]
pub struct Settings {
    /// How long a lease lasts once taken or renewed.
    pub lease: Duration,
    /// This api among the replicas (its process and a random part).
    pub holder: String,
    holding: AtomicBool,
}

impl Settings {
    pub fn new(lease: Duration) -> Settings {
        let random = crate::store::random::<6>();
        let holder = format!("{}-{}", std::process::id(), shared::http::hex(&random));
        Settings { lease: lease.max(Duration::from_millis(30)), holder, holding: AtomicBool::new(false) }
    }

    /// Whether this api runs the background duties now.
    pub fn holds_duties(&self) -> bool {
        self.holding.load(Ordering::Acquire)
    }

    pub(super) fn set_holding(&self, holding: bool) {
        self.holding.store(holding, Ordering::Release);
    }
}
