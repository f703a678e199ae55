//! A local EVM chain for `make run`: anvil on loopback with the
//! Programmable Secrets contracts deployed, kept in a folder between runs
//! (anvil's `--state`, dumped every few seconds and at the end). The
//! deployment is written as a manifest the api reads (`--secrets-chain`)
//! once the contracts are there: deployed at the first run, found again
//! (their code still on the chain) at the next.
//!
//! Runs until interrupted (SIGINT or SIGTERM), then stops anvil so that it
//! writes its state.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use local_peers::evm::{Anvil, AnvilOptions, Chain};
use programmable_secrets::deployment::Deployment;
use serde_json::json;

#[derive(Parser)]
#[command(about = "A local EVM chain on loopback with the Programmable Secrets contracts deployed")]
struct Args {
    /// The anvil binary (`make evm` fetches it).
    #[arg(long, env = "ALMANAC_ANVIL")]
    anvil: PathBuf,
    /// Where anvil's JSON-RPC listens.
    #[arg(long, default_value = "127.0.0.1:8545")]
    bind: String,
    /// The folder the chain and its deployment are kept in.
    #[arg(long)]
    state: PathBuf,
    /// Where the deployment's manifest is written once the contracts are
    /// on the chain.
    #[arg(long)]
    manifest: PathBuf,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.state).with_context(|| format!("creating {}", args.state.display()))?;
    let _ = std::fs::remove_file(&args.manifest);
    let state = args.state.join("anvil-state.json");
    let anvil = Anvil::start_with(&args.anvil, AnvilOptions { bind: &args.bind, state: Some(&state) })?;
    let chain = Chain::new(&anvil.url);
    let kept = args.state.join("deployment.json");
    let deployment = match std::fs::read_to_string(&kept).ok().and_then(|text| Deployment::parse(&text).ok()) {
        Some(found) if deployed(&chain, &found).await? => Deployment { rpc_url: anvil.url.clone(), ..found },
        _ => local_peers::evm::deploy_protocol(&chain, "anvil").await.context("deploying the contracts")?,
    };
    let text = serde_json::to_string_pretty(&deployment.manifest())?;
    std::fs::write(&kept, &text)?;
    let partial = args.manifest.with_extension("partial");
    std::fs::write(&partial, &text)?;
    std::fs::rename(&partial, &args.manifest)?;
    println!(
        "evmnet: anvil at {}, the vault at {:#x}, the payment module at {:#x}",
        anvil.url, deployment.policy_vault, deployment.payment_module
    );
    local_peers::interrupted().await?;
    anvil.stop();
    Ok(())
}

/// Whether the vault of `deployment` has code on the chain.
async fn deployed(chain: &Chain, deployment: &Deployment) -> Result<bool> {
    let code = chain.rpc("eth_getCode", json!([format!("{:#x}", deployment.policy_vault), "latest"])).await?;
    Ok(code.as_str().is_some_and(|c| c.len() > 2))
}
