//! Picking up newly published builds without a restart.
//!
//! The generator publishes by renaming the `current` link. The api checks
//! the link every `interval`; when it names another build, that build is
//! loaded off the request path and swapped in. An api following a bucket
//! first brings the bucket's `current` into its cache (fetching the build
//! it names, then pointing the cache's link at it), so the rest is the
//! same; while the bucket cannot be reached it serves what it has. A build that fails to load is
//! logged and the one being served stays; it is tried again when its files
//! change, or after a wait that doubles up to a minute.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use shared::site::Layout;

use crate::published::{Build, Live, Settings, Source};

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
    source: Arc<Source>,
    /// The last error following the bucket, logged when it first appears.
    bucket_error: Option<String>,
    settings: Settings,
    live: Arc<Live>,
    /// The build that last failed to load, and when to try it again.
    failed: Option<Failed>,
}

/// A published build that could not be loaded. It is tried again at once
/// when its files change (a `generator build` that repairs it writes its
/// manifest anew), else after a wait that doubles from one second to a
/// minute; its error is logged when it first appears or changes.
struct Failed {
    id: String,
    stamp: Stamp,
    error: String,
    retry_at: Instant,
    wait: Duration,
}

/// Builds an api following a bucket keeps in its cache: the live one, and
/// the one before it.
const CACHED_BUILDS: usize = 2;

const FIRST_RETRY: Duration = Duration::from_secs(1);
const LONGEST_RETRY: Duration = Duration::from_secs(60);

/// Modification times of a build's manifest and of the snapshots folder
/// (a snapshot is written anew by a rename into it).
type Stamp = (Option<SystemTime>, Option<SystemTime>);

fn stamp(layout: &Layout, id: &str) -> Stamp {
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    (modified(&layout.build_dir(id).join("_manifest.json")), modified(&layout.snapshots()))
}

impl Watcher {
    pub fn new(layout: Layout, source: Arc<Source>, settings: Settings, live: Arc<Live>) -> Watcher {
        Watcher { layout, source, bucket_error: None, settings, live, failed: None }
    }

    /// Loads the current build if it differs from the live one.
    pub async fn check(&mut self) -> Outcome {
        if let Source::Bucket { bucket, .. } = self.source.as_ref() {
            match bucket.follow(&self.layout).await {
                Ok(_) => self.bucket_error = None,
                Err(error) => {
                    let error = format!("{error:#}");
                    if self.bucket_error.as_ref() != Some(&error) {
                        tracing::error!(
                            bucket = bucket.url(),
                            error,
                            "cannot follow the bucket's builds; serving what is cached"
                        );
                    }
                    self.bucket_error = Some(error);
                }
            }
        }
        let Some(id) = self.layout.current_build() else { return Outcome::NoBuild };
        let serving = self.live.get();
        if serving.as_ref().is_some_and(|b| b.id == id) {
            return Outcome::Unchanged;
        }
        let stamp = stamp(&self.layout, &id);
        let waiting = self.failed.as_ref().filter(|f| f.id == id && f.stamp == stamp);
        if waiting.is_some_and(|f| Instant::now() < f.retry_at) {
            return Outcome::Unchanged;
        }
        let (layout, settings, files) = (self.layout.clone(), self.settings, self.source.files());
        let previous = serving.clone();
        let build = id.clone();
        let started = Instant::now();
        let loaded =
            tokio::task::spawn_blocking(move || Build::load(&layout, &build, files, settings, previous.as_deref()))
                .await;
        let error = match loaded {
            Ok(Ok(build)) => {
                let load_ms = started.elapsed().as_millis() as u64;
                // Before the swap, so that whoever sees the new build sees
                // the cache as it stays.
                self.prune_cache().await;
                tracing::info!(build = %build.id, load_ms, "serving new build");
                self.live.set(build);
                self.failed = None;
                return Outcome::Loaded;
            }
            Ok(Err(error)) => format!("{error:#}"),
            Err(error) => format!("build loader panicked: {error}"),
        };
        let again = self.failed.take().filter(|f| f.id == id && f.error == error);
        let wait = again.as_ref().map_or(FIRST_RETRY, |f| (f.wait * 2).min(LONGEST_RETRY));
        let retry_in = format!("{} s", wait.as_secs());
        match (&again, &serving) {
            (Some(_), _) => tracing::debug!(build = %id, error, retry_in, "the published build still does not load"),
            (None, Some(old)) => {
                tracing::error!(build = %id, serving = %old.id, error, retry_in, "could not load the published build; still serving the previous one")
            }
            (None, None) => {
                tracing::error!(build = %id, error, retry_in, "could not load the published build; serving health only until a build loads")
            }
        }
        self.failed = Some(Failed { id, stamp, error, retry_at: Instant::now() + wait, wait });
        Outcome::Failed
    }

    /// Removes the builds cached from a bucket but the one being swapped
    /// in and the one served until then (and their bases), what a stopped
    /// fetch left, and the cached route files none of those names.
    async fn prune_cache(&self) {
        let Source::Bucket { objects, .. } = self.source.as_ref() else { return };
        let (layout, objects) = (self.layout.clone(), objects.clone());
        let pruned = tokio::task::spawn_blocking(move || {
            let builds = shared::site::prune(&layout, CACHED_BUILDS)?;
            anyhow::Ok((builds, objects.prune(&layout.builds())?))
        });
        match pruned.await {
            Ok(Ok((0, 0))) => {}
            Ok(Ok((builds, files))) => tracing::info!(builds, files, "cached builds and files removed"),
            Ok(Err(error)) => tracing::warn!(error = %format!("{error:#}"), "could not prune the cached builds"),
            Err(error) => tracing::warn!(%error, "the cache's pruner panicked"),
        }
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
