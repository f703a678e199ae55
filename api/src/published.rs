//! The builds the api serves.
//!
//! A [`Build`] is everything one published build answers with: its routes
//! ([`Routes`]: the build's index, mapped, and its files, read when first
//! asked for and kept while asked for), and the analytics model loaded from
//! the build's snapshot for parameters no file covers. [`Live`] holds the
//! current one behind an `Arc`: a request takes its own reference, so a swap
//! never disturbs a request in flight.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use anyhow::{Context, Result};
use bytes::Bytes;
use hcs20::analytics::Analytics;
use hcs20::routes::Limits;
use hcs20::tables;
use shared::index::{Index, Layer, Record, Stack};
use shared::manifest::{Damage, Manifest};
use shared::site::Layout;

use crate::reply::Representation;

/// What loading a build takes besides its files.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub limits: Limits,
    pub mcp_cache: crate::guard::mcp::CacheBounds,
    /// Files kept in memory once read, in bytes.
    pub file_cache_bytes: u64,
}

pub struct Build {
    pub id: String,
    pub routes: Routes,
    pub analytics: Analytics,
    /// The guard datasets (section B), parsed from the very bytes the JSON
    /// routes serve; `None` when the build publishes none.
    pub guard: Option<crate::guard::mcp::Published>,
    /// The agent index and catalogs (section A); `None` when the build
    /// publishes none.
    pub broker: Option<Arc<crate::broker::agents::Agents>>,
    /// Renders the pages of agents changed since the build, framed as the
    /// build frames its own.
    pub pages: pages::Renderer,
}

/// A build's routes: its index (`_manifest.idx`: its header read and its
/// slots mapped, so opening a build costs the same at any size; a lookup
/// reads one record), with its base's when the build is a layer (a route
/// the layer does not hold is the base's, its file in the base's folder),
/// and its files.
/// A file is read when its route is first asked for, only from inside the
/// build directory, and checked against its length and ETag; what is asked
/// for stays in memory up to a bound, the rest is read again (from the page
/// cache, as a rule). A file that is not what the index says is never
/// served: its route answers an error naming the damage.
pub struct Routes {
    files: Files,
    dir: PathBuf,
    /// The base's folder, when the build is a layer.
    base_dir: Option<PathBuf>,
    index: Stack,
    /// By route: a route asked for again is found without reading the
    /// index or its file again.
    kept: quick_cache::sync::Cache<String, Arc<Representation>, Weight>,
}

/// Where the api's builds come from.
pub enum Source {
    /// The site folder's `current`, pointed by a generator on this machine
    /// (or on a disk this machine shares).
    Folder,
    /// A bucket's `current` (`generator publish`), followed into the site
    /// and data folders, which are then a cache of the bucket.
    Bucket { bucket: Arc<build_store::Bucket>, objects: Arc<build_store::ObjectCache> },
}

impl Source {
    /// Where the route files of the builds from here are read from.
    pub fn files(&self) -> Files {
        match self {
            Source::Folder => Files::Folders,
            Source::Bucket { objects, .. } => Files::Bucket(objects.clone()),
        }
    }
}

/// Where a build's route files are read from.
#[derive(Clone)]
pub enum Files {
    /// The build's folder (and its base's), as the generator wrote them.
    Folders,
    /// Objects of the bucket the build was published to, each fetched
    /// when its route is first asked for and kept on disk: the build's
    /// folder in the local cache holds only its index and manifest.
    Bucket(Arc<build_store::ObjectCache>),
}

/// A kept representation weighs its body's bytes.
#[derive(Clone)]
struct Weight;

impl quick_cache::Weighter<String, Arc<Representation>> for Weight {
    fn weight(&self, route: &String, r: &Arc<Representation>) -> u64 {
        (r.body.len() + route.len()) as u64 + 256
    }
}

