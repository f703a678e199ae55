//! Picking up newly published builds without a restart.
//!
//! The generator publishes by renaming the `current` link. The api checks
//! the link every `interval`; when it names another build, that build is
//! loaded off the request path and swapped in. A build that fails to load is
//! logged and the one being served stays.

use std::sync::Arc;
use std::time::Duration;

use almanac::routes::Limits;
use almanac::site::Layout;

use crate::state::{Build, Live};

/// Loads the current build if it differs from the live one. Returns whether
/// a new build went live.
pub async fn check(layout: &Layout, limits: Limits, live: &Arc<Live>) -> bool {
    let Some(id) = layout.current_build() else { return false };
    let serving = live.get();
    if serving.as_ref().is_some_and(|b| b.id == id) {
        return false;
    }
    let layout = layout.clone();
    let loaded = tokio::task::spawn_blocking(move || Build::load(&layout, &id, limits, serving.as_deref())).await;
    match loaded {
        Ok(Ok(build)) => {
            tracing::info!(build = %build.id, "serving new build");
            live.set(build);
            true
        }
        Ok(Err(error)) => {
            tracing::error!(
                error = format!("{error:#}"),
                "could not load the published build; still serving the previous one"
            );
            false
        }
        Err(error) => {
            tracing::error!(%error, "build loader panicked");
            false
        }
    }
}

/// Checks for a new build every `interval`, forever.
pub async fn watch(layout: Layout, limits: Limits, live: Arc<Live>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        check(&layout, limits, &live).await;
    }
}
