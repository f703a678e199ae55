//! Writing a build and publishing it atomically.
//!
//! ```text
//! site/builds/<id>/...        one directory per build, never changed once named
//! site/builds/.staging-<id>/  a build being written
//! site/current -> builds/<id> the live build; replaced by one rename
//! data/snapshots/<id>.duckdb  the build's snapshot, written before the flip
//! ```
//!
//! A crash at any point leaves `current` pointing at a complete build.
//! Files whose bytes did not change since the previous build are hard-linked
//! from it rather than written again.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::manifest::{self, Entry, Manifest};

#[derive(Debug, Clone)]
pub struct Layout {
    pub site: PathBuf,
    pub data: PathBuf,
}

impl Layout {
    pub fn new(site: impl Into<PathBuf>, data: impl Into<PathBuf>) -> Layout {
        Layout { site: site.into(), data: data.into() }
    }

    pub fn builds(&self) -> PathBuf {
        self.site.join("builds")
    }

    pub fn build_dir(&self, id: &str) -> PathBuf {
        self.builds().join(id)
    }

    pub fn current_link(&self) -> PathBuf {
        self.site.join("current")
    }

    pub fn snapshots(&self) -> PathBuf {
        self.data.join("snapshots")
    }

    pub fn snapshot(&self, manifest: &Manifest) -> PathBuf {
        self.snapshots().join(&manifest.snapshot)
    }

    pub fn warehouse(&self) -> PathBuf {
        self.data.join("warehouse.duckdb")
    }

    /// The build `current` points at, if any.
    pub fn current_build(&self) -> Option<String> {
        let target = fs::read_link(self.current_link()).ok()?;
        Some(target.file_name()?.to_str()?.to_string())
    }

    /// The live build's directory and manifest, if there is a live build.
    pub fn current(&self) -> Result<Option<(PathBuf, Manifest)>> {
        let Some(id) = self.current_build() else { return Ok(None) };
        let dir = self.build_dir(&id);
        Ok(Some((dir.clone(), Manifest::load(&dir)?)))
    }
}

