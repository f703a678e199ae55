//! Writing a build and publishing it atomically.
//!
//! ```text
//! site/builds/<id>/...        one directory per build, never changed once named
//!                             (a layer's holds only what changed since its
//!                             base, whose folder has the rest: `layer`)
//! site/builds/.staging-<id>/  a build being written
//! site/current -> builds/<id> the live build; replaced by one rename
//! data/snapshots/<id>.duckdb  the build's snapshot, written before the flip
//! data/search/<id>/           the build's search index (tantivy), likewise
//! data/search/.staging-<pid>/ a search index being written
//! ```
//!
//! A crash at any point leaves `current` pointing at a complete build.
//! Files whose bytes did not change since the previous build are hard-linked
//! from it rather than written again.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::manifest::{self, Damage, Entry, Manifest};

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

    /// The search indexes of the builds (the api's, not the static hosts').
    pub fn search_indexes(&self) -> PathBuf {
        self.data.join("search")
    }

    /// Build `id`'s search index.
    pub fn search(&self, id: &str) -> PathBuf {
        self.search_indexes().join(id)
    }

    /// Where this run writes a search index before its build is named.
    pub fn search_staging(&self) -> PathBuf {
        self.search_indexes().join(format!(".staging-{}", std::process::id()))
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

/// The manifest of a build's entries (its files', and those kept from
/// the previous build): computing it names the build.
pub fn manifest_of(entries: Vec<Entry>) -> Result<Manifest> {
    let manifest = Manifest::new(entries);
    if let Some(pair) = manifest.routes.windows(2).find(|w| w[0].route() == w[1].route()) {
        anyhow::bail!("route {} would be written twice", pair[0].route());
    }
    Ok(manifest)
}

/// The entries of `files`, computed over the cores.
pub fn entries(files: &[File]) -> Vec<Entry> {
    use rayon::prelude::*;
    files.par_iter().map(|f| Entry::new(&f.route, &f.path, &f.representation)).collect()
}

/// The live build, as a new one reuses its files: a file whose route and
/// bytes are the same is hard-linked from it, not written again.
pub struct Previous<'a> {
    dir: &'a Path,
    routes: BTreeMap<&'a str, &'a Entry>,
}

impl<'a> Previous<'a> {
    pub fn of(live: &'a (PathBuf, Manifest)) -> Previous<'a> {
        Previous { dir: &live.0, routes: live.1.by_route() }
    }
}

/// A build directory being written under a temporary name. An incremental
/// run begins it, hard-linking the files it keeps from the live build, as
/// soon as it knows which those are: the links are made while the changed
/// files are computed.
pub struct Staging {
    dir: PathBuf,
    written: usize,
    linked: usize,
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
        create_parents(&dir, kept.iter().map(|e| e.file()))?;
        let mut staging = Staging { dir, written: 0, linked: 0 };
        if !kept.is_empty() {
            let previous = previous.context("kept entries need a previous build")?;
            let (_, linked) = parallel_sum(kept, |entry| {
                fs::hard_link(previous.join(entry.file()), staging.dir.join(entry.file()))
                    .with_context(|| format!("linking {}", entry.file()))?;
                Ok((0, 1))
            })?;
            staging.linked = linked;
        }
        Ok(staging)
    }

    /// Writes `files` into the build, hard-linking those whose bytes the
    /// `previous` build already has; returns their entries. A build that
    /// streams its files calls this batch by batch.
    pub fn write(&mut self, files: &[File], previous: Option<&Previous>) -> Result<Vec<Entry>> {
        use rayon::prelude::*;
        let staging = &self.dir;
        create_parents(staging, files.iter().map(|f| f.path.as_str()))?;
        let written: Vec<(Entry, bool)> = files
            .par_iter()
            .map(|file| {
                let entry = Entry::new(&file.route, &file.path, &file.representation);
                let target = staging.join(&file.path);
                if let Some(previous) = previous {
                    if previous
                        .routes
                        .get(file.route.as_str())
                        .is_some_and(|o| o.etag == entry.etag && o.file() == entry.file())
                        && fs::hard_link(previous.dir.join(&file.path), &target).is_ok()
                    {
                        return Ok((entry, true));
                    }
                }
                fs::write(&target, &file.representation.body)
                    .with_context(|| format!("writing {}", target.display()))?;
                Ok((entry, false))
            })
            .collect::<Result<_>>()?;
        let linked = written.iter().filter(|(_, linked)| *linked).count();
        self.linked += linked;
        self.written += written.len() - linked;
        Ok(written.into_iter().map(|(entry, _)| entry).collect())
    }

