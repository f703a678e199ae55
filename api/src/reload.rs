//! Picking up newly published builds without a restart.
//!
//! The generator publishes by renaming the `current` link. The api checks
//! the link every `interval`; when it names another build, that build is
//! loaded off the request path and swapped in. A build that fails to load is
//! logged once and the one being served stays; it is tried again when its
//! files change.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use almanac::hcs20::routes::Limits;
use almanac::site::Layout;

use crate::published::{Build, Live};

/// What a check did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The live build is the published one (or one that failed and has not
    /// changed since).
    Unchanged,
    Loaded,
    /// Nothing is published.
    NoBuild,
    /// The published build could not be loaded; the error is logged.
    Failed,
}

/// Watches `site/current` and loads the build it names.
pub struct Watcher {
    layout: Layout,
    limits: Limits,
    live: Arc<Live>,
    /// The build that last failed to load, and what its files looked like
    /// then: it is tried again when they change (a `generator build --full`
    /// writes a new snapshot under the same build id), not at every tick,
    /// and its error is logged once.
    failed: Option<(String, Stamp)>,
}

/// Modification times of a build's manifest and of the snapshots folder
/// (a snapshot is written anew by a rename into it).
type Stamp = (Option<SystemTime>, Option<SystemTime>);

fn stamp(layout: &Layout, id: &str) -> Stamp {
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    (modified(&layout.build_dir(id).join("_manifest.json")), modified(&layout.snapshots()))
}

impl Watcher {
    pub fn new(layout: Layout, limits: Limits, live: Arc<Live>) -> Watcher {
        Watcher { layout, limits, live, failed: None }
    }

    /// Loads the current build if it differs from the live one.
    pub async fn check(&mut self) -> Outcome {
        let Some(id) = self.layout.current_build() else { return Outcome::NoBuild };
        let serving = self.live.get();
        if serving.as_ref().is_some_and(|b| b.id == id) {
            return Outcome::Unchanged;
        }
        let stamp = stamp(&self.layout, &id);
        if self.failed.as_ref().is_some_and(|(failed, at)| *failed == id && *at == stamp) {
            return Outcome::Unchanged;
        }
        let (layout, limits) = (self.layout.clone(), self.limits);
        let previous = serving.clone();
        let build = id.clone();
        let loaded =
            tokio::task::spawn_blocking(move || Build::load(&layout, &build, limits, previous.as_deref())).await;
        let error = match loaded {
            Ok(Ok(build)) => {
                tracing::info!(build = %build.id, "serving new build");
                self.live.set(build);
                self.failed = None;
                return Outcome::Loaded;
            }
            Ok(Err(error)) => format!("{error:#}"),
            Err(error) => format!("build loader panicked: {error}"),
        };
        match &serving {
            Some(old) => {
                tracing::error!(build = %id, serving = %old.id, error, "could not load the published build; still serving the previous one")
            }
            None => {
                tracing::error!(build = %id, error, "could not load the published build; serving health only until a build loads")
            }
        }
        self.failed = Some((id, stamp));
        Outcome::Failed
    }

    /// Checks for a new build every `interval`, forever.
    pub async fn run(mut self, interval: Duration) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            self.check().await;
        }
    }
}