/// One rendered answer, ready to be written.
#[derive(Debug, Clone)]
pub struct File {
    pub route: String,
    pub path: String,
    pub representation: crate::http::Representation,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageReport {
    pub files: usize,
    pub written: usize,
    pub linked: usize,
    /// The build already existed (same data as a kept build).
    pub reused: bool,
}

/// The manifest of a build made of `files` and `kept` entries of the
/// previous build. Computing it first names the build, so its snapshot can
/// be written while its files are.
pub fn manifest_of(files: &[File], kept: &[Entry]) -> Result<Manifest> {
    let entries: Vec<Entry> = files
        .iter()
        .map(|f| Entry::new(f.route.clone(), f.path.clone(), &f.representation))
        .chain(kept.iter().cloned())
        .collect();
    let manifest = Manifest::new(entries);
    if let Some(pair) = manifest.routes.windows(2).find(|w| w[0].route == w[1].route) {
        anyhow::bail!("route {} would be written twice", pair[0].route);
    }
    Ok(manifest)
}

/// Writes `files`, and `kept` entries of the previous build, as a complete
/// build directory beside the live one.
pub fn stage(
    layout: &Layout,
    manifest: &Manifest,
    files: &[File],
    kept: &[Entry],
    previous: Option<&(PathBuf, Manifest)>,
) -> Result<StageReport> {
    let previous_dir = previous.map(|(dir, _)| dir.as_path());
    Staging::begin(layout, kept, previous_dir)?.finish(layout, manifest, files, previous)
}

/// A build directory being written under a temporary name. An incremental
/// run begins it, hard-linking the files it keeps from the live build, as
/// soon as it knows which those are: the links are made while the changed
/// files are computed.
pub struct Staging {
    dir: PathBuf,
    linked: usize,
    kept: usize,
}

impl Staging {
    /// Creates a fresh staging directory holding `kept` entries of the
    /// build in `previous`.
    pub fn begin(layout: &Layout, kept: &[Entry], previous: Option<&Path>) -> Result<Staging> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(".staging-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let dir = layout.builds().join(name);
        if dir.exists() {
            fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
        create_parents(&dir, kept.iter().map(|e| e.file.as_str()))?;
        let mut staging = Staging { dir, linked: 0, kept: kept.len() };
        if !kept.is_empty() {
            let previous = previous.context("kept entries need a previous build")?;
            let (_, linked) = parallel_sum(kept, |entry| {
                fs::hard_link(previous.join(&entry.file), staging.dir.join(&entry.file))
                    .with_context(|| format!("linking {}", entry.file))?;
                Ok((0, 1))
            })?;
            staging.linked = linked;
        }
        Ok(staging)
    }

    /// Writes `files` (hard-linking those whose bytes the previous build
    /// already has) and the manifest, and names the directory for the
    /// build. Nothing is live until [`publish`].
    pub fn finish(
        self,
        layout: &Layout,
        manifest: &Manifest,
        files: &[File],
        previous: Option<&(PathBuf, Manifest)>,
    ) -> Result<StageReport> {
        let mut report = StageReport { files: files.len() + self.kept, ..StageReport::default() };
        let final_dir = layout.build_dir(&manifest.build);
        if Manifest::load(&final_dir).is_ok_and(|m| &m == manifest) {
            fs::remove_dir_all(&self.dir).with_context(|| format!("clearing {}", self.dir.display()))?;
            report.reused = true;
            return Ok(report);
        }
        let staging = &self.dir;
        create_parents(staging, files.iter().map(|f| f.path.as_str()))?;
        let reusable = previous.map(|(dir, m)| (dir, m.by_route()));
        let by_route = manifest.by_route();
        let (written, linked) = parallel_sum(files, |file| {
            let target = staging.join(&file.path);
            if let Some((dir, old)) = &reusable {
                let entry = by_route[file.route.as_str()];
                if old.get(file.route.as_str()).is_some_and(|o| o.etag == entry.etag && o.file == entry.file)
                    && fs::hard_link(dir.join(&file.path), &target).is_ok()
                {
                    return Ok((0, 1));
                }
            }
            fs::write(&target, &file.representation.body).with_context(|| format!("writing {}", target.display()))?;
            Ok((1, 0))
        })?;
        report.written = written;
        report.linked = linked + self.linked;

        write_synced(&staging.join(manifest::FILE_NAME), &manifest.to_bytes())?;
        if final_dir.exists() {
            // A kept build of the same id but other content cannot exist (the
            // id is a hash of the content); what is there is a partial
            // leftover.
            fs::remove_dir_all(&final_dir)?;
        }
        fs::rename(staging, &final_dir).with_context(|| format!("naming build {}", manifest.build))?;
        sync_dir(&layout.builds())?;
        Ok(report)
    }
}

/// Creates `root` and the folders of `files` under it.
fn create_parents<'a>(root: &Path, files: impl Iterator<Item = &'a str>) -> Result<()> {
    let dirs: BTreeSet<PathBuf> =
        files.filter_map(|f| Path::new(f).parent().map(|p| root.join(p))).chain([root.to_path_buf()]).collect();
    for dir in &dirs {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(())
}

/// Points `current` at the build, in one rename.
pub fn publish(layout: &Layout, manifest: &Manifest) -> Result<()> {
    let temp = layout.site.join(format!(".current-{}", std::process::id()));
    let _ = fs::remove_file(&temp);
    std::os::unix::fs::symlink(Path::new("builds").join(&manifest.build), &temp)
        .with_context(|| format!("linking {}", temp.display()))?;
    fs::rename(&temp, layout.current_link()).context("switching the current build")?;
    sync_dir(&layout.site)
}

/// Removes all but the `keep` newest builds (never the live one), their
/// snapshots, and anything a crashed run left half-written.
pub fn prune(layout: &Layout, keep: usize) -> Result<usize> {
    let current = layout.current_build();
    let mut builds = Vec::new();
    let mut removed = 0;
    for entry in fs::read_dir(layout.builds())? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with(".staging-") {
            fs::remove_dir_all(entry.path())?;
            continue;
        }
        let modified = entry.metadata()?.modified()?;
        builds.push((modified, name));
    }
    builds.sort_by(|a, b| b.cmp(a));
    let kept: BTreeSet<String> =
        builds.iter().take(keep.max(1)).map(|(_, n)| n.clone()).chain(current.clone()).collect();
    for (_, name) in &builds {
        if !kept.contains(name) {
            fs::remove_dir_all(layout.build_dir(name))?;
            removed += 1;
        }
    }
    if let Ok(entries) = fs::read_dir(layout.snapshots()) {
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().to_string();
            let id = name.strip_suffix(".duckdb").unwrap_or(&name);
            if !kept.contains(id) {
                fs::remove_file(entry.path())?;
            }
        }
    }
    Ok(removed)
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)?.sync_all().with_context(|| format!("syncing {}", dir.display()))
}

/// Runs `f` over `items` on the thread pool, adding up the pairs it returns.
fn parallel_sum<T: Sync>(
    items: &[T],
    f: impl Fn(&T) -> Result<(usize, usize)> + Sync + Send,
) -> Result<(usize, usize)> {
    use rayon::prelude::*;
    items.par_iter().map(f).try_reduce(|| (0, 0), |a, b| Ok((a.0 + b.0, a.1 + b.1)))
}
