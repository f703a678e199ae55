//! A repository archive as an import fetches it: unpacking never panics
//! and keeps its bounds; every path kept is relative, normal and inside;
//! the plugins found in it scan to a score of at most 100.
#![no_main]
use libfuzzer_sys::fuzz_target;

use plugins::archive::{unpack_tar_gz, Limits};

const LIMITS: Limits = Limits { max_entries: 64, max_expanded_bytes: 1 << 18 };

fuzz_target!(|data: &[u8]| {
    let Ok(tree) = unpack_tar_gz(data, &LIMITS) else { return };
    let mut kept = 0usize;
    for (path, bytes) in tree.files() {
        assert!(!path.is_empty() && !path.starts_with('/'), "{path:?}");
        assert!(path.split('/').all(|part| !part.is_empty() && part != "." && part != ".."), "{path:?}");
        kept += bytes.len();
    }
    assert!(kept as u64 <= LIMITS.max_expanded_bytes);
    let tree = plugins::locate::strip_top_folder(tree);
    for plugin in plugins::locate::plugins(&tree, "").plugins {
        let files = plugins::locate::subtree(&tree, &plugin.root);
        assert!(plugins::scan::report(&files, "fuzzed").score <= 100);
    }
});
