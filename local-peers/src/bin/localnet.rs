//! A small Hedera network on loopback for `make run`: a mirror node and
//! consensus nodes ([`local_peers::network`], the tests' own) that know the dev
//! accounts of `datasets/live/dev-keys.json`, each with 10,000 HBAR. The
//! api inscribes through it (`--hapi-node`, `--inscription-mirror-url`);
//! a generator pointed at the mirror node reads what was written. With
//! `--state` it keeps what it accepted in a file and takes it again at its
//! next start, so topics written by an earlier run (the skills registry's
//! directory among them) are still there.
//!
//! Runs until interrupted (SIGINT or SIGTERM).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use local_peers::mirror::MirrorServer;
use local_peers::network::{self, Network};
use shared::entity::EntityId;

#[derive(Parser)]
#[command(about = "A small Hedera network on loopback: a mirror node and consensus nodes")]
struct Args {
    /// Where the mirror node's REST API listens.
    #[arg(long, default_value = "127.0.0.1:5600")]
    mirror: SocketAddr,
    /// A consensus node: its account and where it listens (HAPI over
    /// gRPC, plaintext), as `0.0.3=127.0.0.1:50211`; repeat for more.
    #[arg(long = "node", default_value = "0.0.3=127.0.0.1:50211")]
    nodes: Vec<String>,
    /// A file to keep the accepted transactions in, and take again at the
    /// next start.
    #[arg(long)]
    state: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let listener =
        tokio::net::TcpListener::bind(args.mirror).await.with_context(|| format!("binding {}", args.mirror))?;
    let mirror = Arc::new(MirrorServer::start_at(listener, Default::default(), Duration::ZERO));
    let keys: serde_json::Value = serde_json::from_str(api::auth::login::DEV_KEYS)?;
    let accounts: Vec<String> = keys["keys"].as_object().context("the dev keys")?.keys().cloned().collect();
    for account in &accounts {
        network::known(&mirror, account);
    }
    let mut nodes = Vec::new();
    for node in &args.nodes {
        let parsed = api::broker::hapi::node::Node::parse(node).map_err(anyhow::Error::msg)?;
        let address = parsed.url.trim_start_matches("http://").to_string();
        let listener = tokio::net::TcpListener::bind(&address).await.with_context(|| format!("binding {address}"))?;
        nodes.push((parsed.account, listener));
    }
    let accounts: Vec<&str> = accounts.iter().map(String::as_str).collect();
    let network = Network::start_on(mirror.clone(), nodes, &accounts);
    if let Some(state) = &args.state {
        let taken = network.keep_in(state)?;
        println!("localnet: {taken} transactions taken again from {}", state.display());
    }
    let listed: Vec<String> =
        network.nodes.iter().map(|(a, at): &(EntityId, SocketAddr)| format!("{a}={at}")).collect();
    println!("localnet: mirror node at {}, consensus nodes {}", mirror.url(), listed.join(", "));
    tokio::signal::ctrl_c().await?;
    Ok(())
}