impl Routes {
    /// The routes of the build in `dir`: its index, or for a build written
    /// before there was one, an index made from its JSON manifest.
    pub fn open(builds: &std::path::Path, id: &str, files: Files, cache_bytes: u64) -> Result<Routes> {
        let dir = builds.join(id);
        let index = match Stack::open(builds, id) {
            Ok(index) => index,
            // A build from before the index, or from before its version
            // (never a layer: layers came with this one).
            Err(_) if !shared::index::current_in(&dir) => Stack { top: Index::of(&Manifest::load(&dir)?)?, base: None },
            Err(error) => return Err(error),
        };
        anyhow::ensure!(
            index.top.build() == Some(id),
            "the index of build {id} names build {:?}",
            index.top.build().unwrap_or_default()
        );
        let base_dir = index.top.base().map(|base| builds.join(base));
        // Items estimated at 4 KiB each, for the cache's tables.
        let items = (cache_bytes / 4096).clamp(16, 1 << 24) as usize;
        let kept = quick_cache::sync::Cache::with_weighter(items, cache_bytes.max(1), Weight);
        Ok(Routes { files, dir, base_dir, index, kept })
    }

    /// The records of the build's index and of its base's (a layer's):
    /// read from their headers.
    pub fn records(&self) -> (usize, Option<usize>) {
        (self.index.top.len(), self.index.base.as_ref().map(Index::len))
    }

    pub fn contains(&self, route: &str) -> bool {
        self.index.get(route).is_some()
    }

    /// The snapshot the build's index names.
    pub fn snapshot(&self) -> &str {
        self.index.top.snapshot().unwrap_or_default()
    }

    /// The representation of `route`: `None` when the build has no such
    /// route, an error when its file is not what the index says.
    pub fn get(&self, route: &str) -> Option<Result<Arc<Representation>, Damage>> {
        match self.kept(route) {
            Some(kept) => Some(Ok(kept)),
            None => self.load(route),
        }
    }

    /// [`Routes::get`] for a route not kept: its file read, checked and
    /// then kept.
    pub fn load(&self, route: &str) -> Option<Result<Arc<Representation>, Damage>> {
        let (record, layer) = self.index.get(route)?;
        Some(self.read(&record, layer).map(|r| {
            let r = Arc::new(r);
            self.kept.insert(route.to_string(), r.clone());
            r
        }))
    }

    /// The representation of `route` when it is kept in memory.
    pub fn kept(&self, route: &str) -> Option<Arc<Representation>> {
        self.kept.get(route)
    }

    /// `route`'s headers and validators as its index record gives them,
    /// with no body (its file is not read): what a 304 needs.
    pub fn head(&self, route: &str) -> Option<Result<Representation, Damage>> {
        let (record, _) = self.index.get(route)?;
        Some(representation(&record, Bytes::new()))
    }

    /// Reads and checks `record`'s file, in the folder of its `layer` or
    /// from the bucket. Blocks (a bucket's object is fetched on the
    /// calling thread): called off the async threads.
    fn read(&self, record: &Record, layer: Layer) -> Result<Representation, Damage> {
        let damage = |problem: String| Damage { file: record.file.to_string(), problem };
        let bytes = match &self.files {
            Files::Folders => {
                let dir = match layer {
                    Layer::Top => &self.dir,
                    Layer::Base => self.base_dir.as_ref().expect("a record of the base has one"),
                };
                let bytes = shared::site::read_inside(dir, &record.file).map_err(damage)?;
                record.check(&bytes)?;
                bytes
            }
            Files::Bucket(objects) => objects
                .read(&build_store::record_key(record), |bytes| record.check(bytes).map_err(|d| d.problem))
                .map_err(damage)?,
        };
        representation(record, Bytes::from(bytes))
    }
}

/// `body` with the headers `record` gives it.
fn representation(record: &Record, body: Bytes) -> Result<Representation, Damage> {
    let modified = std::time::UNIX_EPOCH + std::time::Duration::from_secs(record.last_modified);
    Representation::new(
        body,
        &record.etag_text(),
        &httpdate::fmt_http_date(modified),
        record.content_type,
        record.cache_control,
    )
    .map_err(|e| Damage { file: record.file.to_string(), problem: format!("has a header the index spells badly: {e}") })
}

