//! The peers almanac reaches, run on loopback as strict as the real
//! services: a Hedera network ([`network`]: consensus nodes and their
//! [`mirror`] node), an EVM chain with the Programmable Secrets contracts
//! ([`evm`], anvil), and a repository archive host ([`archive_host`]).
//!
//! `make run` starts them (the `localnet`, `evmnet` and `archivehost`
//! binaries) and the end-to-end tests start them in process; they live
//! apart from the `tests` crate so that `make run`'s build compiles none
//! of the tests.

pub mod archive_host;
pub mod evm;
pub mod mirror;
pub mod network;

use std::path::{Path, PathBuf};

/// Waits for SIGINT or SIGTERM: how the binaries are ended (`make run`
/// stops them with either).
pub async fn interrupted() -> std::io::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted,
        _ = terminate.recv() => Ok(()),
    }
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

/// An HTTP client for a shared fixture: each test runs its own tokio
/// runtime, and a pooled connection belongs to the runtime that opened it,
/// so connections are not pooled.
pub fn unpooled_client() -> reqwest::Client {
    http_client::builder().pool_max_idle_per_host(0).build().expect("an HTTP client")
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
