//! The builds the api serves, held in memory.
//!
//! A [`Build`] is everything one published build answers with: the bytes
//! and headers of every manifest route, and the analytics model loaded from
//! the build's snapshot for parameters no file covers. [`Live`] holds the
//! current one behind an `Arc`: a request takes its own reference, so a swap
//! never disturbs a request in flight.

use rustc_hash::FxHashMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use almanac::guard;
use almanac::hcs20::analytics::Analytics;
use almanac::hcs20::routes::Limits;
use almanac::hcs20::tables;
use almanac::manifest::Manifest;
use almanac::site::{BuildFiles, Layout};
use anyhow::{Context, Result};
use bytes::Bytes;

use crate::reply::Representation;

/// What loading a build takes besides its files.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub limits: Limits,
    pub mcp_cache: crate::guard::mcp::CacheBounds,
}

pub struct Build {
    pub id: String,
    /// Every manifest route's representation, by route (a fast hash: the
    /// keys are ours, not an attacker's choice of collisions to aim at,
    /// and a request only looks one up).
    pub routes: FxHashMap<String, Representation>,
    pub analytics: Analytics,
    /// The guard datasets (section B), parsed from the very bytes the JSON
    /// routes serve; `None` when the build publishes none.
    pub guard: Option<crate::guard::mcp::Published>,
    /// The agent index and catalogs (section A); `None` when the build
    /// publishes none.
    pub broker: Option<Arc<crate::broker::agents::Agents>>,
}

impl Build {
    /// Loads a build: manifest, every file (bytes of an unchanged ETag are
    /// shared with `previous` rather than read again; others are checked
    /// against their length and ETag, and read only inside the build
    /// directory), and the snapshot (which must record this build). A file
    /// that is not what the manifest says fails the whole build, naming
    /// the file: the api then keeps serving the build it has.
    pub fn load(layout: &Layout, id: &str, settings: Settings, previous: Option<&Build>) -> Result<Build> {
        let started = Instant::now();
        let dir = layout.build_dir(id);
        let manifest = Manifest::load(&dir)?;
        // Test-only failures (`almanac::fault`), on swaps, not the first load.
        let inject = |point: &'static str| match previous.is_some() && almanac::fault::fails_once(point) {
            true => Err(anyhow::anyhow!("injected fault at {point}")),
            false => Ok(()),
        };
        inject("load-manifest")?;
        let files = BuildFiles::open(&dir, &manifest)?;
        let mut routes = FxHashMap::with_capacity_and_hasher(manifest.routes.len(), Default::default());
        let mut read = 0usize;
        for entry in &manifest.routes {
            let reused = previous
                .and_then(|p| p.routes.get(&entry.route))
                .filter(|r| r.etag() == entry.etag)
                .map(|r| r.body.clone());
            let body = match reused {
                Some(body) => body,
                None => {
                    read += 1;
                    let bytes = files.read(entry).with_context(|| format!("build {id} is damaged"))?;
                    Bytes::from(bytes)
                }
            };
            let representation =
                Representation::new(body, &entry.etag, &entry.last_modified, &entry.content_type, &entry.cache_control)
                    .with_context(|| format!("{}: a header of the manifest", entry.route))?;
            routes.insert(entry.route.clone(), representation);
        }
        inject("load-files")?;
        let guard = match guard::ROUTES.iter().any(|r| routes.contains_key(*r)) {
            true => Some(crate::guard::mcp::Published::new(
                guard::parse(|route| routes.get(route).map(|r| r.body.to_vec()))
                    .with_context(|| format!("reading the guard datasets of build {id}"))?,
                settings.mcp_cache,
            )),
            false => None,
        };
        let snapshot = almanac::snapshot::open_for_build(&layout.snapshot(&manifest), id)?;
        let analytics = tables::load_analytics(&snapshot, settings.limits.max_page_size)
            .with_context(|| format!("loading the snapshot of build {id}"))?;
        let broker =
            load_broker(&snapshot, previous).with_context(|| format!("loading the agent index of build {id}"))?;
        inject("load-snapshot")?;
        tracing::info!(
            build = id,
            routes = routes.len(),
            files_read = read,
            ms = started.elapsed().as_millis() as u64,
            "build loaded"
        );
        Ok(Build { id: id.to_string(), routes, analytics, guard, broker })
    }
}

/// The build's agent index: the previous build's when the snapshot's broker
/// tables are the same (most builds change only the ledger), else loaded.
fn load_broker(
    snapshot: &almanac::snapshot::Connection,
    previous: Option<&Build>,
) -> Result<Option<Arc<crate::broker::agents::Agents>>> {
    use almanac::broker::store;
    let fingerprint = store::fingerprint(snapshot)?;
    let kept = previous.and_then(|p| p.broker.as_ref()).filter(|b| fingerprint.as_ref() == Some(&b.fingerprint));
    if let Some(broker) = kept {
        tracing::info!("agent index unchanged; kept");
        return Ok(Some(broker.clone()));
    }
    Ok(store::load(snapshot)?.map(|stored| Arc::new(crate::broker::agents::Agents::new(stored))))
}

/// The live build, if one is published.
#[derive(Default)]
pub struct Live {
    current: RwLock<Option<Arc<Build>>>,
}

impl Live {
    pub fn get(&self) -> Option<Arc<Build>> {
        self.current.read().expect("lock poisoned").clone()
    }

    pub fn set(&self, build: Build) {
        *self.current.write().expect("lock poisoned") = Some(Arc::new(build));
    }
}