    /// Writes the rest of the build's `files`, `extra` (files of the build
    /// that are not routes: the host configurations, at its root) and the
    /// manifest, and names the directory for the build. Nothing is live
    /// until [`publish`].
    pub fn finish(
        mut self,
        layout: &Layout,
        manifest: &Manifest,
        files: &[File],
        extra: &[(&str, &[u8])],
        previous: Option<&Previous>,
    ) -> Result<StageReport> {
        let final_dir = layout.build_dir(&manifest.build);
        let extra_present = extra.iter().all(|(name, bytes)| fs::read(final_dir.join(name)).is_ok_and(|b| b == *bytes));
        if Manifest::load(&final_dir).is_ok_and(|m| &m == manifest)
            && damaged(&final_dir, manifest).is_empty()
            && extra_present
            && crate::index::Index::open(&final_dir).is_ok()
        {
            fs::remove_dir_all(&self.dir).with_context(|| format!("clearing {}", self.dir.display()))?;
            return Ok(StageReport { files: manifest.routes.len(), reused: true, ..StageReport::default() });
        }
        self.write(files, previous)?;
        let report =
            StageReport { files: manifest.routes.len(), written: self.written, linked: self.linked, reused: false };
        let staging = &self.dir;
        for (name, bytes) in extra {
            debug_assert!(!name.contains('/') && *name != manifest::FILE_NAME, "{name}");
            fs::write(staging.join(name), bytes).with_context(|| format!("writing {name}"))?;
        }
        write_synced_with(&staging.join(crate::index::FILE_NAME), |out| crate::index::write(manifest, out))?;
        write_synced_with(&staging.join(manifest::FILE_NAME), |out| Ok(manifest.write(out)?))?;
        if final_dir.exists() {
            // A build of the same id but other content cannot exist (the id
            // is a hash of the content): what is there is a partial leftover
            // or a damaged build, perhaps the live one. It is set aside in one
            // rename and removed once the new directory has its name, so
            // `current` names a missing directory only between two renames
            // (the api keeps serving what it has loaded meanwhile).
            let aside = layout.builds().join(format!(".damaged-{}-{}", manifest.build, std::process::id()));
            fs::rename(&final_dir, &aside).with_context(|| format!("setting aside {}", final_dir.display()))?;
            fs::rename(staging, &final_dir).with_context(|| format!("naming build {}", manifest.build))?;
            fs::remove_dir_all(&aside).with_context(|| format!("removing {}", aside.display()))?;
        } else {
            fs::rename(staging, &final_dir).with_context(|| format!("naming build {}", manifest.build))?;
        }
        sync_dir(&layout.builds())?;
        Ok(report)
    }
}

/// Rewrites the `extra` files of a published build (files that are not
/// routes of it: the host configurations) whose bytes differ, each by a
/// rename, so a reader finds the old file or the new one. Returns how many
/// it rewrote.
pub fn refresh(dir: &Path, extra: &[(&str, &[u8])]) -> Result<usize> {
    let mut rewritten = 0;
    for (name, bytes) in extra {
        let path = dir.join(name);
        if fs::read(&path).is_ok_and(|b| b == *bytes) {
            continue;
        }
        let temp = dir.join(format!(".{name}.{}", std::process::id()));
        write_synced(&temp, bytes)?;
        fs::rename(&temp, &path).with_context(|| format!("replacing {}", path.display()))?;
        rewritten += 1;
    }
    Ok(rewritten)
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
    point_current(layout, &manifest.build)
}

/// Points `current` at build `id`, in one rename.
pub fn point_current(layout: &Layout, id: &str) -> Result<()> {
    let temp = layout.site.join(format!(".current-{}", std::process::id()));
    let _ = fs::remove_file(&temp);
    std::os::unix::fs::symlink(Path::new("builds").join(id), &temp)
        .with_context(|| format!("linking {}", temp.display()))?;
    fs::rename(&temp, layout.current_link()).context("switching the current build")?;
    sync_dir(&layout.site)
}