impl Build {
    /// Loads a build: its index, the guard files (read and checked: the
    /// MCP endpoint answers from them), and the snapshot (which must record
    /// this build). Other files are read when asked for. What is not as
    /// the build says fails the whole build, naming it: the api then keeps
    /// serving the build it has.
    pub fn load(
        layout: &Layout,
        id: &str,
        files: Files,
        settings: Settings,
        previous: Option<&Build>,
    ) -> Result<Build> {
        let started = Instant::now();
        let dir = layout.build_dir(id);
        // Test-only failures (`shared::fault`), on swaps, not the first load.
        let inject = |point: &'static str| match previous.is_some() && shared::fault::fails_once(point) {
            true => Err(anyhow::anyhow!("injected fault at {point}")),
            false => Ok(()),
        };
        let meta = std::fs::symlink_metadata(&dir).with_context(|| format!("reading {}", dir.display()))?;
        anyhow::ensure!(meta.is_dir(), "{} is not a folder (a build directory is never a link)", dir.display());
        let routes = Routes::open(&layout.builds(), id, files, settings.file_cache_bytes)?;
        inject("load-manifest")?;
        let guard = match guard_data::ROUTES.iter().any(|r| routes.contains(r)) {
            true => {
                let datasets = guard_data::parse(|route| match routes.get(route)? {
                    Ok(r) => Some(r.body.to_vec()),
                    Err(damage) => {
                        tracing::error!(%damage, "a guard file is damaged");
                        None
                    }
                })
                .with_context(|| format!("build {id} is damaged: its guard datasets cannot be read"))?;
                Some(crate::guard::mcp::Published::new(datasets, settings.mcp_cache))
            }
            false => None,
        };
        inject("load-files")?;
        // Each part's time, in the log: where a slow start goes.
        let files_ms = started.elapsed().as_millis() as u64;
        let snapshot = duckdb_files::snapshot::open_for_build(&layout.snapshots().join(routes.snapshot()), id)?;
        let analytics = tables::load_analytics(&snapshot, settings.limits.max_page_size)
            .with_context(|| format!("loading the snapshot of build {id}"))?;
        let snapshot_ms = started.elapsed().as_millis() as u64 - files_ms;
        let broker = load_broker(&snapshot, &layout.search(id), previous)
            .with_context(|| format!("loading the agent index of build {id}"))?;
        inject("load-snapshot")?;
        let ms = started.elapsed().as_millis() as u64;
        let (records, base_records) = routes.records();
        tracing::info!(
            build = id,
            records,
            base_records,
            ms,
            files_ms,
            snapshot_ms,
            agents_ms = ms - files_ms - snapshot_ms,
            "build loaded"
        );
        let pages = pages::Renderer::new(guard.is_some(), broker.is_some());
        Ok(Build { id: id.to_string(), routes, analytics, guard, broker, pages })
    }
}

/// The build's agent index: the previous build's when the snapshot's broker
/// tables are the same (most builds change only the ledger), else loaded
/// (the search index folder the generator wrote, `search`, opened: mapped, not built).
fn load_broker(
    snapshot: &duckdb_files::snapshot::Connection,
    search: &std::path::Path,
    previous: Option<&Build>,
) -> Result<Option<Arc<crate::broker::agents::Agents>>> {
    use broker_site::store;
    let fingerprint = store::fingerprint(snapshot)?;
    let kept = previous.and_then(|p| p.broker.as_ref()).filter(|b| fingerprint.as_ref() == Some(&b.fingerprint));
    if let Some(broker) = kept {
        tracing::info!("agent index unchanged; kept");
        return Ok(Some(broker.clone()));
    }
    let Some(stored) = store::load(snapshot)? else { return Ok(None) };
    let folder = search::folder::open(search)?;
    let feedback = crate::broker::agents::Feedback::Mapped(folder.feedback);
    Ok(Some(Arc::new(crate::broker::agents::Agents::new(stored, folder.index, feedback, folder.vectors)?)))
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
