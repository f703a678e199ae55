//! `api`: serves the published site from memory with correct HTTP caching,
//! and picks up new builds as the generator publishes them.

mod conditional;
mod error;
mod reload;
mod router;
mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use almanac::routes::Limits;
use almanac::site::Layout;
use anyhow::{Context, Result};
use clap::Parser;

#[derive(Parser)]
#[command(name = "api", version, about = "almanac's api: the published site and the live routes")]
struct Config {
    /// Address to listen on.
    #[arg(long, env = "ALMANAC_BIND", default_value = "127.0.0.1:4000")]
    bind: SocketAddr,
    /// Folder of the build directories and the `current` link.
    #[arg(long, env = "ALMANAC_SITE_DIR", default_value = "site")]
    site_dir: PathBuf,
    /// Folder of the snapshots.
    #[arg(long, env = "ALMANAC_DATA_DIR", default_value = "data")]
    data_dir: PathBuf,
    /// How often to look for a newly published build, in milliseconds.
    #[arg(long, env = "ALMANAC_RELOAD_MS", default_value_t = 1000)]
    reload_ms: u64,
    /// Largest pageSize of holders and transactions (the generator's
    /// --max-page-size or less).
    #[arg(long, env = "ALMANAC_MAX_PAGE_SIZE", default_value_t = 100)]
    max_page_size: usize,
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = Config::parse();
    let layout = Layout::new(&config.site_dir, &config.data_dir);
    let limits = Limits { max_page_size: config.max_page_size.max(almanac::analytics::DEFAULT_PAGE_SIZE) };
    let live = Arc::new(state::Live::default());
    if !reload::check(&layout, limits, &live).await {
        tracing::warn!(site = %config.site_dir.display(), "no build published yet; serving health only until one is");
    }
    tokio::spawn(reload::watch(layout, limits, live.clone(), Duration::from_millis(config.reload_ms.max(10))));

    let listener =
        tokio::net::TcpListener::bind(config.bind).await.with_context(|| format!("binding {}", config.bind))?;
    tracing::info!(addr = %listener.local_addr()?, "api listening");
    let app = Arc::new(router::App { live, limits });
    warp::serve(router::filter(app)).incoming(listener).graceful(shutdown()).run().await;
    tracing::info!("api stopped");
    Ok(())
}

/// Resolves on SIGINT or SIGTERM; in-flight requests then finish.
async fn shutdown() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
