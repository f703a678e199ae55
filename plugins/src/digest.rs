//! A plugin's content digest, as the reference scanner computes it for its
//! `plugin-quality.v1` artifact: one SHA-256 over every file, each fed as
//! its relative path (UTF-8, `/`-separated) and then its bytes, with no
//! separator between them. Folders named `.git`, `__pycache__`, `.venv`,
//! `build` or `dist` are skipped at any depth, and `*.pyc` files anywhere.
//! Files are fed in the order Python's `os.walk` visits them with sorted
//! names: a folder's own files first, then each of its folders. The same
//! files give the same digest whatever their archive or folder: it is the
//! key of `/guard/trust/by-hash/{sha256}`.

use sha2::{Digest as _, Sha256};

use crate::tree::Tree;

/// Folders left out at any depth.
const EXCLUDED_FOLDERS: [&str; 5] = [".git", "__pycache__", ".venv", "build", "dist"];

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ContentDigest {
    pub algorithm: &'static str,
    /// Lower-case hex.
    pub value: String,
    pub included_files: usize,
}

/// The digest of `tree`. O(files + bytes).
pub fn digest(tree: &Tree) -> ContentDigest {
    let mut hasher = Sha256::new();
    let mut included = 0;
    walk(tree, "", &mut hasher, &mut included);
    ContentDigest { algorithm: "sha256", value: format!("{:x}", hasher.finalize()), included_files: included }
}

/// Feeds the files of the folder `dir`, then its folders, by sorted name.
fn walk(tree: &Tree, dir: &str, hasher: &mut Sha256, included: &mut usize) {
    let join = |name: &str| if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") };
    let (files, folders): (Vec<String>, Vec<String>) =
        tree.children(dir).into_iter().map(|name| join(&name)).partition(|path| tree.file(path).is_some());
    for path in files {
        if path.ends_with(".pyc") {
            continue;
        }
        hasher.update(path.as_bytes());
        hasher.update(tree.file(&path).unwrap_or_default());
        *included += 1;
    }
    for folder in folders {
        if !EXCLUDED_FOLDERS.contains(&crate::tree::file_name(&folder)) {
            walk(tree, &folder, hasher, included);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order is the walk's, not the sorted paths': `README.md` (a root
    /// file) before `a/b` although `a/b` sorts first as text; excluded
    /// folders and `.pyc` files change nothing.
    #[test]
    fn files_fed_in_walk_order_with_exclusions() {
        let mut tree = Tree::new();
        for (path, bytes) in [("a/b", "1"), ("README.md", "2"), ("a/c.pyc", "x"), ("dist/x", "y"), ("a/build/z", "w")] {
            tree.insert(path, bytes.as_bytes().to_vec()).unwrap();
        }
        let expected = Sha256::new().chain_update("README.md2").chain_update("a/b1").finalize();
        let got = digest(&tree);
        assert_eq!((got.value, got.included_files), (format!("{expected:x}"), 2));
        let mut alone = Tree::new();
        alone.insert("dist", b"a file named dist".to_vec()).unwrap();
        assert_eq!(digest(&alone).included_files, 1, "only folders are excluded by name");
    }
}
