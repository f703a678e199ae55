//! The `api` binary's program: parses the settings, binds, and serves
//! until SIGINT or SIGTERM (or runs `login` or `openapi`). The binary's
//! `main` is [`main`], so that the test build `api-with-faults` runs the
//! very same program.

use anyhow::{Context, Result};
use clap::Parser;

use crate::{serve, Config};

/// Parses the settings and serves, or runs the command given.
pub fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = Config::parse();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.io_threads())
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(run(config))
}

async fn run(mut config: Config) -> Result<()> {
    if let Some(crate::config::Command::Login(args)) = &config.command {
        let answer = crate::auth::login::login(&http_client::client(), args, &crate::auth::login::key(args)?).await?;
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(());
    }
    if let Some(crate::config::Command::Openapi) = &config.command {
        println!("{}", serde_json::to_string_pretty(&crate::openapi::document(&crate::routes::table()))?);
        return Ok(());
    }
    if let Some(open_files) = raise_open_files() {
        // Room for what a build swap and the process itself keep open.
        let room = open_files.saturating_sub(256).max(1) as usize;
        if config.max_connections > room {
            tracing::warn!(
                max_connections = config.max_connections,
                open_files,
                lowered_to = room,
                "the connection cap is above the open-file limit; lowered"
            );
            config.max_connections = room;
        }
    }
    let app = config.app()?;
    if config.demo_agents {
        crate::demo::serve(config.demo_a2a_bind, config.demo_http_bind).await;
    }
    let listener =
        tokio::net::TcpListener::bind(config.bind).await.with_context(|| format!("binding {}", config.bind))?;
    let addr = listener.local_addr()?;
    let serving = tokio::spawn(serve(listener, app, shutdown()));
    tracing::info!(%addr, io_threads = config.io_threads(), "api listening");
    // On stdout too, for whoever started the api with port 0 (the tests).
    println!("api listening on http://{addr}");
    serving.await.context("the server stopped unexpectedly")?;
    tracing::info!("api stopped");
    Ok(())
}

/// Raises the soft limit on open files to the hard one (as nginx's
/// `worker_rlimit_nofile` and Go's runtime do: every connection is a file)
/// and returns it; `None` when it cannot be read.
fn raise_open_files() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit write and read the one struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is u64 here, not on every platform
    Some(limit.rlim_cur as u64)
}

/// Resolves on SIGINT or SIGTERM; in-flight requests then finish.
async fn shutdown() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
