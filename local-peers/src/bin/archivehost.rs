//! A repository archive host for `make run`: every fixture plugin of the
//! scanner's corpus (`plugins/corpus/<name>/plugin/`) served as the
//! repository `corpus/<name>` at one commit, on loopback, at codeload's
//! paths (`local_peers::archive_host`). A commit id is the first 40 hex digits
//! of the SHA-256 of the archive's bytes (archives are written the same
//! for the same files), so it stays the same between runs. The served
//! repositories and their commits are written to `--index` as JSON, for
//! whoever imports them.
//!
//! Runs until interrupted (SIGINT or SIGTERM).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use local_peers::archive_host::{entries_of, tar_gz, ArchiveHost};
use sha2::{Digest, Sha256};

#[derive(Parser)]
#[command(about = "Repository archives of the plugin corpus, on loopback, at codeload's paths")]
struct Args {
    /// Where it listens.
    #[arg(long, default_value = "127.0.0.1:5700")]
    bind: String,
    /// The corpus: a folder per fixture, each with its plugin in `plugin/`.
    #[arg(long)]
    corpus: PathBuf,
    /// Where the served repositories and commits are written.
    #[arg(long)]
    index: PathBuf,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(&args.bind).await.with_context(|| format!("binding {}", args.bind))?;
    let host = ArchiveHost::start_on(listener).await;
    let mut names: Vec<String> = std::fs::read_dir(&args.corpus)
        .with_context(|| format!("reading {}", args.corpus.display()))?
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().join("plugin").is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut index = Vec::new();
    for name in names {
        // The top folder names the commit, so the archive is written twice:
        // once to name it, once with its name.
        let dir = args.corpus.join(&name).join("plugin");
        let draft = tar_gz(&entries_of(&dir, &name));
        let commit = shared::http::hex(&Sha256::digest(&draft))[..40].to_string();
        let archive = tar_gz(&entries_of(&dir, &format!("{name}-{commit}")));
        host.archives.put("corpus", &name, &commit, archive);
        index.push(serde_json::json!({"repository": format!("corpus/{name}"), "commit": commit}));
    }
    let text = serde_json::to_string_pretty(&index)?;
    let partial = args.index.with_extension("partial");
    std::fs::write(&partial, &text).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, &args.index)?;
    println!("archivehost: {} repositories at {}, listed in {}", index.len(), host.url, args.index.display());
    local_peers::interrupted().await?;
    Ok(())
}
