//! `api`: serves the published site from memory with correct HTTP caching,
//! and picks up new builds as the generator publishes them.

mod broker;
mod conditional;
mod error;
mod limit;
mod mcp;
mod reload;
mod router;
mod state;
mod tools;

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
    /// Host names (any port) the MCP endpoint answers to, besides the
    /// loopback names; DNS-rebinding protection (comma-separated).
    #[arg(long = "mcp-host", env = "ALMANAC_MCP_HOSTS", value_delimiter = ',')]
    mcp_hosts: Vec<String>,
    /// Origins allowed to call the MCP endpoint from a browser, besides
    /// pages of an allowed host (comma-separated).
    #[arg(long = "mcp-origin", env = "ALMANAC_MCP_ORIGINS", value_delimiter = ',')]
    mcp_origins: Vec<String>,
    /// The provider that embeds search queries; with the build's agent
    /// embeddings (same model) it turns on hybrid `POST /api/v1/search`.
    #[command(flatten)]
    embeddings: almanac::broker::embed::ProviderArgs,
    /// Time allowed for embedding one query, in milliseconds.
    #[arg(long, env = "ALMANAC_EMBEDDINGS_TIMEOUT_MS", default_value_t = 5_000)]
    embeddings_timeout_ms: u64,
    /// Largest body of a broker search request, in bytes (413 above).
    #[arg(long, env = "ALMANAC_SEARCH_MAX_BODY", default_value_t = 65_536)]
    search_max_body: usize,
    /// Largest MCP request body, in bytes (413 above).
    #[arg(long, env = "ALMANAC_MCP_MAX_BODY", default_value_t = 65_536)]
    mcp_max_body: usize,
    /// Guard JSON routes: requests per minute per client.
    #[arg(long, env = "ALMANAC_GUARD_RATE", default_value_t = 600)]
    guard_rate: u32,
    /// Guard JSON routes: burst above that pace.
    #[arg(long, env = "ALMANAC_GUARD_BURST", default_value_t = 120)]
    guard_burst: u32,
    /// MCP endpoint: requests per minute per client.
    #[arg(long, env = "ALMANAC_MCP_RATE", default_value_t = 300)]
    mcp_rate: u32,
    /// MCP endpoint: burst above that pace.
    #[arg(long, env = "ALMANAC_MCP_BURST", default_value_t = 60)]
    mcp_burst: u32,
    /// Clients tracked per limiter; beyond it, new clients share one bucket
    /// until the next cleanup.
    #[arg(long, env = "ALMANAC_LIMIT_CLIENTS", default_value_t = 100_000)]
    limit_clients: usize,
    /// Seconds between cleanups of idle clients' buckets.
    #[arg(long, env = "ALMANAC_LIMIT_CLEANUP", default_value_t = 60)]
    limit_cleanup: u64,
    /// Proxies whose X-Forwarded-For is trusted (comma-separated addresses).
    #[arg(long = "trusted-proxy", env = "ALMANAC_TRUSTED_PROXIES", value_delimiter = ',')]
    trusted_proxies: Vec<std::net::IpAddr>,
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
    let mut watcher = reload::Watcher::new(layout, limits, live.clone());
    if watcher.check().await == reload::Outcome::NoBuild {
        tracing::warn!(site = %config.site_dir.display(), "no build published yet; serving health only until one is");
    }
    tokio::spawn(watcher.run(Duration::from_millis(config.reload_ms.max(10))));

    let listener =
        tokio::net::TcpListener::bind(config.bind).await.with_context(|| format!("binding {}", config.bind))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "api listening");
    // On stdout too, for whoever started the api with port 0 (the tests).
    println!("api listening on http://{addr}");
    let mut access = mcp::Access::loopback();
    access.hosts.extend(config.mcp_hosts.iter().cloned());
    access.origins = config.mcp_origins.clone();
    let guard = router::GuardLimits {
        access,
        max_body: config.mcp_max_body,
        json: limit::Limiter::new(
            limit::Rate { per_minute: config.guard_rate, burst: config.guard_burst },
            config.limit_clients,
        ),
        mcp: limit::Limiter::new(
            limit::Rate { per_minute: config.mcp_rate, burst: config.mcp_burst },
            config.limit_clients,
        ),
        proxies: config.trusted_proxies.clone(),
    };
    let vectors = match config.embeddings.config(Duration::from_millis(config.embeddings_timeout_ms), 1) {
        Some(provider) => Some(broker::Vectors::new(almanac::broker::embed::Provider::new(provider)?)),
        None => None,
    };
    let app = Arc::new(router::App { live, limits, guard, broker_max_body: config.search_max_body, vectors });
    let cleaner = app.clone();
    let every = Duration::from_secs(config.limit_cleanup.max(1));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            cleaner.guard.json.clean();
            cleaner.guard.mcp.clean();
        }
    });
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