/// Removes all but the `keep` newest builds (never the live one), their
/// snapshots and search indexes, and anything a crashed run left
/// half-written.
pub fn prune(layout: &Layout, keep: usize) -> Result<usize> {
    let current = layout.current_build();
    let mut builds = Vec::new();
    let mut removed = 0;
    for entry in fs::read_dir(layout.builds())? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with(".staging-") || name.starts_with(".damaged-") {
            fs::remove_dir_all(entry.path())?;
            continue;
        }
        let modified = entry.metadata()?.modified()?;
        builds.push((modified, name));
    }
    builds.sort_by(|a, b| b.cmp(a));
    let mut kept: BTreeSet<String> =
        builds.iter().take(keep.max(1)).map(|(_, n)| n.clone()).chain(current.clone()).collect();
    // A kept layer keeps its base (read from its index's header).
    let bases: Vec<String> = kept
        .iter()
        .filter_map(|id| crate::index::Index::open(&layout.build_dir(id)).ok()?.base().map(str::to_string))
        .collect();
    kept.extend(bases);
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
    if let Ok(entries) = fs::read_dir(layout.search_indexes()) {
        for entry in entries {
            let entry = entry?;
            if !kept.contains(entry.file_name().to_string_lossy().as_ref()) {
                fs::remove_dir_all(entry.path())?;
            }
        }
    }
    Ok(removed)
}

/// Names a search index written into `staged` for build `id`: it becomes
/// `data/search/<id>`, unless that is already there (the same build: its
/// agents are the same).
pub fn name_search_index(layout: &Layout, staged: &Path, id: &str) -> Result<()> {
    let named = layout.search(id);
    if named.join("meta.json").exists() {
        return fs::remove_dir_all(staged).with_context(|| format!("removing {}", staged.display()));
    }
    if named.exists() {
        fs::remove_dir_all(&named).with_context(|| format!("removing {}", named.display()))?;
    }
    fs::rename(staged, &named).with_context(|| format!("naming {}", named.display()))?;
    sync_dir(&layout.search_indexes())
}

/// Gives build `to` the search index of build `from` (a layer whose agents
/// are its base's): its files hard-linked into a folder named for `to`.
pub fn link_search_index(layout: &Layout, from: &str, to: &str) -> Result<()> {
    let (source, named) = (layout.search(from), layout.search(to));
    if named.join("meta.json").exists() {
        return Ok(());
    }
    let staged = layout.search_staging();
    if staged.exists() {
        fs::remove_dir_all(&staged).with_context(|| format!("clearing {}", staged.display()))?;
    }
    fs::create_dir_all(&staged).with_context(|| format!("creating {}", staged.display()))?;
    // A search index folder is flat: its files, no folders.
    for entry in fs::read_dir(&source).with_context(|| format!("reading {}", source.display()))? {
        let path = entry?.path();
        let target = staged.join(path.file_name().expect("an entry has a name"));
        fs::hard_link(&path, &target).with_context(|| format!("linking {}", target.display()))?;
    }
    name_search_index(layout, &staged, to)
}

/// Writes a file through a buffer as `write` makes its bytes, and syncs it
/// (the build's files, and a search index's columns).
pub fn write_synced_with(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<fs::File>) -> Result<()>,
) -> Result<()> {
    let file = fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    write(&mut out).with_context(|| format!("writing {}", path.display()))?;
    let file = out.into_inner().map_err(|e| e.into_error()).with_context(|| format!("writing {}", path.display()))?;
    file.sync_all().with_context(|| format!("syncing {}", path.display()))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes).with_context(|| format!("writing {}", path.display()))?;
    file.sync_all().with_context(|| format!("syncing {}", path.display()))
}

fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)?.sync_all().with_context(|| format!("syncing {}", dir.display()))
}

/// A build directory read back, trusting nothing on disk: a file is read
/// only when its path stays inside the directory through real folders (no
/// symbolic link, which could lead anywhere), and is checked against its
/// manifest entry.
pub struct BuildFiles<'a> {
    dir: &'a Path,
    /// Every folder the manifest's files are in, and why it cannot hold
    /// them (`None`: a real folder, reached through real folders). Checked
    /// once, when the build is opened.
    folders: BTreeMap<PathBuf, Option<String>>,
}

