//! Reading a published build from the bucket into an api's local cache.
//!
//! [`Bucket::follow`] copies what loading a build takes (its index, host
//! configurations and manifest, its search folder, its snapshot) into the
//! cache's own site and data folders, laid out as the generator lays out
//! its own, and then points the cache's `current` at it: the api's watcher
//! loads it as it loads any build. Route files are not copied: an
//! [`ObjectCache`] fetches each when its route is first asked for and
//! keeps it, content-addressed, for every later build that has it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use futures_util::TryStreamExt;
use object_store::ObjectStoreExt;
use shared::index::Index;
use shared::manifest;
use shared::site::Layout;
use tokio::io::AsyncWriteExt;

use crate::Bucket;

impl Bucket {
    /// Makes the bucket's live build the cache's: fetched when the cache
    /// lacks it, then `current` pointed at it. Returns the build's id,
    /// `None` when the bucket has none published.
    pub async fn follow(&self, cache: &Layout) -> Result<Option<String>> {
        let Some(id) = self.current().await? else { return Ok(None) };
        if cache.current_build().as_deref() != Some(id.as_str()) {
            self.fetch_build(cache, &id).await?;
            shared::site::point_current(cache, &id)?;
        }
        Ok(Some(id))
    }

    /// Copies build `id` into `cache` (and its base first, for a layer),
    /// unless it is there: a build folder is named only once its manifest
    /// is in it, after everything else.
    pub async fn fetch_build(&self, cache: &Layout, id: &str) -> Result<()> {
        let dir = cache.build_dir(id);
        if dir.join(manifest::FILE_NAME).is_file() {
            return Ok(());
        }
        anyhow::ensure!(self.has_build(id).await?, "build {id} is not in {} whole", self.url);
        std::fs::create_dir_all(cache.builds()).with_context(|| format!("creating {}", cache.builds().display()))?;
        let staging = scratch(&cache.builds(), id);
        std::fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
        let under = format!("builds/{id}");
        for name in self.names_under(&under).await? {
            if name != manifest::FILE_NAME && !name.contains('/') {
                self.download(&format!("{under}/{name}"), &staging.join(&name)).await?;
            }
        }
        let index = Index::open(&staging)?;
        anyhow::ensure!(index.build() == Some(id), "the index of build {id} in {} names another", self.url);
        if let Some(base) = index.base() {
            Box::pin(self.fetch_build(cache, base)).await?;
        }
        self.fetch_search(cache, id).await?;
        let snapshots = cache.snapshots();
        let snapshot = snapshots.join(index.snapshot().unwrap_or_default());
        if !snapshot.is_file() {
            std::fs::create_dir_all(&snapshots).with_context(|| format!("creating {}", snapshots.display()))?;
            let name = snapshot.file_name().and_then(|n| n.to_str()).context("the index names no snapshot")?;
            let temp = scratch(&snapshots, name);
            self.download(&format!("snapshots/{name}"), &temp).await?;
            std::fs::rename(&temp, &snapshot).with_context(|| format!("naming {}", snapshot.display()))?;
        }
        drop(index);
        self.download(&format!("{under}/{}", manifest::FILE_NAME), &staging.join(manifest::FILE_NAME)).await?;
        if dir.exists() {
            // A folder without a manifest: left by a fetch that was stopped.
            std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
        std::fs::rename(&staging, &dir).with_context(|| format!("naming {}", dir.display()))
    }

    /// Copies build `id`'s search folder into `cache`, unless it is there
    /// or the build has none.
    async fn fetch_search(&self, cache: &Layout, id: &str) -> Result<()> {
        if cache.search(id).join("meta.json").exists() {
            return Ok(());
        }
        let under = format!("search/{id}");
        let names = self.names_under(&under).await?;
        if names.is_empty() {
            // A build without agents has no search folder.
            return Ok(());
        }
        let indexes = cache.search_indexes();
        std::fs::create_dir_all(&indexes).with_context(|| format!("creating {}", indexes.display()))?;
        let staged = scratch(&indexes, id);
        std::fs::create_dir_all(&staged).with_context(|| format!("creating {}", staged.display()))?;
        for name in names {
            self.download(&format!("{under}/{name}"), &staged.join(&name)).await?;
        }
        shared::site::name_search_index(cache, &staged, id)
    }

    /// Streams object `relative` into a new file at `path`, synced.
    async fn download(&self, relative: &str, path: &Path) -> Result<()> {
        let context = || format!("fetching {relative} from {}", self.url);
        let mut stream = self.store.get(&self.key(relative)).await.with_context(context)?.into_stream();
        let mut file = tokio::fs::File::create(path).await.with_context(|| format!("creating {}", path.display()))?;
        while let Some(chunk) = stream.try_next().await.with_context(context)? {
            file.write_all(&chunk).await.with_context(|| format!("writing {}", path.display()))?;
        }
        file.sync_all().await.with_context(|| format!("syncing {}", path.display()))
    }
}

/// A name in `folder` for a file or folder being written, never one a
/// reader looks for (it starts with a dot) nor another writer's; one a
/// fetch that was stopped leaves is removed by `shared::site::prune`, as
/// the generator's own staging is.
fn scratch(folder: &Path, name: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    folder.join(format!(".staging-fetch-{}-{}-{name}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// Route files fetched from the bucket when first asked for, kept in a
/// folder by object key: a file many builds share is fetched once.
pub struct ObjectCache {
    bucket: Arc<Bucket>,
    dir: PathBuf,
    runtime: tokio::runtime::Handle,
}

impl ObjectCache {
    /// A cache in `dir` (created) of `bucket`'s objects, fetched on
    /// `runtime`.
    pub fn new(bucket: Arc<Bucket>, dir: PathBuf, runtime: tokio::runtime::Handle) -> Result<ObjectCache> {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(ObjectCache { bucket, dir, runtime })
    }

    /// Removes the cached objects no build in the folder `builds` names
    /// (each build's index read whole: O(routes) of the cached builds), and
    /// what an interrupted write left; returns how many files it removed.
    /// A file removed while a request is reading it is fetched again.
    pub fn prune(&self, builds: &Path) -> Result<usize> {
        let mut kept = std::collections::HashSet::new();
        for entry in std::fs::read_dir(builds).with_context(|| format!("reading {}", builds.display()))? {
            let path = entry?.path();
            if path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.')) {
                continue;
            }
            let index = Index::open(&path)?;
            kept.extend(index.iter().filter(|r| !r.removed).map(|r| crate::record_key(&r)));
        }
        let mut removed = 0;
        for entry in std::fs::read_dir(&self.dir).with_context(|| format!("reading {}", self.dir.display()))? {
            let entry = entry?;
            if !kept.contains(entry.file_name().to_string_lossy().as_ref()) {
                std::fs::remove_file(entry.path()).with_context(|| format!("removing {}", entry.path().display()))?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// The bytes of object `key`, from the cache or else from the bucket;
    /// `check` judges them before they are kept or returned (a cached
    /// file that fails it is fetched again). Blocks the calling thread on
    /// the fetch: call it from a blocking thread, never an async task.
    pub fn read(&self, key: &str, check: impl Fn(&[u8]) -> Result<(), String>) -> Result<Vec<u8>, String> {
        debug_assert!(!key.contains('/') && !key.starts_with('.'), "{key}");
        let path = self.dir.join(key);
        if let Ok(bytes) = std::fs::read(&path) {
            if check(&bytes).is_ok() {
                return Ok(bytes);
            }
        }
        let relative = format!("objects/{key}");
        let fetched = self.runtime.block_on(self.bucket.get_if_there(&relative));
        let bytes = match fetched {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err(format!("is not in {} (object {key})", self.bucket.url)),
            Err(error) => return Err(format!("cannot be fetched: {error:#}")),
        };
        check(&bytes)?;
        let temp = scratch(&self.dir, key);
        // A file that cannot be kept is still served; it is fetched again
        // when next asked for.
        if std::fs::write(&temp, &bytes).and_then(|_| std::fs::rename(&temp, &path)).is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        Ok(bytes.to_vec())
    }
}
