//! `api`: parses the settings, binds, and serves until SIGINT or SIGTERM.

use anyhow::{Context, Result};
use api::{serve, Config};
use clap::Parser;

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = Config::parse();
    let app = config.app()?;
    let listener =
        tokio::net::TcpListener::bind(config.bind).await.with_context(|| format!("binding {}", config.bind))?;
    let addr = listener.local_addr()?;
    let serving = tokio::spawn(serve(listener, app, shutdown()));
    tracing::info!(%addr, "api listening");
    // On stdout too, for whoever started the api with port 0 (the tests).
    println!("api listening on http://{addr}");
    serving.await.context("the server stopped unexpectedly")?;
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
