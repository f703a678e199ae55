//! The `generator` binary's command line and its runs: one build, or a
//! build every interval (`--watch`). The binary's `main` is [`main`], so
//! that the test build `generator-with-faults` runs the very same
//! program.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use crate::build::{self, BrokerConfig, BuildConfig, GuardConfig, Source};
use crate::message_sources::mirror::MirrorConfig;
use hcs20::routes::Limits;
use hcs20::Topics;
use shared::entity::EntityId;
use shared::site::Layout;

#[derive(Parser)]
#[command(name = "generator", version, about = "almanac's batch generator: sources to DuckDB to a static site")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Ingest new messages, recompute, and publish a build if anything changed.
    Build(Box<BuildArgs>),
    /// Scan an agent plugin's folder as the reference scanner
    /// (`plugin-scanner`) does, and print the report: its score, grade,
    /// categories and findings (docs/plugins.md).
    ScanPlugin(ScanPluginArgs),
    /// Upload a build to S3-compatible object storage and point the
    /// bucket's `current` at it, once every object is there: objects the
    /// bucket holds are not sent again (docs/operating.md).
    Publish(PublishArgs),
}

#[derive(Args)]
struct PublishArgs {
    /// The bucket and prefix, `s3://bucket/prefix`, reached as the AWS
    /// environment variables say (`AWS_ENDPOINT_URL`, `AWS_REGION`,
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`).
    #[arg(long, env = "ALMANAC_BUCKET")]
    to: String,
    /// Folder of the build directories and the `current` link.
    #[arg(long, env = "ALMANAC_SITE_DIR", default_value = "site")]
    site_dir: PathBuf,
    /// Folder of the snapshots and search folders.
    #[arg(long, env = "ALMANAC_DATA_DIR", default_value = "data")]
    data_dir: PathBuf,
    /// The build to publish; the live one (`current`) when not given.
    #[arg(long)]
    build: Option<String>,
    /// Objects uploaded at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Longest one request to the bucket may take, in milliseconds.
    #[arg(long, default_value_t = 60_000)]
    request_timeout_ms: u64,
}

#[derive(Args)]
struct ScanPluginArgs {
    /// The plugin's folder: the one holding `.codex-plugin/plugin.json`.
    dir: PathBuf,
    /// `text` for people, or `json`: the report in the reference's
    /// `scan-result.v1` names.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ReportFormat {
    Text,
    Json,
}

#[derive(Args, Clone)]
struct BuildArgs {
    /// Build again every INTERVAL (`90`, `30s`, `5m`, `1h`) until stopped
    /// (SIGINT or SIGTERM); a failed run is logged and the next one waits
    /// its turn, while the live build keeps serving.
    #[arg(long, value_name = "INTERVAL", value_parser = interval)]
    watch: Option<Duration>,
    /// Print a JSON summary of each build on stdout (counts, each step's
    /// duration, files written and linked).
    #[arg(long)]
    json: bool,
    /// How much lower than a process started beside it the build runs, in
    /// `nice` steps (0 to 19; 0: the same). A build is batch work: an api
    /// on the same machine reads and writes ahead of it, and its searches
    /// (which run at the api's `--search-nice`, 10 too) share the CPUs
    /// with it evenly.
    #[arg(long, env = "ALMANAC_NICE", default_value_t = 10, value_parser = clap::value_parser!(u8).range(0..=19))]
    nice: u8,
    /// Folder of the build directories and the `current` link.
    #[arg(long, env = "ALMANAC_SITE_DIR", default_value = "site")]
    site_dir: PathBuf,
    /// Folder of the warehouse and the snapshots.
    #[arg(long, env = "ALMANAC_DATA_DIR", default_value = "data")]
    data_dir: PathBuf,
    /// Captured mirror pages, one folder per topic (used unless --mirror is given).
    #[arg(long, env = "ALMANAC_LEDGER_DIR", default_value = "datasets/ledger")]
    ledger_dir: PathBuf,
    /// Base URL of a mirror node's REST API (e.g. the mainnet public mirror).
    #[arg(long, env = "ALMANAC_MIRROR_URL")]
    mirror: Option<String>,
    /// Mirror requests in flight at once, per topic.
    #[arg(long, env = "ALMANAC_MIRROR_CONCURRENCY", default_value_t = 16)]
    mirror_concurrency: usize,
    /// Timeout of one mirror request, in seconds.
    #[arg(long, env = "ALMANAC_MIRROR_TIMEOUT", default_value_t = 15)]
    mirror_timeout: u64,
    /// Attempts per mirror request (429, 5xx and transport errors are retried).
    #[arg(long, env = "ALMANAC_MIRROR_ATTEMPTS", default_value_t = 5)]
    mirror_attempts: u32,
    /// The public HCS-20 topic.
    #[arg(long, env = "ALMANAC_PUBLIC_TOPIC", default_value = "0.0.4350190")]
    public_topic: EntityId,
    /// The registry topic announcing other topics.
    #[arg(long, env = "ALMANAC_REGISTRY_TOPIC", default_value = "0.0.4362300")]
    registry_topic: EntityId,
    /// More topics to index (comma-separated).
    #[arg(long = "topic", env = "ALMANAC_TOPICS", value_delimiter = ',')]
    topics: Vec<EntityId>,
    /// Builds kept besides the live one.
    #[arg(long, env = "ALMANAC_KEEP_BUILDS", default_value_t = 3)]
    keep_builds: usize,
    /// Largest pageSize of holders and transactions.
    #[arg(long, env = "ALMANAC_MAX_PAGE_SIZE", default_value_t = 100)]
    max_page_size: usize,
    /// Reviewed guard source records (section B); skipped with a warning
    /// when the folder does not exist.
    #[arg(long, env = "ALMANAC_GUARD_DIR", default_value = "datasets/guard")]
    guard_dir: PathBuf,
    /// Reference date for guard expiries (YYYY-MM-DD; default: today, UTC).
    #[arg(long, env = "ALMANAC_GUARD_DATE")]
    guard_date: Option<chrono::NaiveDate>,
    /// Broker sources (section A): agents.jsonl or agents.json,
    /// catalog.json and feedback.json; skipped with a warning when there is
    /// no agent index.
    #[arg(long, env = "ALMANAC_BROKER_DIR", default_value = "datasets/broker")]
    broker_dir: PathBuf,
    /// The api's OpenAPI document (`api openapi`), published in the build
    /// at `/api/v1/openapi.json` for static hosts.
    #[arg(long, env = "ALMANAC_OPENAPI")]
    openapi: Option<PathBuf>,
    /// nginx's `listen` in the build's `_nginx.conf` (default 80).
    #[arg(long, env = "ALMANAC_NGINX_LISTEN")]
    nginx_listen: Option<String>,
    /// Where the build's `_nginx.conf` sends what the build does not hold
    /// (the api's address, `127.0.0.1:4000`); none: a JSON 404.
    #[arg(long, env = "ALMANAC_NGINX_API")]
    nginx_api: Option<String>,
    /// The most routes a build may have and still get the static hosts'
    /// configurations (they are made in memory, about 2 KB per route).
    #[arg(long, env = "ALMANAC_HOST_CONFIGS_MAX_ROUTES", default_value_t = crate::hosts::MAX_ROUTES)]
    host_configs_max_routes: usize,
    /// A live build with at least this many routes is followed by a layer
    /// over its base when the agents did not change: a folder of only the
    /// files that changed (see `layer`). By default where the static hosts'
    /// configurations stop (a layer has none); `max`: never.
    #[arg(long, env = "ALMANAC_LAYER_MIN_ROUTES", default_value_t = crate::hosts::MAX_ROUTES, value_parser = routes_or_max)]
    layer_min_routes: usize,
    /// A live layer holding more routes than this is followed by a whole
    /// build, a new base.
    #[arg(long, env = "ALMANAC_LAYER_MAX_ROUTES", default_value_t = 200_000)]
    layer_max_routes: usize,
    /// DuckDB's memory limit for the warehouse (its own form: `1GB`,
    /// `512MB`); past it DuckDB spills to disk. Part of the run's whole
    /// memory: at a million agents 512 MB holds the run to about 4.2 GB,
    /// 1 GB to about 4.7 GB; 256 MB is too little to export them.
    #[arg(long, env = "ALMANAC_DUCKDB_MEMORY", default_value = "512MB")]
    duckdb_memory: String,
    /// The memory (MiB) the agents' search index may take while it is
    /// written (tantivy's indexing budget, at least 15 per thread); past
    /// it a segment is written out, and the segments merged at the end.
    #[arg(long, env = "ALMANAC_SEARCH_MEMORY_MB", default_value_t = 128)]
    search_memory_mb: usize,
    /// The api's journal of live broker events (default: `<data-dir>/journal`).
    #[arg(long, env = "ALMANAC_JOURNAL_DIR")]
    journal_dir: Option<PathBuf>,
    /// The provider that embeds the agents.
    #[command(flatten)]
    embeddings: embeddings::ProviderArgs,
    /// Seconds per embedding request.
    #[arg(long, env = "ALMANAC_EMBEDDINGS_TIMEOUT", default_value_t = 60)]
    embeddings_timeout: u64,
    /// Texts per embedding request.
    #[arg(long, env = "ALMANAC_EMBEDDINGS_BATCH", default_value_t = 256)]
    embeddings_batch: usize,
    /// Replay every message instead of applying only the new ones.
    #[arg(long)]
    full: bool,
}

/// The command line's definition: every flag, its environment variable,
/// default and help (`docs/flags.md` is made from it).
pub fn definition() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Parses the command line and runs it.
pub fn main() -> Result<()> {
    let args = match Cli::parse().command {
        Command::Build(args) => args,
        Command::ScanPlugin(args) => return scan_plugin(&args),
        Command::Publish(args) => return tokio::runtime::Runtime::new()?.block_on(publish(&args)),
    };
    // Before any thread is started: each thread inherits its starter's.
    let lowered = shared::priority::lower(args.nice);
    tokio::runtime::Runtime::new()?.block_on(run(*args, lowered))
}

/// `generator scan-plugin DIR`: the folder read as an import would read
/// it, scanned, the report printed on stdout.
fn scan_plugin(args: &ScanPluginArgs) -> Result<()> {
    use anyhow::Context;
    let tree = crate::plugin_folder::read(&args.dir).with_context(|| format!("reading {}", args.dir.display()))?;
    let report = plugins::scan::report(&tree, &args.dir.display().to_string());
    match args.format {
        ReportFormat::Text => print!("{}", report.text()),
        ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    Ok(())
}

/// `generator publish --to s3://...`: a build uploaded, its report
/// printed on stdout as JSON.
async fn publish(args: &PublishArgs) -> Result<()> {
    use anyhow::Context;
    init_logs();
    let layout = Layout::new(&args.site_dir, &args.data_dir);
    let id = match &args.build {
        Some(id) => id.clone(),
        None => layout.current_build().context("no build is live: name one with --build")?,
    };
    let transfer = build_store::Transfer {
        concurrency: args.concurrency,
        request_timeout: Duration::from_millis(args.request_timeout_ms),
        ..build_store::Transfer::default()
    };
    let bucket = build_store::Bucket::open(&args.to, transfer)?;
    let report = bucket.publish(&layout, &id).await.with_context(|| format!("publishing build {id} to {}", args.to))?;
    tracing::info!(
        build = %report.build, objects = report.objects, uploaded = report.uploaded,
        bytes = report.uploaded_bytes, bucket = %args.to, "published"
    );
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

fn init_logs() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // Each step (and, at debug, each part of one) logs its time as it ends.
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .init();
}

async fn run(args: BuildArgs, lowered: std::io::Result<()>) -> Result<()> {
    init_logs();
    if let Err(error) = lowered {
        tracing::warn!(%error, "the build runs at the priority it was started with");
    }
    match args.watch {
        None => once(&args).await?,
        Some(every) => watch(&args, every).await,
    }
    Ok(())
}

/// One build, reported.
async fn once(args: &BuildArgs) -> Result<()> {
    let started = std::time::Instant::now();
    let config = build_config(args.clone())?;
    let report = build::run(&config).await?;
    tracing::info!(
        build = %report.build, published = report.published, fetched = report.fetched,
        incremental = report.incremental, applied = report.applied, rejected = report.rejected,
        files = report.files, written = report.written, linked = report.linked,
        base = report.base.as_deref().unwrap_or("-"), "build done"
    );
    if args.json {
        println!("{}", summary(&report, started.elapsed()));
    }
    Ok(())
}

/// The JSON summary of a build.
fn summary(report: &build::BuildReport, took: Duration) -> serde_json::Value {
    let steps: serde_json::Map<String, serde_json::Value> =
        report.steps.iter().map(|(name, d)| (name.to_string(), serde_json::json!(d.as_millis() as u64))).collect();
    serde_json::json!({
        "build": report.build,
        "published": report.published,
        "incremental": report.incremental,
        "fetched": report.fetched,
        "applied": report.applied,
        "rejected": report.rejected,
        "files": report.files,
        "written": report.written,
        "linked": report.linked,
        "base": report.base,
        "durationMs": took.as_millis() as u64,
        "stepsMs": steps,
        "hosts": report.hosts,
    })
}

/// Builds every `every` until SIGINT or SIGTERM. A failed run does not
/// stop the watch: it is logged, and the next run comes at its time.
async fn watch(args: &BuildArgs, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("a SIGTERM handler");
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
            _ = tick.tick() => {
                if let Err(e) = once(args).await {
                    tracing::error!(error = format!("{e:#}"), next_in_secs = every.as_secs(), "build failed; the live build keeps serving");
                }
            }
        }
    }
    tracing::info!("watch stopped");
}

