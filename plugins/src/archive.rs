//! A repository archive (`.tar.gz`, as forges serve a commit) unpacked in
//! memory into a [`Tree`], refusing what an import must never write or
//! follow: symbolic and hard links, devices and FIFOs, absolute paths, any
//! `..` component, a file where a folder is. Two bounds hold whatever the
//! archive claims: the number of entries, and the bytes the decompressed
//! stream may expand to (headers and padding included), so a small
//! archive that inflates without end (a bomb) stops at the bound.
//!
//! Cost: one pass over the decompressed stream, O(expanded bytes); memory
//! is the files kept, at most the expanded bound.

use std::io::Read;

use crate::tree::{PathError, Tree};

/// How much an archive may hold.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Entries of any kind (files, folders, headers).
    pub max_entries: usize,
    /// Bytes of the decompressed tar stream.
    pub max_expanded_bytes: u64,
}

/// Why an archive is refused, naming the entry at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveError {
    /// Not gzip, or not a tar stream inside.
    Corrupt(String),
    Link(String),
    /// A device, FIFO or other entry that is not a file or a folder.
    Special(String),
    UnsafePath(String),
    Clash(String),
    TooManyEntries(usize),
    TooLarge(u64),
}

impl std::fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArchiveError::Corrupt(why) => write!(f, "not a .tar.gz archive: {why}"),
            ArchiveError::Link(path) => write!(f, "{path:?} is a link; archives with links are not imported"),
            ArchiveError::Special(path) => write!(f, "{path:?} is not a regular file or a folder"),
            ArchiveError::UnsafePath(path) => write!(f, "{path:?} is absolute or climbs out with `..`"),
            ArchiveError::Clash(path) => write!(f, "{path:?} is both a file and a folder"),
            ArchiveError::TooManyEntries(max) => write!(f, "the archive holds more than {max} entries"),
            ArchiveError::TooLarge(max) => write!(f, "the archive expands past {max} bytes"),
        }
    }
}

impl std::error::Error for ArchiveError {}

/// The regular files of the gzip-compressed tar archive `bytes`.
pub fn unpack_tar_gz(bytes: &[u8], limits: &Limits) -> Result<Tree, ArchiveError> {
    let bounded =
        Bounded { inner: flate2::read::GzDecoder::new(bytes), left: limits.max_expanded_bytes, exceeded: false };
    let mut archive = tar::Archive::new(bounded);
    let mut tree = Tree::new();
    let mut entries_seen = 0usize;
    let entries = archive.entries().map_err(|e| ArchiveError::Corrupt(e.to_string()))?;
    for entry in entries {
        let mut entry = match entry {
            Ok(entry) => entry,
            Err(error) if is_past_bound(&error) => return Err(ArchiveError::TooLarge(limits.max_expanded_bytes)),
            Err(error) => return Err(ArchiveError::Corrupt(error.to_string())),
        };
        entries_seen += 1;
        if entries_seen > limits.max_entries {
            return Err(ArchiveError::TooManyEntries(limits.max_entries));
        }
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        use tar::EntryType;
        match entry.header().entry_type() {
            EntryType::Regular | EntryType::Continuous => {}
            EntryType::Directory | EntryType::XGlobalHeader => continue,
            EntryType::Symlink | EntryType::Link => return Err(ArchiveError::Link(path)),
            _ => return Err(ArchiveError::Special(path)),
        }
        if path.starts_with('/') || path.split('/').any(|part| part == "..") {
            return Err(ArchiveError::UnsafePath(path));
        }
        let mut contents = Vec::new();
        if let Err(error) = entry.read_to_end(&mut contents) {
            return Err(if is_past_bound(&error) {
                ArchiveError::TooLarge(limits.max_expanded_bytes)
            } else {
                ArchiveError::Corrupt(error.to_string())
            });
        }
        tree.insert(&path, contents).map_err(|error| match error {
            PathError::Unsafe(path) => ArchiveError::UnsafePath(path),
            PathError::Clash(path) => ArchiveError::Clash(path),
        })?;
    }
    Ok(tree)
}

/// The error [`Bounded`] reads with once the bound is passed.
const PAST_BOUND: &str = "the decompressed archive passed its bound";

fn is_past_bound(error: &std::io::Error) -> bool {
    error.get_ref().is_some_and(|inner| inner.to_string() == PAST_BOUND)
}

/// A reader that fails (rather than ending early, which a tar reader
/// would take for a truncated archive) once more than `left` bytes came.
struct Bounded<R> {
    inner: R,
    left: u64,
    exceeded: bool,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.exceeded || buf.is_empty() {
            return if self.exceeded { Err(std::io::Error::other(PAST_BOUND)) } else { Ok(0) };
        }
        let wanted = buf.len().min(usize::try_from(self.left.saturating_add(1)).unwrap_or(usize::MAX));
        let read = self.inner.read(&mut buf[..wanted])?;
        if read as u64 > self.left {
            self.exceeded = true;
            return Err(std::io::Error::other(PAST_BOUND));
        }
        self.left -= read as u64;
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const LIMITS: Limits = Limits { max_entries: 64, max_expanded_bytes: 1 << 20 };