impl<'a> BuildFiles<'a> {
    /// The files `manifest` lists in the build directory `dir`, which must
    /// itself be a folder, not a link to one.
    pub fn open(dir: &'a Path, manifest: &Manifest) -> Result<BuildFiles<'a>> {
        let meta = fs::symlink_metadata(dir).with_context(|| format!("reading {}", dir.display()))?;
        anyhow::ensure!(meta.is_dir(), "{} is not a folder (a build directory is never a link)", dir.display());
        // Parents before children (BTreeMap order), so a folder under a
        // bad one inherits its verdict.
        let mut folders: BTreeMap<PathBuf, Option<String>> = BTreeMap::new();
        for entry in &manifest.routes {
            let mut folder = PathBuf::new();
            for part in Path::new(entry.file()).parent().into_iter().flat_map(Path::components) {
                folder.push(part);
                folders.entry(folder.clone()).or_default();
            }
        }
        let folder_list: Vec<PathBuf> = folders.keys().cloned().collect();
        for folder in folder_list {
            let inherited = folder.parent().and_then(|p| folders.get(p).cloned().flatten());
            let verdict = inherited.or_else(|| match fs::symlink_metadata(dir.join(&folder)) {
                Ok(meta) if meta.is_dir() => None,
                Ok(_) => Some(format!("is under {}, which is not a folder", folder.display())),
                Err(error) => Some(format!("cannot be read: {error}")),
            });
            folders.insert(folder, verdict);
        }
        Ok(BuildFiles { dir, folders })
    }

    /// The bytes of `entry`'s file, when they are what the manifest says.
    pub fn read(&self, entry: &Entry) -> Result<Vec<u8>, Damage> {
        let bytes =
            self.read_inside(entry.file()).map_err(|problem| Damage { file: entry.file().to_string(), problem })?;
        entry.check(&bytes)?;
        Ok(bytes)
    }

    fn read_inside(&self, file: &str) -> Result<Vec<u8>, String> {
        let relative = inside(file)?;
        if let Some(Some(problem)) = relative.parent().and_then(|folder| self.folders.get(folder)) {
            return Err(problem.clone());
        }
        read_regular(&self.dir.join(relative))
    }
}

/// `file` as a path that stays inside the folder it is relative to.
fn inside(file: &str) -> Result<&Path, String> {
    let relative = Path::new(file);
    match !file.is_empty() && relative.components().all(|c| matches!(c, std::path::Component::Normal(_))) {
        true => Ok(relative),
        false => Err("is not a path inside the build".into()),
    }
}

/// The bytes of `path`, which must be a regular file (not a link).
fn read_regular(path: &Path) -> Result<Vec<u8>, String> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => fs::read(path).map_err(|error| format!("cannot be read: {error}")),
        Ok(_) => Err("is not a regular file".into()),
        Err(error) => Err(format!("cannot be read: {error}")),
    }
}

/// The bytes of `file` (a path relative to the build directory `dir`),
/// read only when the path stays inside `dir` through real folders and
/// names a regular file; else why not. For one file at a time (the api
/// reads a build's files as they are asked for): each folder on the way is
/// looked at, where [`BuildFiles`] looks at each once for a whole build.
pub fn read_inside(dir: &Path, file: &str) -> Result<Vec<u8>, String> {
    let relative = inside(file)?;
    let mut folder = dir.to_path_buf();
    for part in relative.parent().into_iter().flat_map(Path::components) {
        folder.push(part);
        match fs::symlink_metadata(&folder) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(format!("is under {}, which is not a folder", folder.display())),
            Err(error) => return Err(format!("cannot be read: {error}")),
        }
    }
    read_regular(&dir.join(relative))
}

/// Every file of the build in `dir` that is not what its manifest says
/// (read and hashed on the thread pool).
pub fn damaged(dir: &Path, manifest: &Manifest) -> Vec<Damage> {
    use rayon::prelude::*;
    match BuildFiles::open(dir, manifest) {
        Ok(files) => manifest.routes.par_iter().filter_map(|entry| files.read(entry).err()).collect(),
        Err(error) => vec![Damage { file: dir.display().to_string(), problem: format!("{error:#}") }],
    }
}

/// Runs `f` over `items` on the thread pool, adding up the pairs it returns.
fn parallel_sum<T: Sync>(
    items: &[T],
    f: impl Fn(&T) -> Result<(usize, usize)> + Sync + Send,
) -> Result<(usize, usize)> {
    use rayon::prelude::*;
    items.par_iter().map(f).try_reduce(|| (0, 0), |a, b| Ok((a.0 + b.0, a.1 + b.1)))
}
