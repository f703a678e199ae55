//! A build's immutable snapshot (`data/snapshots/<build>.duckdb`): a copy
//! of the checkpointed warehouse file, written once under a temporary name
//! and never changed; opened read-only by the api and by analysts. Which
//! tables it holds is each surface's business (`hcs20::tables`,
//! `broker::store`).

use std::path::Path;

/// A snapshot opened for reading (what the api's loaders take).
pub use crate::sql::Connection;
use anyhow::{Context, Result};

use crate::database::{self, Access, Unreadable};

/// Checkpoints the database and copies its file to `path` (through a
/// temporary name): the build's immutable snapshot.
#[tracing::instrument(level = "debug", skip_all)]
pub fn copy_to(conn: &Connection, database: &Path, path: &Path) -> Result<()> {
    conn.execute_batch("CHECKPOINT")?;
    let temp = temp_path(path)?;
    copy_synced(database, &temp).with_context(|| format!("copying {} to {}", database.display(), temp.display()))?;
    name(&temp, path)
}

/// Copies `from` to `to` and syncs the copy.
fn copy_synced(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::copy(from, to)?;
    std::fs::File::open(to)?.sync_all()
}

/// Syncs the copy at `temp` (what was written since [`copy_synced`]) and
/// names it `path`.
fn name(temp: &Path, path: &Path) -> Result<()> {
    std::fs::File::open(temp)
        .and_then(|file| file.sync_all())
        .with_context(|| format!("syncing {}", temp.display()))?;
    std::fs::rename(temp, path).with_context(|| format!("naming {}", path.display()))
}

/// A snapshot copied while the rest of a build is made, before the
/// build's id is known: the warehouse checkpointed and its file copied on
/// a thread of its own ([`Pending::start`]), then the build recorded in
/// the copy and the copy named ([`Pending::finish`]). At a million agents
/// the copy is a gigabyte, a layer's longest write; made beside the
/// exports and the pages, it costs a layer little of its time. Nothing may
/// write to the warehouse until [`Pending::finish`] (or the copy is
/// dropped): the copy is of the file as the checkpoint left it.
pub struct Pending {
    temp: std::path::PathBuf,
    copying: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl Pending {
    /// Checkpoints the database and starts copying its file into `dir`.
    pub fn start(conn: &Connection, database: &Path, dir: &Path) -> Result<Pending> {
        conn.execute_batch("CHECKPOINT")?;
        let temp = temp_path(&dir.join(format!("pending-{}.duckdb", std::process::id())))?;
        let (from, to) = (database.to_path_buf(), temp.clone());
        let copying = std::thread::Builder::new()
            .name("snapshot copy".into())
            // Synced here, beside the rest of the build: the record `finish`
            // adds is then all that is left to sync.
            .spawn(move || copy_synced(&from, &to))
            .context("starting the snapshot's copy")?;
        Ok(Pending { temp, copying: Some(copying) })
    }

    /// Waits for the copy, lets `record` write into it (the build's id and
    /// what it applied), then syncs it and names it `path`; when `path`
    /// already holds this build's snapshot ([`reusable`]), the copy is
    /// dropped and the snapshot kept.
    pub fn finish(mut self, path: &Path, build: &str, record: impl FnOnce(&Connection) -> Result<()>) -> Result<()> {
        self.wait()?;
        if reusable(path, build)? {
            return Ok(());
        }
        {
            let conn = database::open(&self.temp, Access::ReadWrite)?;
            record(&conn)?;
            conn.execute_batch("CHECKPOINT")?;
        }
        let _ = std::fs::remove_file(self.temp.with_extension("tmp.wal"));
        name(&self.temp, path)
    }

    fn wait(&mut self) -> Result<()> {
        let Some(copying) = self.copying.take() else { return Ok(()) };
        let copied = copying.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        copied.with_context(|| format!("copying the warehouse to {}", self.temp.display()))
    }
}

impl Drop for Pending {
    /// A copy never finished (the run failed) is removed.
    fn drop(&mut self) {
        let _ = self.wait();
        for leftover in [self.temp.clone(), self.temp.with_extension("tmp.wal")] {
            let _ = std::fs::remove_file(leftover);
        }
    }
}

/// A fresh temporary name beside `path`.
pub fn temp_path(path: &Path) -> Result<std::path::PathBuf> {
    let dir = path.parent().context("snapshot path has no folder")?;
    std::fs::create_dir_all(dir)?;
    let temp = dir.join(format!(".{}.tmp", path.file_name().unwrap().to_string_lossy()));
    for leftover in [temp.clone(), temp.with_extension("tmp.wal")] {
        let _ = std::fs::remove_file(leftover);
    }
    Ok(temp)
}

/// Opens a snapshot for reading. One this DuckDB cannot read (written by
/// DuckDB 2.0) is an [`Unreadable`] error that says how to replace it.
pub fn open_read_only(path: &Path) -> Result<Connection> {
    const FIX: &str =
        "the build's snapshot cannot be opened: run `generator build --full` to write it anew with this DuckDB";
    database::open(path, Access::ReadOnly).map_err(|error| database::advise(error, FIX))
}

/// The build a snapshot belongs to, from its `build` table (`None` when it
/// has no record of one).
pub fn build_of(conn: &Connection) -> Result<Option<String>> {
    if !database::has_table(conn, "build")? {
        return Ok(None);
    }
    let mut ids = conn.prepare("SELECT value FROM build WHERE key = 'id'")?;
    let id = ids.query_map([], |row| row.get::<_, String>(0))?.next().transpose()?;
    Ok(id)
}

/// Opens the snapshot of build `build` for reading, refusing one that
/// records another build (a snapshot copied or renamed by hand).
pub fn open_for_build(path: &Path, build: &str) -> Result<Connection> {
    let conn = open_read_only(path)?;
    match build_of(&conn)? {
        Some(owner) if owner == build => Ok(conn),
        owner => anyhow::bail!(
            "{} belongs to build {}, not to build {build}",
            path.display(),
            owner.as_deref().unwrap_or("(none recorded)")
        ),
    }
}

/// Whether a snapshot already written for a build can be kept: it exists,
/// this DuckDB reads it (one written by DuckDB 2.0 is written anew), and
/// it records that build.
pub fn reusable(path: &Path, build: &str) -> Result<bool> {
    if !path.exists() {
        return Ok(false);
    }
    match database::open(path, Access::ReadOnly) {
        Ok(conn) if build_of(&conn)?.as_deref() == Some(build) => Ok(true),
        Ok(_) => {
            tracing::warn!(snapshot = %path.display(), build, "the snapshot records another build; writing it anew");
            Ok(false)
        }
        Err(error) if error.is::<Unreadable>() => {
            tracing::warn!(error = format!("{error:#}"), "writing the snapshot anew");
            Ok(false)
        }
        Err(error) => Err(error),
    }
}
