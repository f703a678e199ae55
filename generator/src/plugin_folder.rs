//! A plugin's folder on disk read into a `plugins::tree::Tree`, for
//! `generator scan-plugin` (and the tests' corpus): regular files only,
//! in path order. A symbolic link, a device or a path that is not UTF-8 is
//! refused with its path named, as an import refuses them in an archive:
//! the scan then sees exactly what an import of the same files would.

use std::path::Path;

use anyhow::{bail, Context, Result};
use plugins::tree::Tree;

/// The regular files under `root`. O(files + bytes).
pub fn read(root: &Path) -> Result<Tree> {
    let mut tree = Tree::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
            let path = entry.path();
            let kind = entry.file_type().with_context(|| format!("reading {}", path.display()))?;
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let relative = path.strip_prefix(root).expect("under the root");
                let Some(relative) = relative.to_str() else { bail!("{}: the path is not UTF-8", path.display()) };
                let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                tree.insert(relative, bytes).with_context(|| format!("{}", path.display()))?;
            } else {
                bail!("{}: not a regular file or a folder (a link or a device is not scanned)", path.display());
            }
        }
    }
    Ok(tree)
}
