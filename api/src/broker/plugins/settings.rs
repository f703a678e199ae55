//! The plugin catalog's settings, from the flags (a leaf: the app holds
//! them).

use std::sync::Arc;

/// The catalog's settings, from the flags.
#[derive(Debug)]
pub struct Settings {
    /// Where a GitHub repository's archive at a commit is fetched:
    /// `{archive_host}/{owner}/{repo}/tar.gz/{commit}`, as
    /// `codeload.github.com` serves them.
    pub archive_host: String,
    /// The largest archive fetched, compressed.
    pub max_archive_bytes: usize,
    pub limits: plugins::archive::Limits,
    /// The most sources one import may name, a marketplace's included.
    pub max_sources: usize,
    /// Tells the import worker a job is waiting.
    pub wake: Arc<tokio::sync::Notify>,
}