/// An interval: seconds, or a number with `s`, `m` or `h`.
fn interval(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => text.split_at(at),
        None => (text, "s"),
    };
    let n: u64 = number.parse().map_err(|_| format!("{text:?}: expected a number of seconds, or 30s, 5m, 1h"))?;
    let seconds = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{text:?}: the unit is s, m or h")),
    };
    if seconds == 0 {
        return Err("the interval must be above 0".into());
    }
    Ok(Duration::from_secs(seconds))
}

/// A number of routes, or `max` (none is that many).
fn routes_or_max(text: &str) -> Result<usize, String> {
    match text {
        "max" => Ok(usize::MAX),
        _ => text.parse().map_err(|e| format!("{e}: a number of routes, or max")),
    }
}

fn build_config(args: BuildArgs) -> Result<BuildConfig> {
    anyhow::ensure!(args.max_page_size >= hcs20::analytics::DEFAULT_PAGE_SIZE, "--max-page-size must be at least 25");
    let source = match args.mirror {
        Some(url) => Source::Mirror(MirrorConfig {
            concurrency: args.mirror_concurrency.max(1),
            timeout: Duration::from_secs(args.mirror_timeout),
            attempts: args.mirror_attempts.max(1),
            ..MirrorConfig::new(url)
        }),
        None => Source::Captured(args.ledger_dir),
    };
    let journal = args.journal_dir.clone().unwrap_or_else(|| args.data_dir.join("journal"));
    Ok(BuildConfig {
        layout: Layout::new(args.site_dir, args.data_dir),
        source,
        topics: Topics { public: args.public_topic, registry: args.registry_topic },
        extra_topics: args.topics,
        keep_builds: args.keep_builds,
        limits: Limits { max_page_size: args.max_page_size },
        full: args.full,
        duckdb_memory: args.duckdb_memory,
        openapi: args.openapi,
        hosts: crate::hosts::Options {
            nginx_listen: args.nginx_listen,
            nginx_api: args.nginx_api,
            max_routes: args.host_configs_max_routes,
        },
        layers: (args.layer_min_routes != usize::MAX)
            .then_some(crate::layer::Settings { min_routes: args.layer_min_routes, max_routes: args.layer_max_routes }),
        broker: match crate::broker::source::present(&args.broker_dir) {
            true => Some(BrokerConfig {
                dir: args.broker_dir,
                journal,
                embeddings: args.embeddings.config(Duration::from_secs(args.embeddings_timeout), args.embeddings_batch),
                search_memory: args.search_memory_mb.saturating_mul(1 << 20),
            }),
            false => {
                tracing::warn!(dir = %args.broker_dir.display(), "no broker sources; building without section A");
                None
            }
        },
        guard: match args.guard_dir.exists() {
            true => Some(GuardConfig {
                dir: args.guard_dir,
                today: args.guard_date.unwrap_or_else(|| chrono::Utc::now().date_naive()),
            }),
            false => {
                tracing::warn!(dir = %args.guard_dir.display(), "no guard sources; building without section B");
                None
            }
        },
    })
}
