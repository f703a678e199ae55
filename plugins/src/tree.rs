//! A plugin's files as one value: relative POSIX paths to bytes, sorted.
//!
//! The scanner and the digest read a `Tree`, never a disk, so an import
//! (an archive unpacked in memory) and `generator scan-plugin DIR` (a
//! folder read into one) are scanned alike. A tree holds regular files
//! only: whoever builds it refuses links, devices and paths that climb
//! out or clash with a folder ([`Tree::insert`] checks the last two).
//!
//! Folders are implied by the files under them, as in a git tree: an
//! empty folder does not exist.

use std::collections::BTreeMap;

/// A path the tree refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// Absolute, empty, or climbing out of the plugin.
    Unsafe(String),
    /// A file where the tree has a folder, or under one of its files.
    Clash(String),
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathError::Unsafe(path) => write!(f, "{path:?} is not a relative path inside the plugin"),
            PathError::Clash(path) => write!(f, "{path:?} is both a file and a folder"),
        }
    }
}

impl std::error::Error for PathError {}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    files: BTreeMap<String, Vec<u8>>,
}

impl Tree {
    pub fn new() -> Tree {
        Tree::default()
    }

    /// Adds a file at `path` (normalised: `./` and empty segments dropped,
    /// `..` resolved), refusing an absolute path, one that climbs out, and
    /// one that clashes with a folder or file already there. The same path
    /// again replaces the file. O(depth × log files).
    pub fn insert(&mut self, path: &str, bytes: Vec<u8>) -> Result<(), PathError> {
        let unsafe_path = || PathError::Unsafe(path.to_string());
        if path.starts_with('/') {
            return Err(unsafe_path());
        }
        let normal = normalize(path).filter(|p| !p.is_empty()).ok_or_else(unsafe_path)?;
        let under_a_file = normal.match_indices('/').any(|(at, _)| self.files.contains_key(&normal[..at]));
        if under_a_file || self.is_dir(&normal) {
            return Err(PathError::Clash(normal));
        }
        self.files.insert(normal, bytes);
        Ok(())
    }

    /// Every file, in path order (byte order of the paths).
    pub fn files(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.files.iter().map(|(p, b)| (p.as_str(), b.as_slice()))
    }

    /// The bytes of the file at `path` (a normal path).
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(Vec::as_slice)
    }

    /// The file at `path` as text, invalid UTF-8 replaced.
    pub fn text(&self, path: &str) -> Option<String> {
        self.file(path).map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// Whether a folder holds `path`'s files (`""` is the root).
    pub fn is_dir(&self, path: &str) -> bool {
        if path.is_empty() {
            return !self.files.is_empty();
        }
        let prefix = format!("{path}/");
        self.files.range(prefix.clone()..).next().is_some_and(|(p, _)| p.starts_with(&prefix))
    }

    /// Whether `path` is a file or a folder.
    pub fn exists(&self, path: &str) -> bool {
        self.files.contains_key(path) || self.is_dir(path)
    }

    /// The files under the folder `dir` (`""`: all), in path order.
    pub fn under<'a>(&'a self, dir: &str) -> impl Iterator<Item = (&'a str, &'a [u8])> + 'a {
        let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
        self.files
            .range(prefix.clone()..)
            .take_while(move |(p, _)| p.starts_with(&prefix))
            .map(|(p, b)| (p.as_str(), b.as_slice()))
    }

    /// The names directly in the folder `dir`, files and folders, sorted.
    pub fn children(&self, dir: &str) -> Vec<String> {
        let skip = if dir.is_empty() { 0 } else { dir.len() + 1 };
        let mut names: Vec<String> =
            self.under(dir).map(|(p, _)| p[skip..].split('/').next().unwrap_or_default().to_string()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// `path` with `.` and empty segments dropped and `..` resolved against
/// what precedes it; `None` when it climbs above its start. A leading `/`
/// is read as a relative path's (callers refuse absolute paths first).
pub fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            name => parts.push(name),
        }
    }
    Some(parts.join("/"))
}

/// `base` joined with the relative `path`, normalised; `None` for an
/// absolute `path` or one that climbs out of the root.
pub fn join(base: &str, path: &str) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    normalize(&format!("{base}/{path}"))
}

/// The last segment of a path.
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A path's extension with its dot (`.py`), as Python's `Path.suffix`:
/// none for a name that only starts with a dot.
pub fn suffix(path: &str) -> &str {
    let name = file_name(path);
    match name.rfind('.') {
        Some(0) | None => "",
        Some(at) if at == name.len() - 1 => "",
        Some(at) => &name[at..],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normal_and_stay_inside() {
        for (path, normal) in [
            ("a/b", Some("a/b")),
            ("./a//b/", Some("a/b")),
            ("a/../b", Some("b")),
            ("a/..", Some("")),
            ("..", None),
            ("a/../../b", None),
        ] {
            assert_eq!(normalize(path).as_deref(), normal, "{path}");
        }
        let mut tree = Tree::new();
        assert!(tree.insert("/etc/passwd", vec![]).is_err());
        assert!(tree.insert("../x", vec![]).is_err());
        assert!(tree.insert("./", vec![]).is_err());
        tree.insert("./skills/a/SKILL.md", b"x".to_vec()).unwrap();
        tree.insert("skills-old/b", b"y".to_vec()).unwrap();
        assert_eq!(tree.insert("skills", vec![]), Err(PathError::Clash("skills".into())));
        assert_eq!(tree.insert("skills/a/SKILL.md/x", vec![]), Err(PathError::Clash("skills/a/SKILL.md/x".into())));
        assert!(tree.is_dir("skills") && tree.is_dir("skills/a") && !tree.is_dir("skills/a/SKILL.md"));
        assert!(tree.exists("skills/a/SKILL.md") && !tree.exists("skill"));
        assert_eq!(tree.under("skills").count(), 1, "a sibling with the same prefix is not under it");
        assert_eq!(tree.children(""), ["skills", "skills-old"]);
    }

    #[test]
    fn suffixes_as_python_reads_them() {
        for (path, suffix_) in
            [("a/b.py", ".py"), (".env", ""), ("a/.env.local", ".local"), ("Makefile", ""), ("x.", "")]
        {
            assert_eq!(suffix(path), suffix_, "{path}");
        }
    }
}
