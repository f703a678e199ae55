//! Opening DuckDB files: the one way the warehouse and the snapshots are
//! opened, so that a file this DuckDB cannot read is recognised in one place.
//!
//! almanac links one DuckDB ([`library_version`]). Files written by a newer
//! DuckDB are refused by it at open: every data folder written while almanac
//! compiled DuckDB 2.0 from source holds such files (storage version 69; the
//! 1.5 library reads 64 to 68). Such a refusal becomes an [`Unreadable`]
//! error that names the file, the DuckDB that wrote it (from the file's own
//! header) and this one, so that callers can match on it and say what to do.

use std::ffi::CStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::ffi;
pub use crate::sql::Access;
use crate::sql::{self, Connection};

/// The version of the DuckDB library this program runs with (`v1.5.6`).
pub fn library_version() -> &'static str {
    // SAFETY: DuckDB returns a pointer to a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(ffi::duckdb_library_version()) };
    version.to_str().unwrap_or("an unknown version")
}

/// A DuckDB file that this DuckDB refuses to read: written by another
/// (newer) DuckDB, or not a DuckDB database at all.
#[derive(Debug, thiserror::Error)]
#[error("{} {}, which this almanac's DuckDB ({}) cannot read", .path.display(), written(.written_by), library_version())]
pub struct Unreadable {
    pub path: PathBuf,
    /// The DuckDB that wrote the file, as its header names it (`v2.0.0`).
    pub written_by: Option<String>,
    #[source]
    pub source: sql::Error,
}

fn written(by: &Option<String>) -> String {
    match by {
        Some(version) => format!("was written by DuckDB {version}"),
        None => "is not a DuckDB database".into(),
    }
}

/// Opens a DuckDB file (creating it for [`Access::ReadWrite`]). The error is
/// an [`Unreadable`] when DuckDB refuses the file itself, a plain error
/// naming the file otherwise (a held lock, permissions, a full disk).
pub fn open(path: &Path, access: Access) -> Result<Connection> {
    match Connection::open(path, access) {
        Ok(conn) => Ok(conn),
        Err(source) if refuses_the_file(&source) => {
            // Only the message needs the header: a file too short or not
            // DuckDB's names no writer.
            let written_by = header(path).ok().flatten().and_then(|h| h.written_by);
            Err(Unreadable { path: path.to_path_buf(), written_by, source }.into())
        }
        Err(source) => Err(anyhow::Error::new(source).context(format!("opening {}", path.display()))),
    }
}

/// Adds `fix` (what the operator should do) to an [`Unreadable`] error;
/// any other error is returned as it is.
/// Whether the database has a table `name` in its main schema.
pub fn has_table(conn: &Connection, name: &str) -> Result<bool> {
    let sql = "SELECT count(*) > 0 FROM information_schema.tables WHERE table_name = ? AND table_schema = 'main'";
    Ok(conn.query_row(sql, [name], |row| row.get(0))?)
}

pub fn advise(error: anyhow::Error, fix: &'static str) -> anyhow::Error {
    match error.is::<Unreadable>() {
        true => error.context(fix),
        false => error,
    }
}

/// Whether DuckDB's error is about the file's format rather than about
/// access to it. DuckDB reports both as IO errors, so its wording decides;
/// the tests pin it against a real file of each kind.
fn refuses_the_file(error: &sql::Error) -> bool {
    let message = error.to_string();
    ["database file with version number", "is not a valid DuckDB database file"]
        .iter()
        .any(|phrase| message.contains(phrase))
}

/// What a DuckDB file's main header says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The storage version number in the main header (DuckDB 2.0 writes a
    /// placeholder there that older readers refuse, and the real number
    /// further in).
    pub storage: u64,
    /// The library that wrote the file (`v1.5.6`), recorded since DuckDB 0.10.
    pub written_by: Option<String>,
}

/// Reads the main header: 8 bytes of checksum, the magic `DUCK`, the
/// storage version (u64, little-endian), four u64 flags, then the writing
/// library's version as 32 NUL-padded bytes. `None` when the file is not a
/// DuckDB database.
pub fn header(path: &Path) -> std::io::Result<Option<Header>> {
    let mut bytes = Vec::with_capacity(84);
    std::fs::File::open(path)?.take(84).read_to_end(&mut bytes)?;
    if bytes.len() < 84 || &bytes[8..12] != b"DUCK" {
        return Ok(None);
    }
    let storage = u64::from_le_bytes(bytes[12..20].try_into().expect("eight bytes"));
    let version = &bytes[52..84];
    let end = version.iter().position(|&b| b == 0).unwrap_or(version.len());
    let written_by = std::str::from_utf8(&version[..end]).ok().filter(|v| !v.is_empty()).map(str::to_string);
    Ok(Some(Header { storage, written_by }))
}

