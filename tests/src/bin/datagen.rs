//! `datagen`: deterministic test data, written as the generator's sources
//! are (`make datasets`, the benchmarks). Not part of a production install.

use std::path::PathBuf;

use anyhow::{Context, Result};
use broker_model::generate;
use clap::Parser;
use generator::broker::{AgentsFile, FeedbackFile};
use hcs20::Topics;
use tests::datagen;

#[derive(Parser)]
#[command(name = "datagen", about = "Deterministic HCS-20 corpora and agent indexes")]
struct Args {
    /// Output folder (one folder per topic is written into it).
    #[arg(long)]
    out: PathBuf,
    /// `rules`: the checked-in ledger corpus; `random`: --messages of
    /// realistic traffic; `agents`: an agent index of --agents agents and
    /// their ERC-8004 feedback (`<out>/agents.json`, `<out>/feedback.json`),
    /// and the api's demo agents (`<out>/demo-agents.json`).
    #[arg(long, default_value = "random")]
    preset: String,
    #[arg(long, default_value_t = 10_000)]
    messages: usize,
    /// Size ticks and accounts for this many messages (default: --messages);
    /// a corpus continues any smaller one of the same scale and seed.
    #[arg(long)]
    scale: Option<usize>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Agents in an `agents` index.
    #[arg(long, default_value_t = 300)]
    agents: usize,
    /// Write the index as `agents.jsonl` (one agent per line: the form the
    /// generator streams fastest) instead of `agents.json`.
    #[arg(long)]
    lines: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.preset == "agents" {
        let agents = generate::agents(args.agents, args.seed);
        let feedback = generate::feedback(&agents, args.seed);
        std::fs::create_dir_all(&args.out)?;
        let write = |name: &str, bytes: serde_json::Result<Vec<u8>>| -> Result<()> {
            let path = args.out.join(name);
            let mut bytes = bytes?;
            bytes.push(b'\n');
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
        };
        match args.lines {
            true => {
                let mut text = Vec::with_capacity(agents.len() * 2048);
                for agent in &agents {
                    serde_json::to_writer(&mut text, agent)?;
                    text.push(b'\n');
                }
                text.pop();
                write("agents.jsonl", Ok(text))?;
            }
            false => write("agents.json", serde_json::to_vec_pretty(&AgentsFile { agents }))?,
        }
        write("feedback.json", serde_json::to_vec_pretty(&FeedbackFile { feedback }))?;
        let demo = generate::demo_agents(api::demo::A2A_ADDR, api::demo::HTTP_ADDR);
        write("demo-agents.json", serde_json::to_vec_pretty(&AgentsFile { agents: demo }))?;
        eprintln!("{} agents and their feedback written to {}", args.agents, args.out.display());
        return Ok(());
    }
    let (corpus, pretty) = match args.preset.as_str() {
        "rules" => (datagen::rules_corpus(Topics::MAINNET), true),
        "random" => {
            let scale = args.scale.unwrap_or(args.messages);
            (datagen::random_corpus_scaled(args.messages, scale, args.seed, Topics::MAINNET), false)
        }
        other => anyhow::bail!("unknown preset {other:?}: expected rules, random or agents"),
    };
    let files = corpus.write_pages(&args.out, pretty).with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!("{} messages in {files} files written to {}", corpus.len(), args.out.display());
    Ok(())
}
