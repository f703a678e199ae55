//! The checkout whose tests are running, for the files they read from it
//! (datasets, fixtures).
//!
//! Taken from `CARGO_MANIFEST_DIR` at run time, which cargo sets for every
//! test process, not from `env!` at compile time: a target folder shared by
//! clones at different paths (the per-machine build cache) keeps a test
//! binary compiled in another clone, since cargo fingerprints a workspace
//! member by its path inside the workspace, and `env!` would then name that
//! other clone, or a folder that is gone. The compile-time value stands in
//! when cargo did not start the process (a tool run from the Makefile).

use std::path::PathBuf;

/// The workspace root: every package is one folder below it.
pub fn root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let manifest_dir = manifest_dir.unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir.parent().expect("a package sits one folder below the workspace root").to_path_buf()
}

/// `relative`, a path from the workspace root.
pub fn path(relative: &str) -> PathBuf {
    root().join(relative)
}