/// Renames an unreadable database (and its write-ahead log) out of the way,
/// to `<name>.<writer version>` (`warehouse.duckdb.v2.0.0`), never over an
/// earlier file. Returns the new name.
pub fn set_aside(unreadable: &Unreadable) -> Result<PathBuf> {
    let path = &unreadable.path;
    let name = path.file_name().context("a database path names a file")?.to_string_lossy().into_owned();
    let label = unreadable.written_by.as_deref().unwrap_or("unreadable");
    let aside = (0..)
        .map(|n| match n {
            0 => path.with_file_name(format!("{name}.{label}")),
            n => path.with_file_name(format!("{name}.{label}.{n}")),
        })
        .find(|candidate| !candidate.exists() && !wal(candidate).exists())
        .expect("some name is free");
    if wal(path).exists() {
        std::fs::rename(wal(path), wal(&aside)).with_context(|| format!("setting aside {}", wal(path).display()))?;
    }
    std::fs::rename(path, &aside).with_context(|| format!("setting aside {}", path.display()))?;
    Ok(aside)
}

/// DuckDB's write-ahead log of a database file: the same name plus `.wal`.
fn wal(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".wal");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> PathBuf {
        shared::checkout::path("tests/fixtures/written-by-duckdb-2.0.0.duckdb")
    }

    fn temp(label: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("almanac-database-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_linked_library_is_the_pinned_release() {
        // The crate's release (1.10506.x) and the fetched library must agree;
        // a mismatch would mean the bindings describe another C API.
        assert_eq!(library_version(), "v1.5.6");
    }

    #[test]
    fn a_file_of_our_own_names_its_writer_in_the_header() {
        let dir = temp("own");
        let path = dir.join("own.duckdb");
        open(&path, Access::ReadWrite).unwrap().execute_batch("CREATE TABLE t (a INTEGER); CHECKPOINT").unwrap();
        let header = header(&path).unwrap().expect("a DuckDB header");
        assert_eq!(header.written_by.as_deref(), Some(library_version()));
        // 1.5 writes the oldest storage version it can (that of 1.0), so
        // DuckDB 1.0 and later read its files.
        assert_eq!(header.storage, 64);
        open(&path, Access::ReadOnly).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_written_by_duckdb_2_is_unreadable_and_names_its_writer() {
        for access in [Access::ReadOnly, Access::ReadWrite] {
            let dir = temp("newer");
            let path = dir.join("warehouse.duckdb");
            std::fs::copy(fixture(), &path).unwrap();
            let before = std::fs::read(&path).unwrap();
            let error = open(&path, access).unwrap_err();
            let unreadable = error.downcast_ref::<Unreadable>().expect("an Unreadable error");
            assert_eq!(unreadable.written_by.as_deref(), Some("v2.0.0"));
            let message = format!("{error:#}");
            assert!(message.contains(&path.display().to_string()), "{message}");
            assert!(message.contains("DuckDB v2.0.0") && message.contains("v1.5.6"), "{message}");
            assert_eq!(std::fs::read(&path).unwrap(), before, "refusing changes nothing");
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn what_is_and_is_not_the_file_itself() {
        // (contents of an existing file, whether DuckDB's refusal is the file's fault)
        let check = |label: &str, contents: &[u8], unreadable: bool| {
            let dir = temp(label);
            let path = dir.join("x.duckdb");
            std::fs::write(&path, contents).unwrap();
            let error = open(&path, Access::ReadOnly).expect_err(label);
            assert_eq!(error.downcast_ref::<Unreadable>().is_some(), unreadable, "{label}: {error:#}");
            assert!(format!("{error:#}").contains(&path.display().to_string()), "{label}: {error:#}");
            std::fs::remove_dir_all(dir).unwrap();
        };
        check("junk", &[0x5a; 5000], true);
        check("short", b"hello", true);
        check("newer", &std::fs::read(fixture()).unwrap(), true);
        // A folder where the file should be: not a format problem, so no
        // advice to delete anything.
        let dir = temp("folder");
        std::fs::create_dir(dir.join("x.duckdb")).unwrap();
        let error = open(&dir.join("x.duckdb"), Access::ReadOnly).unwrap_err();
        assert!(error.downcast_ref::<Unreadable>().is_none(), "{error:#}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn setting_aside_keeps_earlier_copies_and_moves_the_log() {
        let dir = temp("aside");
        let path = dir.join("warehouse.duckdb");
        let mut asides = Vec::new();
        for round in 0..2 {
            std::fs::copy(fixture(), &path).unwrap();
            std::fs::write(wal(&path), format!("log {round}")).unwrap();
            let error = open(&path, Access::ReadWrite).unwrap_err();
            let aside = set_aside(error.downcast_ref::<Unreadable>().unwrap()).unwrap();
            assert!(!path.exists() && !wal(&path).exists());
            assert_eq!(std::fs::read_to_string(wal(&aside)).unwrap(), format!("log {round}"));
            asides.push(aside);
        }
        assert_eq!(asides[0], dir.join("warehouse.duckdb.v2.0.0"));
        assert_eq!(asides[1], dir.join("warehouse.duckdb.v2.0.0.1"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