    /// An entry as a test writes it: the header's bytes set by hand, so that
    /// a hostile name or type is written as it is (the builder refuses them).
    struct Raw<'a> {
        path: &'a str,
        kind: tar::EntryType,
        data: &'a [u8],
        link: &'a str,
    }

    fn file<'a>(path: &'a str, data: &'a [u8]) -> Raw<'a> {
        Raw { path, kind: tar::EntryType::Regular, data, link: "" }
    }

    fn tar_gz(entries: &[Raw]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for raw in entries {
            let mut header = tar::Header::new_ustar();
            let name = &mut header.as_old_mut().name;
            name[..raw.path.len()].copy_from_slice(raw.path.as_bytes());
            header.set_entry_type(raw.kind);
            header.set_size(raw.data.len() as u64);
            header.set_mode(0o644);
            if !raw.link.is_empty() {
                header.as_old_mut().linkname[..raw.link.len()].copy_from_slice(raw.link.as_bytes());
            }
            header.set_cksum();
            builder.append(&header, raw.data).unwrap();
        }
        let tar = builder.into_inner().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar).unwrap();
        gz.finish().unwrap()
    }

    #[test]
    fn a_forge_archive_unpacks_to_its_files() {
        let archive = tar_gz(&[
            Raw {
                path: "pax_global_header",
                kind: tar::EntryType::XGlobalHeader,
                data: b"52 comment=0123\n",
                link: "",
            },
            Raw { path: "repo-0123/", kind: tar::EntryType::Directory, data: b"", link: "" },
            file("repo-0123/.codex-plugin/plugin.json", b"{}"),
            file("repo-0123/README.md", b"# hi"),
        ]);
        let tree = unpack_tar_gz(&archive, &LIMITS).unwrap();
        let paths: Vec<&str> = tree.files().map(|(p, _)| p).collect();
        assert_eq!(paths, ["repo-0123/.codex-plugin/plugin.json", "repo-0123/README.md"]);
        assert_eq!(tree.file("repo-0123/README.md"), Some(&b"# hi"[..]));
    }

    /// Each hostile archive is refused, naming why.
    #[test]
    fn hostile_archives_are_refused() {
        let link = |kind| Raw { path: "repo/link", kind, data: b"", link: "/etc/passwd" };
        let special = |kind| Raw { path: "repo/dev", kind, data: b"", link: "" };
        let zeros = vec![0u8; 4 << 20];
        let many: Vec<String> = (0..65).map(|i| format!("repo/{i}")).collect();
        let many: Vec<Raw> = many.iter().map(|p| file(p, b"x")).collect();
        let cases: Vec<(&str, Vec<u8>, ArchiveError)> = vec![
            ("a symbolic link", tar_gz(&[link(tar::EntryType::Symlink)]), ArchiveError::Link("repo/link".into())),
            ("a hard link", tar_gz(&[link(tar::EntryType::Link)]), ArchiveError::Link("repo/link".into())),
            ("a device", tar_gz(&[special(tar::EntryType::Char)]), ArchiveError::Special("repo/dev".into())),
            ("a FIFO", tar_gz(&[special(tar::EntryType::Fifo)]), ArchiveError::Special("repo/dev".into())),
            ("a climb", tar_gz(&[file("repo/../../evil", b"x")]), ArchiveError::UnsafePath("repo/../../evil".into())),
            ("an inner ..", tar_gz(&[file("repo/a/../b", b"x")]), ArchiveError::UnsafePath("repo/a/../b".into())),
            (
                "an absolute path",
                tar_gz(&[file("/etc/cron.d/x", b"x")]),
                ArchiveError::UnsafePath("/etc/cron.d/x".into()),
            ),
            (
                "a clash",
                tar_gz(&[file("repo/a", b"x"), file("repo/a/b", b"y")]),
                ArchiveError::Clash("repo/a/b".into()),
            ),
            ("a bomb", tar_gz(&[file("repo/zeros", &zeros)]), ArchiveError::TooLarge(1 << 20)),
            ("too many entries", tar_gz(&many), ArchiveError::TooManyEntries(64)),
            ("not gzip", b"PK\x03\x04 not a tarball".to_vec(), ArchiveError::Corrupt(String::new())),
        ];
        for (what, archive, expected) in cases {
            let got = unpack_tar_gz(&archive, &LIMITS).expect_err(what);
            match (&got, &expected) {
                (ArchiveError::Corrupt(_), ArchiveError::Corrupt(_)) => {}
                _ => assert_eq!(got, expected, "{what}"),
            }
        }
        assert!(tar_gz(&[file("repo/zeros", &zeros)]).len() < 64 << 10, "the bomb is small compressed");
    }
}
