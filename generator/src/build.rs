//! One generator run, as a list of named steps ([`run`]), each a function
//! that runs in a span of its name:
//!
//! 1. **sources** (`load_sources`): load and validate the guard sources and
//!    render their files; scan the broker's agent index (checked, counted,
//!    never held: [`broker::scan`]);
//! 2. **ingest** (`ingest`): fetch each topic's new messages into the
//!    warehouse, following registrations to new topics until none are left
//!    (and **embed** the agents, with a provider);
//! 3. **apply** (`apply`): incrementally, when the new messages all follow
//!    the live build's (resume its tables, apply them, re-render what they
//!    touch); otherwise **replay** every stored message and render every
//!    route;
//! 4. **stage** (`stage_and_snapshot`): the warehouse gets the build's
//!    tables; the agents stream again in batches, each rendered, written
//!    into the new build directory beside the live one and stored in the
//!    broker tables; the Parquet exports and the pages for people are made;
//!    then the rest of the directory is written while the warehouse is
//!    copied to its snapshot (files whose bytes did not change are
//!    hard-linked from the live build);
//! 5. **publish** (`publish`): flip `current`, prune old builds.
//!
//! DuckDB appends on one core: `Writers` stores new messages and a
//! replay's operations on connections of their own while steps 3 and 4 go
//! on. Both paths give byte-identical builds for the same data (tested), and
//! a run ended at any fault point ([`shared::fault`]) leaves the live build
//! as it was.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;

use anyhow::{Context, Result};
use tracing::{debug_span, info_span, Instrument};

use crate::broker;
use crate::message_sources::{captured, mirror};
use crate::warehouse::Warehouse;
use duckdb_files::database;
use duckdb_files::snapshot;
use hcs20::analytics::Analytics;
use hcs20::routes::{Limits, Route};
use hcs20::tables::{self, Meta};
use hcs20::{self, message::decode, Message, Operation, Topics};
use shared::entity::EntityId;
use shared::fault;
use shared::manifest::{Entry, Manifest};
use shared::site::{self, Layout};
use shared::timestamp::Timestamp;

/// Where messages come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Pages captured under a folder (`datasets/ledger/`).
    Captured(PathBuf),
    /// A mirror node's REST API.
    Mirror(mirror::MirrorConfig),
}

#[derive(Debug, Clone)]
pub struct BuildConfig {
    pub layout: Layout,
    pub source: Source,
    pub topics: Topics,
    /// Topics to index besides the well-known and registered ones.
    pub extra_topics: Vec<EntityId>,
    /// Builds (and snapshots) kept besides the live one.
    pub keep_builds: usize,
    pub limits: Limits,
    /// Always replay everything (a check on the incremental path).
    pub full: bool,
    /// DuckDB's memory limit for the warehouse (`1GB`).
    pub duckdb_memory: String,
    /// Guard sources (section B), if this deployment publishes them.
    pub guard: Option<GuardConfig>,
    /// Broker sources (section A), if this deployment publishes them.
    pub broker: Option<BrokerConfig>,
    /// The api's OpenAPI document, published as it is (compact).
    pub openapi: Option<PathBuf>,
    /// What the static hosts' configurations need besides the manifest.
    pub hosts: crate::hosts::Options,
    /// When a run makes a layer over the live build's base (`layer`);
    /// `None`: never.
    pub layers: Option<crate::layer::Settings>,
}

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// `agents.json`, `catalog.json`, `feedback.json`.
    pub dir: PathBuf,
    /// The api's journal of live events (`broker_model::journal`), applied on top.
    pub journal: PathBuf,
    /// The embedding provider for hybrid search; none: no vector search.
    pub embeddings: Option<embeddings::ProviderConfig>,
    /// The memory the search index's writer may hold (bytes) before it
    /// writes a segment out.
    pub search_memory: usize,
}

#[derive(Debug, Clone)]
pub struct GuardConfig {
    pub dir: PathBuf,
    /// Facts and coverage assertions expiring before this date are dropped.
    pub today: chrono::NaiveDate,
}

#[derive(Debug, Default, Clone)]
pub struct BuildReport {
    pub fetched: usize,
    /// Messages applied by this run (all of them on a full replay).
    pub applied: usize,
    pub rejected: usize,
    pub incremental: bool,
    pub build: String,
    pub files: usize,
    pub written: usize,
    pub linked: usize,
    /// The build this one is a layer over, when it is one.
    pub base: Option<String>,
    /// False when the data gave the build already live.
    pub published: bool,
    /// Each step that ran, in order, and how long it took.
    pub steps: Vec<(&'static str, std::time::Duration)>,
    /// What the build asks of each static host.
    pub hosts: Option<crate::hosts::Report>,
}

impl BuildReport {
    /// Records that `step` ran from `started` until now.
    fn step(&mut self, step: &'static str, started: std::time::Instant) {
        self.steps.push((step, started.elapsed()));
    }
}

/// Starts `step` on the terminal's spinner, and its clock.
fn begin(progress: &crate::progress::Progress, step: &'static str) -> std::time::Instant {
    progress.step(step);
    std::time::Instant::now()
}

/// What the apply step hands to staging and publishing. The warehouse's
/// derived tables already hold the new state (marked pending).
struct Computed {
    files: Vec<site::File>,
    /// Entries of the live build kept as they are (incremental runs);
    /// shared with the thread that links them.
    kept: std::sync::Arc<[Entry]>,
    meta: Meta,
    /// A full replay's derived tables, written while the files are staged.
    tables: Option<Replayed>,
    /// A full replay's model, for the pages (an incremental run's covers
    /// only what changed).
    analytics: Option<Analytics>,
    /// The staging directory an incremental run began, linking `kept`.
    linking: Option<std::thread::JoinHandle<Result<site::Staging>>>,
}

struct Replayed {
    ledger: hcs20::Ledger,
    recent: Vec<hcs20::analytics::EventRow>,
}

/// What the apply step decided.
enum Step {
    /// Apply only what is new on top of the live build.
    Apply(Box<Computed>),
    /// Replay everything.
    Replay,
    /// Nothing is new: the live build stands.
    UpToDate(Manifest),
}

/// One run: the steps, in order. Each step is a function below and runs in
/// a span of its name (`RUST_LOG=info` shows each step's time as it ends).
pub async fn run(config: &BuildConfig) -> Result<BuildReport> {
    let mut report = BuildReport::default();
    let progress = crate::progress::Progress::new();
    let mut warehouse = open_warehouse(&config.layout.warehouse(), config)?;
    let started = begin(&progress, "sources");
    // Over a large live build whose agents did not change, a layer: the
    // agents are not read at all.
    // The agents' sources digested once (with the embedding model, which
    // gives their vectors): to compare with the live build's, and recorded
    // with the agents when they are read.
    let digest = match &config.broker {
        Some(broker) => {
            let digest = info_span!("digest")
                .in_scope(|| broker::scan::digest(&broker.dir, &broker.journal))
                .context("broker sources")?;
            Some(digest.with_model(broker.embeddings.as_ref().map(|p| p.model.as_str())))
        }
        None => None,
    };
    let layering = match (config.layers, &config.broker, &digest) {
        (Some(settings), Some(broker), Some(digest)) => {
            let run = crate::layer::Run {
                layout: &config.layout,
                settings,
                full: config.full,
                digest,
                journal: &broker.journal,
                guard: config.guard.is_some(),
            };
            info_span!("sources").in_scope(|| crate::layer::candidate(&run, warehouse.conn()))?
        }
        _ => None,
    };
    let scan = digest.clone().filter(|_| layering.is_none());
    let mut sources = info_span!("sources").in_scope(|| load_sources(config, scan))?;
    report.step("sources", started);
    fault::point("sources");
    let started = begin(&progress, "embed");
    let embeddings = embed_agents(config, &warehouse, sources.broker.as_mut()).instrument(info_span!("embed")).await?;
    report.step("embed", started);
    // Into an empty warehouse, what is fetched is everything there is: it is
    // replayed from memory while a second connection stores it.
    let started = begin(&progress, "ingest");
    let fresh = warehouse.cursors()?.is_empty();
    let fetched = ingest(config, &mut warehouse, fresh).instrument(info_span!("ingest")).await.context("ingest")?;
    report.step("ingest", started);
    report.fetched = fetched.messages.len();
    tracing::info!(fetched = report.fetched, "ingested");
    fault::point("ingested");
    if let Some(live) = layering {
        let digest = digest.as_ref().expect("a layer is over a build with agents");
        return layered(config, live, digest, &sources, &warehouse, &fetched, report, &progress);
    }

    // A layer is not taken for a whole build (nor verified): a whole run
    // over one renders and writes everything.
    let live = config.layout.current().context("reading the live build")?;
    let previous = trusted(live.filter(|(_, live)| live.base.is_none()));
    let manifest = std::thread::scope(|scope| -> Result<Option<Manifest>> {
        let mut writers = Writers::start(scope, &warehouse, &fetched)?;
        let started = begin(&progress, "apply");
        let applied = info_span!("apply").in_scope(|| {
            let others =
                Others { files: &sources.files, broker: sources.broker.as_ref().map(|b| b.fingerprint.as_str()) };
            apply(config, &warehouse, previous.as_ref(), fresh, &fetched, others, &mut writers, &mut report)
        });
        report.step("apply", started);
        let Some(computed) = applied? else {
            writers.finish()?;
            return Ok(None);
        };
        let data = TableData {
            warehouse: &warehouse,
            broker: sources.broker.as_mut(),
            guard: sources.guard.as_ref(),
            embeddings: embeddings.as_ref(),
        };
        let started = begin(&progress, "stage");
        let manifest = info_span!("stage")
            .in_scope(|| stage_and_snapshot(config, computed, previous.as_ref(), writers, data, &mut report))?;
        report.step("stage", started);
        Ok(Some(manifest))
    })?;
    let Some(manifest) = manifest else { return Ok(report) };
    drop(fetched);
    let started = begin(&progress, "publish");
    let live = previous.as_ref().map(|(_, m)| m.build.as_str());
    info_span!("publish").in_scope(|| publish(config, live, &manifest, &mut report))?;
    report.step("publish", started);
    // After a whole build the warehouse may be half free blocks (its
    // broker tables replaced in one transaction): written anew, so the
    // layers after it copy what it holds, not twice that.
    let compacted = debug_span!("compact").in_scope(|| warehouse.compact_if_sparse()).context("the warehouse")?;
    if let Some((before, after)) = compacted {
        tracing::info!(before, after, "the warehouse written anew without its free blocks");
    }
    Ok(report)
}

/// A run that makes a layer over the live build's base (`layer`): the
/// ledger replayed and everything but the broker's files rendered, as a
/// whole run does, and the broker's that the agents changed since the live
/// build change; the layer holds what differs from the base.
#[allow(clippy::too_many_arguments)]
fn layered(
    config: &BuildConfig,
    mut live: crate::layer::Live,
    digest: &broker_site::rows::Digest,
    sources: &Sources,
    warehouse: &Warehouse,
    fetched: &Fetched,
    mut report: BuildReport,
    progress: &crate::progress::Progress,
) -> Result<BuildReport> {
    let layout = &config.layout;
    let meta = tables::read_meta(warehouse.conn())?;
    let delta = live.delta.take();
    // Nothing new: no message, no agent changed, the warehouse's tables
    // the live build's, and the other sources' files served as they are.
    if fetched.messages.is_empty()
        && delta.is_none()
        && meta.is_some_and(|m| m.build == live.id && m.topics == config.topics)
        && crate::layer::serves(&live, &sources.files)
    {
        tracing::info!(build = %live.id, "nothing new since the live build");
        report.build = live.id;
        return Ok(report);
    }
    // The agents changed first: a record the journal has wrong fails the
    // run before anything is written.
    let renderer = pages::Renderer::new(sources.guard.is_some(), true);
    if delta.is_some() {
        // The analysts' views of the agents first: their exports read them
        // as soon as the agents are written.
        crate::analysts::document(warehouse.conn(), true)?;
    }
    let mut changed = match &delta {
        Some(delta) => Some(
            info_span!("agents")
                .in_scope(|| changed_agents(warehouse, delta, digest, &live.search, &renderer, sources.guard.as_ref()))
                .context("the agents changed")?,
        ),
        None => None,
    };
    // Held from here when the agents' exports start at once, else only
    // while the ledger's are written.
    let one_thread = changed.as_ref().map(|_| crate::analysts::OneThread::hold(warehouse.conn())).transpose()?;
    let scratch = exports_scratch(layout);
    let (manifest, staged) = std::thread::scope(|scope| -> Result<(Manifest, site::StageReport)> {
        let mut writers = Writers::start(scope, warehouse, fetched)?;
        let started = begin(progress, "apply");
        let mut computed = info_span!("apply").in_scope(|| full(config, warehouse, None, &mut writers, &mut report))?;
        computed.files.extend_from_slice(&sources.files);
        report.step("apply", started);
        fault::point("applied");
        let started = begin(progress, "stage");
        let _span = info_span!("stage").entered();
        writers.finish().context("snapshot")?;
        if let Some(t) = &computed.tables {
            tables::write_full(warehouse.conn(), &t.ledger, &t.recent, &computed.meta).context("snapshot")?;
        }
        crate::analysts::document(warehouse.conn(), false)?;
        // The warehouse is as the snapshot holds it but for the build's
        // id: its copy is made while the files are.
        let snapshot = debug_span!("snapshot copy")
            .in_scope(|| {
                duckdb_files::snapshot::Pending::start(warehouse.conn(), warehouse.path(), &layout.snapshots())
            })
            .context("snapshot")?;
        // The agents' exports, a layer's longest step, from here on beside
        // the rest; their rows read for the directory meanwhile.
        let broker_exports = match &changed {
            Some(c) => {
                crate::analysts::start(scope, warehouse.conn(), &scratch, crate::analysts::names(true), c.broker_time)?
            }
            None => Vec::new(),
        };
        let rows = match &changed {
            Some(_) => debug_span!("rows")
                .in_scope(|| broker_site::store::rows(warehouse.conn()))
                .context("the agents changed")?,
            None => Vec::new(),
        };
        // The ledger's exports written beside the directory, the agents'
        // joined when they changed (else they stay as the build that made
        // them wrote them: read from the live build).
        let ledger_time = computed.meta.last_applied.unwrap_or_default();
        let before = changed.as_ref().map(|c| c.changed_uaids());
        let directory = changed.as_ref().zip(before.as_ref()).map(|(c, changed)| pages::Directory {
            rows: &rows,
            tally: &c.tally,
            before: Some(pages::Before { rows: &c.before, changed }),
        });
        let ledger_only =
            one_thread.is_none().then(|| crate::analysts::OneThread::hold(warehouse.conn())).transpose()?;
        let Exported { mut written, directory } =
            exports_beside_directory(layout, warehouse, (ledger_time, None), &renderer, directory)?;
        written.extend(crate::analysts::join(broker_exports).context("snapshot")?);
        drop(ledger_only);
        let (files, mut exports) = crate::analysts::in_order(written);
        computed.files.extend(files);
        if changed.is_none() {
            exports.extend(live.exports(layout, warehouse.conn()).context("snapshot")?);
        }
        let data = Pages {
            guard: sources.guard.as_ref(),
            directory: directory.as_ref().map(|d| d.newest),
            agents: Some(changed.as_ref().map_or(&live.facts, |c| &c.facts)),
        };
        let pages = render_pages(config, &mut computed, warehouse, data, &renderer, &exports).context("pages")?;
        computed.files.extend(pages);
        let directory = directory.unwrap_or_default();
        computed.files.extend(directory.files);
        let pages: HashSet<String> = directory.routes.into_iter().collect();
        let broker = match &mut changed {
            Some(c) => {
                computed.files.append(&mut c.files);
                crate::layer::Broker::Changed { gone: &c.gone, pages: &pages }
            }
            None => crate::layer::Broker::Kept,
        };
        let plan =
            debug_span!("plan").in_scope(|| crate::layer::plan(&live, std::mem::take(&mut computed.files), broker));
        let (manifest, staged) =
            debug_span!("write").in_scope(|| crate::layer::stage(layout, &live, plan, exports)).context("stage")?;
        fault::point("staged");
        debug_span!("snapshot")
            .in_scope(|| {
                let record =
                    |conn: &duckdb_files::sql::Connection| tables::write_meta(conn, &manifest.build, &computed.meta);
                snapshot.finish(&layout.snapshot(&manifest), &manifest.build, record)?;
                record(warehouse.conn())
            })
            .context("snapshot")?;
        fault::point("snapshot");
        site::link_search_index(layout, &live.id, &manifest.build).context("the search index")?;
        report.step("stage", started);
        Ok((manifest, staged))
    })?;
    drop(one_thread);
    report.build = manifest.build.clone();
    report.base = manifest.base.clone();
    (report.files, report.written, report.linked) = (manifest.routes.len(), staged.written, staged.linked);
    tracing::info!(build = %manifest.build, base = ?manifest.base, routes = manifest.routes.len(),
        removed = manifest.removed.len(), written = staged.written, linked = staged.linked,
        agents_changed = delta.is_some(), "staged a layer");
    let started = begin(progress, "publish");
    info_span!("publish").in_scope(|| publish(config, Some(&live.id), &manifest, &mut report))?;
    report.step("publish", started);
    Ok(report)
}

/// A layer's broker files when agents changed: what they are made of.
struct ChangedAgents {
    /// The changed agents' files and pages, the similar lists of agents
    /// whose capability sets' best agents changed, the catalog files.
    files: Vec<site::File>,
    /// The routes of the agents deleted.
    gone: std::collections::HashSet<String>,
    facts: broker_site::rows::Facts,
    /// The tally, for the pages (the directory's rows are read once the
    /// agents' exports are under way).
    tally: broker_site::render::Tally,
    /// The UAIDs of the agents registered, updated or deleted, and the
    /// rows of those updated or deleted as they were: the directory's
    /// pages are made again only where they change.
    changed: Vec<String>,
    before: Vec<broker_site::rows::Row>,
    /// The newest of the agents' JSON files and the catalog files: the
    /// agents' exports' Last-Modified.
    broker_time: Timestamp,
}

impl ChangedAgents {
    fn changed_uaids(&self) -> HashSet<&str> {
        self.changed.iter().map(String::as_str).collect()
    }
}

/// Applies `delta` to the warehouse's agents ([`broker::delta`]) and
/// renders the broker's files it changes (its facts recorded).
fn changed_agents(
    warehouse: &Warehouse,
    delta: &broker::delta::Delta,
    digest: &broker_site::rows::Digest,
    search: &broker_site::store::SearchIndex,
    renderer: &pages::Renderer,
    guard: Option<&guard_data::Datasets>,
) -> Result<ChangedAgents> {
    use broker_site::render::agent_files;
    use rayon::prelude::*;
    let conn = warehouse.conn();
    let applied = broker::delta::apply(conn, delta, digest, search)?;
    let entries = |uaid: &str| -> Vec<&broker_model::catalog::FeedbackEntry> {
        applied.feedback.get(uaid).map(|v| v.iter().collect()).unwrap_or_default()
    };
    let own: Vec<Vec<site::File>> = applied
        .agents
        .par_iter()
        .map(|agent| {
            let entries = entries(&agent.uaid);
            let mut files = agent_files(agent, &entries);
            files.push(renderer.profile(agent, &entries, pages::Made::Build)?);
            Ok(files)
        })
        .collect::<Result<_>>()?;
    let mut files: Vec<site::File> = own.into_iter().flatten().collect();
    let mut gone = std::collections::HashSet::new();
    for (agent, feedback) in &applied.deleted {
        let feedback: Vec<&broker_model::catalog::FeedbackEntry> = feedback.iter().collect();
        gone.extend(agent_files(agent, &feedback).into_iter().map(|f| f.route));
        gone.insert(pages::routes::agent_route(&agent.uaid));
    }
    let mut catalog = broker_site::render::catalog_files(&applied.tally, &applied.catalog);
    catalog.extend(secret_policy_pages(renderer, &applied.catalog)?);
    catalog.extend(plugin_files(renderer, &applied.catalog, guard)?);
    let recorded = broker_site::store::newest(conn)?.and_then(|before| applied.newest_after(before));
    let (json_newest, profiles_newest) = match recorded {
        Some(newest) => newest,
        None => debug_span!("newest").in_scope(|| broker::delta::newest(conn, applied.updated))?,
    };
    broker_site::store::write_newest(conn, (json_newest, profiles_newest))?;
    let broker_time = catalog.iter().map(|f| f.representation.last_modified).fold(json_newest, Timestamp::max);
    files.extend(catalog);
    let facts = applied.facts(profiles_newest);
    broker_site::store::write_facts(conn, &facts)?;
    tracing::info!(changed = applied.agents.len(), deleted = applied.deleted.len(), "agents changed");
    let changed = applied.changed().into_iter().map(str::to_string).collect();
    let broker::delta::Applied { tally, before, .. } = applied;
    Ok(ChangedAgents { files, gone, facts, tally, changed, before, broker_time })
}

/// The live build, when its files are what its manifest says. Nothing is
/// taken from a damaged one (a truncated or edited file): the run replays
/// everything and writes every file anew, so damage is never linked into
/// later builds.
fn trusted(live: Option<(PathBuf, Manifest)>) -> Option<(PathBuf, Manifest)> {
    let (dir, manifest) = live?;
    let damage = debug_span!("verify live build").in_scope(|| site::damaged(&dir, &manifest));
    let Some(first) = damage.first() else { return Some((dir, manifest)) };
    tracing::warn!(build = %manifest.build, damaged = damage.len(), first = %first,
        "the live build's files are not what its manifest says; nothing is taken from it and every file is written anew");
    None
}

/// What the sources other than the ledger give a run.
struct Sources {
    /// Section B's files and the OpenAPI document, rendered whole every run
    /// (a bad record fails the build before anything is written); files
    /// whose bytes did not change are linked from the live build.
    files: Vec<site::File>,
    /// Section A's sources, scanned and checked (a bad record fails the
    /// build before anything is written); their files are rendered and
    /// written batch by batch as the build is staged.
    broker: Option<broker::scan::Summary>,
    /// Section B's public datasets, for the pages.
    guard: Option<guard_data::Datasets>,
}

/// Step 1: load and validate the guard sources and render their files;
/// scan and check the broker's (with the api's journal applied).
/// The broker's are scanned only when given their digest (a layer keeps
/// the live build's).
fn load_sources(config: &BuildConfig, scan: Option<broker_site::rows::Digest>) -> Result<Sources> {
    let guard = match &config.guard {
        Some(guard) => {
            let sources = guard_data::load(&guard.dir).context("guard sources")?;
            Some(guard_data::project(&sources, guard.today))
        }
        None => None,
    };
    let mut files = guard.as_ref().map(guard_data::render).unwrap_or_default();
    let broker = match (&config.broker, scan) {
        (Some(b), Some(digest)) => Some(broker::scan::scan(&b.dir, &b.journal, digest).context("broker sources")?),
        _ => None,
    };
    if let Some(path) = &config.openapi {
        files.push(openapi(path)?);
    }
    Ok(Sources { files, broker, guard })
}

/// The api's OpenAPI document as a file of the build, as the api serves it.
fn openapi(path: &std::path::Path) -> Result<site::File> {
    use shared::http::{Representation, OPENAPI_ROUTE};
    let read = || -> Result<serde_json::Value> {
        let document: serde_json::Value = serde_json::from_slice(&std::fs::read(path)?)?;
        let version = document["openapi"].as_str().unwrap_or_default();
        anyhow::ensure!(version.starts_with("3.1."), "not an OpenAPI 3.1 document (openapi: {version:?})");
        Ok(document)
    };
    let document = read().with_context(|| format!("the OpenAPI document {}", path.display()))?;
    Ok(site::File {
        route: OPENAPI_ROUTE.into(),
        path: OPENAPI_ROUTE.trim_start_matches('/').into(),
        representation: Representation::openapi(&document),
    })
}

/// The warehouse's writers besides its main connection: DuckDB appends on
/// one core, so new messages and a full replay's operations (different
/// tables, never in conflict) are stored on connections of their own, on
/// threads of the run's scope, while the replay, the rendering and the
/// staging go on.
struct Writers<'scope> {
    storing: std::thread::ScopedJoinHandle<'scope, Result<()>>,
    judging: std::thread::ScopedJoinHandle<'scope, Result<()>>,
    /// To the operations' writer; dropped when a run has none to write.
    operations: Option<std::sync::mpsc::SyncSender<Vec<hcs20::OperationRow>>>,
}

impl<'scope> Writers<'scope> {
    /// Starts storing what `fetched` holds that the warehouse lacks, and
    /// waiting for a replay's operations.
    fn start<'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        warehouse: &'env Warehouse,
        fetched: &'env Fetched,
    ) -> Result<Writers<'scope>> {
        let mut storer = warehouse.writer()?;
        let storing = scope.spawn(move || {
            let _span = debug_span!("store messages").entered();
            for (topic, range) in &fetched.unstored {
                storer.append(*topic, &fetched.messages[range.clone()])?;
            }
            fault::point("stored");
            anyhow::Ok(())
        });
        let (operations, operations_in) = std::sync::mpsc::sync_channel::<Vec<hcs20::OperationRow>>(1);
        let judge = warehouse.writer()?;
        let judging = scope.spawn(move || {
            if let Ok(operations) = operations_in.recv() {
                let _span = debug_span!("operations").entered();
                tables::write_operations(judge.conn(), &operations)?;
            }
            anyhow::Ok(())
        });
        Ok(Writers { storing, judging, operations: Some(operations) })
    }

    /// Hands a full replay's operations to their writer.
    fn write_operations(&mut self, operations: Vec<hcs20::OperationRow>) {
        if let Some(sender) = self.operations.take() {
            // The writer is gone only if it failed; its error is reported
            // by `finish`.
            let _ = sender.send(operations);
        }
    }

    /// Waits for both writers; their errors are the run's.
    fn finish(mut self) -> Result<()> {
        self.operations = None;
        self.storing.join().expect("storing messages panicked").context("storing messages")?;
        self.judging.join().expect("writing operations panicked").context("writing operations")
    }
}

/// Step 3: what the new build holds. Incrementally when the new messages
/// allow it, else a full replay; `None` when nothing changed since the live
/// build.
#[allow(clippy::too_many_arguments)]
fn apply(
    config: &BuildConfig,
    warehouse: &Warehouse,
    previous: Option<&(PathBuf, Manifest)>,
    fresh: bool,
    fetched: &Fetched,
    others: Others,
    writers: &mut Writers,
    report: &mut BuildReport,
) -> Result<Option<Computed>> {
    let step = match previous {
        Some((_, live)) if !config.full && !fresh => incremental(config, warehouse, live, &others, report)?,
        _ => Step::Replay,
    };
    let mut computed = match step {
        Step::Apply(computed) => *computed,
        Step::Replay => {
            let everything = fresh.then_some(fetched.messages.as_slice());
            full(config, warehouse, everything, writers, report)?
        }
        Step::UpToDate(live) => {
            tracing::info!(build = %live.build, "nothing new since the live build");
            // The data is the live build's; its host configurations may
            // not be (other options, or a newer generator).
            let configs = host_configs(config, &live)?;
            site::refresh(&config.layout.build_dir(&live.build), &configs.files()).context("host configurations")?;
            report.hosts = Some(configs.report);
            report.build = live.build;
            return Ok(None);
        }
    };
    // The build's files: section C's, then the other surfaces'.
    computed.files.extend_from_slice(others.files);
    fault::point("applied");
    tracing::info!(
        incremental = report.incremental,
        applied = report.applied,
        rejected = report.rejected,
        files = computed.files.len(),
        kept = computed.kept.len(),
        "applied"
    );
    Ok(Some(computed))
}

/// What the other surfaces give the apply step: the files rendered in
/// step 1, and the fingerprint of the broker's sources.
struct Others<'a> {
    files: &'a [site::File],
    broker: Option<&'a str>,
}

/// The warehouse's tables a build writes besides section C's.
struct TableData<'a> {
    warehouse: &'a Warehouse,
    broker: Option<&'a mut broker::scan::Summary>,
    guard: Option<&'a guard_data::Datasets>,
    embeddings: Option<&'a broker_site::store::Embeddings>,
}

/// Step 4: the warehouse gets the derived tables; the broker's agents are
/// rendered and written batch by batch into the new build's folder as
/// they are stored; the Parquet exports are read from the tables and the
/// pages made (files of the build like the others); then the rest of the
/// folder is staged while the warehouse is named for the build and copied
/// to its snapshot.
fn stage_and_snapshot(
    config: &BuildConfig,
    mut computed: Computed,
    previous: Option<&(PathBuf, Manifest)>,
    writers: Writers,
    mut data: TableData,
    report: &mut BuildReport,
) -> Result<Manifest> {
    let layout = &config.layout;
    writers.finish().context("snapshot")?;
    if let Some(t) = &computed.tables {
        let _span = debug_span!("tables").entered();
        tables::write_full(data.warehouse.conn(), &t.ledger, &t.recent, &computed.meta).context("snapshot")?;
    }
    let mut staging = match computed.linking.take() {
        Some(linking) => linking.join().expect("linking panicked")?,
        None => site::Staging::begin(layout, &[], None)?,
    };
    let reuse = previous.map(site::Previous::of);
    let renderer = pages::Renderer::new(data.guard.is_some(), data.broker.is_some());
    let mut entries: Vec<Entry> = Vec::new();
    let mut broker_time = Timestamp::default();
    let mut facts = None;
    let search = layout.search_staging();
    if let Some(summary) = data.broker.as_deref_mut() {
        let memory = config.broker.as_ref().map_or(128 << 20, |b| b.search_memory);
        let streamed = debug_span!("agents")
            .in_scope(|| {
                let _ = std::fs::remove_dir_all(&search);
                let threads = rayon::current_num_threads();
                let model = data.embeddings.map(|e| e.model.as_str());
                let mut index = search::folder::Writer::create(&search, summary.count(), model, threads, memory)?;
                let staged = stage_agents(
                    summary,
                    data.warehouse,
                    data.embeddings,
                    &renderer,
                    &mut staging,
                    reuse.as_ref(),
                    &mut index,
                )?;
                debug_span!("search index").in_scope(|| index.finish(&search))?;
                anyhow::Ok(staged)
            })
            .context("the broker's agents")?;
        broker_site::store::write_newest(data.warehouse.conn(), (streamed.newest, streamed.profiles_newest))
            .context("snapshot")?;
        entries = streamed.entries;
        broker_time = streamed.newest;
        let mut catalog = broker_site::render::catalog_files(&summary.tally, &summary.catalog);
        catalog.extend(secret_policy_pages(&renderer, &summary.catalog)?);
        catalog.extend(plugin_files(&renderer, &summary.catalog, data.guard)?);
        broker_time = catalog.iter().map(|f| f.representation.last_modified).fold(broker_time, Timestamp::max);
        computed.files.extend(catalog);
        facts = Some(summary.facts(streamed.profiles_newest));
    }
    if let Some(facts) = &facts {
        broker_site::store::write_facts(data.warehouse.conn(), facts).context("snapshot")?;
    }
    let ledger_time = computed.meta.last_applied.unwrap_or_default();
    let broker_time = data.broker.is_some().then_some(broker_time);
    let directory =
        data.broker.as_deref().map(|s| pages::Directory { rows: &s.directory, tally: &s.tally, before: None });
    crate::analysts::document(data.warehouse.conn(), broker_time.is_some())?;
    let one_thread = crate::analysts::OneThread::hold(data.warehouse.conn())?;
    let Exported { written, directory } =
        exports_beside_directory(layout, data.warehouse, (ledger_time, broker_time), &renderer, directory)?;
    drop(one_thread);
    let (files, exports) = crate::analysts::in_order(written);
    computed.files.extend(files);
    let pages_data =
        Pages { guard: data.guard, directory: directory.as_ref().map(|d| d.newest), agents: facts.as_ref() };
    let pages =
        render_pages(config, &mut computed, data.warehouse, pages_data, &renderer, &exports).context("pages")?;
    computed.files.extend(pages);
    computed.files.extend(directory.unwrap_or_default().files);
    // Exactly: the agents' entries are millions, and growing by doubling
    // would hold twice their size.
    entries.reserve_exact(computed.kept.len() + computed.files.len());
    entries.extend(computed.kept.iter().cloned());
    entries.extend(site::entries(&computed.files));
    let mut manifest = site::manifest_of(entries)?;
    manifest.exports = exports;
    let configs = host_configs(config, &manifest)?;
    let extra = configs.files();
    let (staged, snapshotted) = std::thread::scope(|inner| {
        let staging = inner.spawn(|| {
            let _span = debug_span!("write files").entered();
            staging
                .finish(layout, &manifest, &computed.files, &extra, reuse.as_ref())
                .inspect(|_| fault::point("staged"))
        });
        let snapshotted = write_snapshot(layout, &manifest, &computed.meta, data.warehouse);
        (staging.join().expect("staging panicked"), snapshotted)
    });
    let staged = staged.context("stage")?;
    snapshotted.context("snapshot")?;
    if data.broker.is_some() {
        site::name_search_index(layout, &search, &manifest.build).context("the search index")?;
    }
    report.build = manifest.build.clone();
    (report.files, report.written, report.linked) = (staged.files, staged.written, staged.linked);
    report.hosts = Some(configs.report);
    tracing::info!(build = %manifest.build, written = staged.written, linked = staged.linked, reused = staged.reused,
        "staged");
    Ok(manifest)
}

/// What staging the agents gave: their files' entries, and the newest
/// time of their JSON files and of their pages.
struct StagedAgents {
    entries: Vec<Entry>,
    newest: Timestamp,
    profiles_newest: Timestamp,
}

/// Pass 2 over the agent index: each batch's files (JSON and profile
/// page) rendered over the cores and written into the new build, its
/// rows stored in the warehouse's broker tables, and handed to the search
/// index folder's writer; then the batch is gone.
fn stage_agents(
    summary: &mut broker::scan::Summary,
    warehouse: &Warehouse,
    embeddings: Option<&broker_site::store::Embeddings>,
    renderer: &pages::Renderer,
    staging: &mut site::Staging,
    reuse: Option<&site::Previous>,
    index: &mut search::folder::Writer,
) -> Result<StagedAgents> {
    use rayon::prelude::*;
    let mut store = broker_site::store::Writer::begin(warehouse.conn())?;
    // Each agent's files: detail, resolve and page, and two of
    // feedback for an ERC-8004 agent (the entries are most of what a build
    // holds: they are counted, not grown into).
    let feedback_agents = summary.tally.registries.get(broker_model::catalog::FEEDBACK_REGISTRY).copied().unwrap_or(0);
    let files = 3 * summary.count() + 2 * feedback_agents;
    let mut staged = StagedAgents {
        entries: Vec::with_capacity(files + 1024),
        newest: Timestamp::default(),
        profiles_newest: Timestamp::default(),
    };
    // The summary lends its parts to the batches while it streams.
    let feedback = std::mem::take(&mut summary.feedback);
    let by_agent = {
        let mut by_agent: std::collections::HashMap<&str, Vec<&broker_model::catalog::FeedbackEntry>> =
            Default::default();
        for f in &feedback {
            by_agent.entry(f.uaid.as_str()).or_default().push(f);
        }
        by_agent
    };
    let mut spent = [std::time::Duration::ZERO; 4];
    // Agents handed on so far: the next batch's first position.
    let mut done = 0;
    let streamed = summary.agents(broker::source::BATCH, |batch| {
        let started = std::time::Instant::now();
        // Each agent's feedback entries: rendered into its files, and kept
        // beside its record in the search index.
        let feedback: Vec<&[&broker_model::catalog::FeedbackEntry]> =
            batch.iter().map(|a| by_agent.get(a.uaid.as_str()).map_or(&[][..], |v| v.as_slice())).collect();
        let rendered: Vec<(Vec<site::File>, site::File)> = batch
            .par_iter()
            .zip(&feedback)
            .map(|(agent, entries)| {
                let entries = *entries;
                let files = broker_site::render::agent_files(agent, entries);
                Ok((files, renderer.profile(agent, entries, pages::Made::Build)?))
            })
            .collect::<Result<_>>()?;
        let mut files = Vec::with_capacity(rendered.len() * 4);
        for (json, page) in rendered {
            for file in &json {
                staged.newest = staged.newest.max(file.representation.last_modified);
            }
            staged.profiles_newest = staged.profiles_newest.max(page.representation.last_modified);
            files.extend(json);
            files.push(page);
        }
        let rendering = started.elapsed();
        staged.entries.extend(staging.write(&files, reuse)?);
        let writing = started.elapsed();
        let records: Vec<String> =
            batch.par_iter().map(|a| serde_json::to_string(a).expect("agents serialise")).collect();
        store.append(batch, &records, embeddings)?;
        let storing = started.elapsed();
        let vectors = embeddings.map(|e| &e.vectors[done..done + batch.len()]);
        index.add(&search::records::Batch { agents: batch, json: &records, feedback: &feedback, vectors })?;
        done += batch.len();
        for (spent, until) in spent.iter_mut().zip([rendering, writing, storing, started.elapsed()]) {
            *spent += until;
        }
        Ok(())
    });
    tracing::debug!(render = ?spent[0], write = ?(spent[1] - spent[0]), store = ?(spent[2] - spent[1]),
        index = ?(spent[3] - spent[2]), "agents staged");
    drop(by_agent);
    summary.feedback = feedback;
    streamed?;
    store.finish(broker_site::store::Rest {
        feedback: &summary.feedback,
        catalog: &summary.catalog,
        embeddings,
        journal_seq: summary.journal_seq,
        journal_digest: &summary.journal_digest,
        sources: &summary.fingerprint,
        digest: &summary.digest,
        tally: &summary.tally,
    })?;
    Ok(staged)
}

/// Where DuckDB writes the exports until they are read back.
fn exports_scratch(layout: &Layout) -> PathBuf {
    layout.data.join(".exports")
}

/// The exports: the ledger's (dated `ledger_time`) on `conn`, and the
/// agents' when `broker_time` dates them, each on a thread of its own;
/// from the views [`crate::analysts::document`] wrote, with
/// [`crate::analysts::OneThread`] held.
fn write_exports(
    layout: &Layout,
    conn: &duckdb_files::sql::Connection,
    ledger_time: Timestamp,
    broker_time: Option<Timestamp>,
) -> Result<Vec<crate::analysts::Written>> {
    use crate::analysts::{export, join, names, start};
    let _span = debug_span!("exports").entered();
    let scratch = exports_scratch(layout);
    std::thread::scope(|scope| {
        let agents = match broker_time {
            Some(time) => start(scope, conn, &scratch, names(true), time)?,
            None => Vec::new(),
        };
        let mut written: Vec<_> =
            names(false).into_iter().map(|name| export(conn, &scratch, name, ledger_time)).collect::<Result<_>>()?;
        written.extend(join(agents)?);
        Ok(written)
    })
}

/// What [`exports_beside_directory`] makes.
struct Exported {
    /// The exports written.
    written: Vec<crate::analysts::Written>,
    /// The directory's pages, when the agents were given.
    directory: Option<pages::DirectoryPages>,
}

/// The exports (`times`: the ledger's and the agents', as
/// [`write_exports`] takes them) and the directory's pages, at once: the
/// exports are DuckDB's on one thread each (their bytes must not depend on
/// how threads met), the pages rendered over the cores, and neither needs
/// the other. At a million agents they were a build's two longest steps.
fn exports_beside_directory(
    layout: &Layout,
    warehouse: &Warehouse,
    (ledger_time, broker_time): (Timestamp, Option<Timestamp>),
    renderer: &pages::Renderer,
    directory: Option<pages::Directory>,
) -> Result<Exported> {
    let span = tracing::Span::current();
    let conn = warehouse.conn().try_clone().context("a connection for the exports")?;
    std::thread::scope(|scope| {
        let exporting = scope.spawn(move || span.in_scope(|| write_exports(layout, &conn, ledger_time, broker_time)));
        let directory = directory.map(|d| renderer.directory(d)).transpose().context("pages");
        let exported = exporting.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        Ok(Exported { written: exported.context("snapshot")?, directory: directory? })
    })
}

/// The static hosts' configurations of the build of `manifest` (its
/// folder named by its absolute path, as nginx wants it), and the report
/// of what each host would leave to the api, logged.
fn host_configs(config: &BuildConfig, manifest: &Manifest) -> Result<crate::hosts::Configs> {
    let root = std::path::absolute(config.layout.build_dir(&manifest.build)).context("the build's folder")?;
    let configs = crate::hosts::configure(manifest, &root, &config.hosts);
    if let Some(why) = &configs.report.skipped {
        tracing::warn!(why, "no static host configurations for this build");
    }
    for host in &configs.report.hosts {
        let left: Vec<String> = host.leave_to_api.iter().map(|l| format!("{} ({})", l.kind, l.routes)).collect();
        tracing::info!(host = host.host, files = host.files, limit = ?host.file_limit, leave_to_api = %left.join(", "),
            "host");
    }
    Ok(configs)
}

/// What the pages show besides the ledger.
struct Pages<'a> {
    guard: Option<&'a guard_data::Datasets>,
    /// The newest of the directory's pages (`None`: a layer keeps the
    /// live one's).
    directory: Option<Timestamp>,
    agents: Option<&'a broker_site::rows::Facts>,
}

/// The pages for people but the agents' profiles, from the whole model: a
/// full replay's, or the warehouse's (an incremental run renders only some
/// routes of its own).
/// Programmable Secrets' pages, made of the catalog like its files (a
/// layer makes them again whenever agents changed: `layer::is_shared`).
fn secret_policy_pages(
    renderer: &pages::Renderer,
    catalog: &broker_model::catalog::Catalog,
) -> Result<Vec<site::File>> {
    let time = broker_site::render::secret_policies_time(catalog);
    renderer.secret_policies(&catalog.secret_policies, time).context("Programmable Secrets' pages")
}

/// The plugin catalog's files, made of the journal's catalog with the
/// build's reviewed campaigns as the api makes them (`plugins::catalog`):
/// the `plugins.json` export, a Codex marketplace file and the pages. A
/// layer makes them again whenever agents changed, as the other catalog
/// files (`layer::is_shared`).
fn plugin_files(
    renderer: &pages::Renderer,
    catalog: &broker_model::catalog::Catalog,
    guard: Option<&guard_data::Datasets>,
) -> Result<Vec<site::File>> {
    use plugins::catalog as plugin_catalog;
    let listings: Vec<plugin_catalog::Listing> = catalog
        .plugins
        .iter()
        .map(|entry| serde_json::from_value(entry.listing.clone()).with_context(|| format!("plugin {}", entry.slug)))
        .collect::<Result<_>>()?;
    let campaigns: Vec<plugins::trust::Campaign> = guard
        .map(|g| {
            g.campaigns
                .campaigns
                .iter()
                .map(|c| plugins::trust::Campaign::new(&c.id, &c.name, c.severity.as_str(), &c.surfaces))
                .collect()
        })
        .unwrap_or_default();
    let time = broker_site::render::time(&catalog.updated_at);
    let items: Vec<serde_json::Value> = listings.iter().map(|l| plugin_catalog::item(l, &campaigns)).collect();
    let details: Vec<serde_json::Value> = listings.iter().map(|l| plugin_catalog::detail(l, &campaigns)).collect();
    let newest = items.iter().map(pages::plugins::last_modified).fold(time, Timestamp::max);
    let json = |route: &str, value: serde_json::Value| site::File {
        route: route.to_string(),
        path: route.trim_start_matches('/').to_string(),
        representation: shared::http::Representation::json(&value, newest, shared::http::Cache::Catalog),
    };
    let date = &newest.iso8601()[..10];
    let mut files: Vec<site::File> = plugin_catalog::EXPORTS
        .iter()
        .filter_map(|route| Some(json(route, plugin_catalog::export(route, &listings, date)?)))
        .collect();
    files.extend(renderer.plugins(&items, &details, newest).context("the plugins' pages")?);
    Ok(files)
}

fn render_pages(
    config: &BuildConfig,
    computed: &mut Computed,
    warehouse: &Warehouse,
    data: Pages,
    renderer: &pages::Renderer,
    exports: &[shared::manifest::Export],
) -> Result<Vec<site::File>> {
    let _span = debug_span!("pages").entered();
    let conn = warehouse.conn();
    let analytics = match computed.analytics.take() {
        Some(analytics) => analytics,
        None => tables::load_analytics(conn, config.limits.max_page_size)?,
    };
    let changes = tables::supply_by_minute(conn)?;
    let inputs = pages::Inputs {
        analytics: &analytics,
        changes: &changes,
        guard: data.guard,
        directory: data.directory,
        agents: data.agents,
        exports,
    };
    renderer.render(&inputs)
}

/// The warehouse named for the build and copied to the build's snapshot.
fn write_snapshot(layout: &Layout, manifest: &Manifest, meta: &Meta, warehouse: &Warehouse) -> Result<()> {
    let _span = debug_span!("snapshot").entered();
    let conn = warehouse.conn();
    tables::write_meta(conn, &manifest.build, meta)?;
    let snapshot_path = layout.snapshot(manifest);
    if !snapshot::reusable(&snapshot_path, &manifest.build)? {
        snapshot::copy_to(conn, warehouse.path(), &snapshot_path)?;
    }
    fault::point("snapshot");
    Ok(())
}

/// Step 5: flip `current` to the build (unless it is the live one), then
/// prune old builds.
fn publish(config: &BuildConfig, live: Option<&str>, manifest: &Manifest, report: &mut BuildReport) -> Result<()> {
    let layout = &config.layout;
    report.published = live != Some(manifest.build.as_str());
    if report.published {
        site::publish(layout, manifest).context("publish")?;
        fault::point("published");
    }
    let pruned = site::prune(layout, config.keep_builds).context("pruning old builds")?;
    fault::point("pruned");
    tracing::info!(build = %manifest.build, published = report.published, pruned, "published");
    Ok(())
}

/// Opens the warehouse. One this DuckDB cannot read (written by DuckDB 2.0)
/// fails the run before anything is written, unless the run is full: a full
/// run sets the file aside and rebuilds a new warehouse from the sources.
fn open_warehouse(path: &std::path::Path, config: &BuildConfig) -> Result<Warehouse> {
    let error = match Warehouse::open(path, &config.duckdb_memory) {
        Err(error) if config.full => error,
        opened => return opened,
    };
    let Some(unreadable) = error.downcast_ref::<database::Unreadable>() else { return Err(error) };
    let aside = database::set_aside(unreadable)?;
    tracing::warn!(
        reason = %unreadable,
        aside = %aside.display(),
        "set the unreadable warehouse aside (delete it when it is no longer wanted); rebuilding from the sources"
    );
    Warehouse::open(path, &config.duckdb_memory)
}

/// Step 2 (with a provider): embed the agents, asking the provider only
/// for texts no earlier run embedded with the same model.
async fn embed_agents(
    config: &BuildConfig,
    warehouse: &Warehouse,
    summary: Option<&mut broker::scan::Summary>,
) -> Result<Option<broker_site::store::Embeddings>> {
    let (Some(summary), Some(provider)) = (summary, config.broker.as_ref().and_then(|b| b.embeddings.clone())) else {
        return Ok(None);
    };
    let provider = embeddings::Provider::new(provider)?;
    let cached = broker_site::store::cached_embeddings(warehouse.conn(), provider.model())?;
    let mut texts = Vec::with_capacity(summary.count());
    summary.agents(broker::source::BATCH, |batch| {
        texts.extend(batch.iter().map(embeddings::text));
        Ok(())
    })?;
    let (vectors, computed) = embeddings::agents(&provider, &texts, &cached).await.context("embedding agents")?;
    broker_site::store::cache_embeddings(warehouse.conn(), provider.model(), &computed)?;
    tracing::info!(agents = vectors.len(), computed = computed.len(), "embedded");
    Ok(Some(broker_site::store::Embeddings { model: provider.model().to_string(), vectors }))
}

/// Replays every stored message and renders every route. The operations go
/// to the warehouse writer as soon as they are known; the other derived
/// tables are written while the files are staged.
fn full(
    config: &BuildConfig,
    warehouse: &Warehouse,
    everything: Option<&[Message]>,
    writers: &mut Writers,
    report: &mut BuildReport,
) -> Result<Computed> {
    report.incremental = false;
    let loaded;
    let messages = match everything {
        Some(messages) => messages,
        None => {
            loaded = warehouse.messages().context("loading messages from the warehouse")?;
            &loaded[..]
        }
    };
    let (ledger, operations) = hcs20::replay(messages, config.topics);
    let meta = Meta {
        build: String::new(),
        topics: config.topics,
        recent_limit: config.limits.max_page_size,
        last_applied: ledger.last_applied,
        applied: last_sequences(messages, BTreeMap::new()),
    };
    report.applied = operations.len();
    report.rejected = operations.iter().filter(|o| o.rejection.is_some()).count();
    writers.write_operations(operations);
    let analytics = Analytics::from_ledger(&ledger, config.limits.max_page_size);
    let files = render(&analytics, Route::all_static(&analytics));
    let recent = analytics.recent_events().to_vec();
    Ok(Computed {
        files,
        kept: Vec::new().into(),
        meta,
        tables: Some(Replayed { ledger, recent }),
        analytics: Some(analytics),
        linking: None,
    })
}

/// Applies only the messages the live build has not seen, when that gives
/// the same result as a replay: they must all follow the live build's last
/// message in consensus order, announce no topic, and hold no chunk of a
/// submission begun earlier.
fn incremental(
    config: &BuildConfig,
    warehouse: &Warehouse,
    live: &Manifest,
    others: &Others,
    report: &mut BuildReport,
) -> Result<Step> {
    // The warehouse's derived tables must be the live build's.
    let meta = tables::read_meta(warehouse.conn())?.filter(|m| {
        m.build == live.build && m.topics == config.topics && m.recent_limit == config.limits.max_page_size
    });
    let Some(meta) = meta else {
        return Ok(Step::Replay);
    };
    let new = warehouse.messages_after(&meta.applied)?;
    if new.is_empty() {
        if unchanged(others, live, config) {
            return Ok(Step::UpToDate(live.clone()));
        }
        // Only the other surfaces' data changed: keep every section C file.
        let kept: std::sync::Arc<[Entry]> =
            live.routes.iter().filter(|e| route_of(e, config.limits).is_some()).cloned().collect();
        let linking = link_kept(config, live, &kept);
        report.incremental = true;
        let files = Vec::new();
        return Ok(Step::Apply(Box::new(Computed {
            files,
            kept,
            meta,
            tables: None,
            analytics: None,
            linking: Some(linking),
        })));
    }
    if let Some(reason) = needs_replay(&new, &meta) {
        tracing::info!(reason, "replaying everything");
        return Ok(Step::Replay);
    }

    let conn = warehouse.conn();
    // Each body is decoded once: for the accounts to resume, then the rules.
    let batch = debug_span!("decode").in_scope(|| hcs20::Batch::new(&new));
    let mut ledger = debug_span!("resume ledger").in_scope(|| tables::load_ledger(conn, &meta, &batch.accounts()))?;
    let operations = debug_span!("apply messages").in_scope(|| ledger.apply_batch(batch));
    let changes = ledger.changes.take().unwrap_or_default();
    let token_keys: BTreeSet<(EntityId, String)> = changes
        .tokens
        .iter()
        .map(|t| (ledger.tokens[t.0 as usize].topic, ledger.tokens[t.0 as usize].tick.clone()))
        .collect();
    let accounts = changes.accounts();

    // Routes the changes touch are rendered again; the rest are kept, and
    // linked into the new build while the changed ones are computed.
    let kept: std::sync::Arc<[Entry]> = live
        .routes
        .iter()
        .filter(|e| route_of(e, config.limits).is_some_and(|r| !r.touched_by(&token_keys, &accounts)))
        .cloned()
        .collect();
    let linking = link_kept(config, live, &kept);

    debug_span!("delta")
        .in_scope(|| tables::apply_delta(conn, &ledger, &changes, &operations, config.limits.max_page_size))?;
    let model = debug_span!("load partial model")
        .in_scope(|| tables::load_partial(conn, &token_keys, &accounts, config.limits.max_page_size))?;

    let mut routes = Route::global_static();
    for token in model.tokens.iter().filter(|t| token_keys.contains(&(t.topic, t.tick.clone()))) {
        routes.extend(Route::token_static(token));
    }
    routes.extend(accounts.iter().map(|a| Route::Account(*a)));
    let files = debug_span!("render").in_scope(|| render(&model, routes));

    report.incremental = true;
    report.applied = operations.len();
    report.rejected = operations.iter().filter(|o| o.rejection.is_some()).count();
    let meta = Meta { last_applied: ledger.last_applied, applied: last_sequences(&new, meta.applied.clone()), ..meta };
    Ok(Step::Apply(Box::new(Computed { files, kept, meta, tables: None, analytics: None, linking: Some(linking) })))
}

/// Starts the new build's staging directory on a thread, hard-linking the
/// live build's `kept` files into it.
fn link_kept(
    config: &BuildConfig,
    live: &Manifest,
    kept: &std::sync::Arc<[Entry]>,
) -> std::thread::JoinHandle<Result<site::Staging>> {
    let (layout, kept, live_dir) = (config.layout.clone(), kept.clone(), config.layout.build_dir(&live.build));
    std::thread::spawn(move || site::Staging::begin(&layout, &kept, Some(&live_dir)))
}

/// The section C route of a manifest entry, if it is one (only those are
/// kept from the live build; the others are re-rendered every run).
fn route_of(entry: &Entry, limits: Limits) -> Option<Route> {
    let (path, query) = entry.route().split_once('?').unwrap_or((entry.route(), ""));
    Route::parse(path, query, limits).ok().flatten()
}

/// Whether the live build already serves exactly these files (and no other
/// guard route), and was made from the same broker sources.
fn unchanged(others: &Others, live: &Manifest, config: &BuildConfig) -> bool {
    let routes = live.by_route();
    let same = others
        .files
        .iter()
        .all(|f| routes.get(f.route.as_str()).is_some_and(|e| **e == Entry::new(&f.route, &f.path, &f.representation)));
    let rendered: BTreeSet<&str> = others.files.iter().map(|f| f.route.as_str()).collect();
    // The broker's files are the live build's when its sources are: their
    // fingerprint is in the live build's snapshot.
    let broker_live = || -> Result<Option<String>> {
        let conn = snapshot::open_for_build(&config.layout.snapshot(live), &live.build)?;
        broker_site::store::sources_fingerprint(&conn)
    };
    let broker_same = match others.broker {
        Some(fingerprint) => broker_live().ok().flatten().as_deref() == Some(fingerprint),
        None => true,
    };
    // The exports and the pages come from the tables and these files,
    // which are the live build's when no message and no other file is new.
    same && broker_same
        && live.routes.iter().all(|e| {
            route_of(e, config.limits).is_some()
                || crate::analysts::is_export(e.route())
                || e.content_type == pages::HTML
                || rendered.contains(e.route())
                || (others.broker.is_some() && e.route().starts_with(broker_site::render::API))
        })
}

/// Why new messages cannot simply be applied on top of the live build.
fn needs_replay(new: &[Message], meta: &Meta) -> Option<&'static str> {
    if new.iter().any(|m| m.topic == meta.topics.registry) {
        return Some("the registry topic has new messages");
    }
    if new.iter().any(|m| meta.last_applied.is_some_and(|last| m.consensus <= last)) {
        return Some("a new message is older than the live build's newest");
    }
    let mut groups: BTreeMap<(EntityId, &str), (u32, BTreeSet<u32>)> = BTreeMap::new();
    for m in new {
        if let Some(c) = m.chunk.as_ref().filter(|c| c.total > 1) {
            groups.entry((m.topic, c.group.as_str())).or_insert((c.total, BTreeSet::new())).1.insert(c.number);
        }
    }
    if groups.values().any(|(total, parts)| !parts.contains(&1) || parts.len() as u32 != *total) {
        return Some("a chunked submission spans the live build and this run");
    }
    None
}

/// The last sequence number per topic, over `messages` and `start`.
fn last_sequences(messages: &[Message], mut start: BTreeMap<EntityId, u64>) -> BTreeMap<EntityId, u64> {
    for m in messages {
        let last = start.entry(m.topic).or_default();
        *last = (*last).max(m.sequence);
    }
    start
}

/// What ingest fetched: every new message, topic by topic, and the ranges
/// of `messages` not stored in the warehouse yet.
struct Fetched {
    messages: Vec<Message>,
    unstored: Vec<(EntityId, std::ops::Range<usize>)>,
}

/// Fetches every known topic's new messages. They are stored in the
/// warehouse as they come, unless `defer` (the caller stores them); the
/// registry topic is always stored at once, since the topics it announces
/// are read back from the warehouse.
async fn ingest(config: &BuildConfig, warehouse: &mut Warehouse, defer: bool) -> Result<Fetched> {
    let mirror = match &config.source {
        Source::Mirror(c) => Some(mirror::Mirror::new(c.clone())?),
        Source::Captured(_) => None,
    };
    let mut done: BTreeSet<EntityId> = BTreeSet::new();
    let mut fetched = Fetched { messages: Vec::new(), unstored: Vec::new() };
    loop {
        let mut wanted: BTreeSet<EntityId> = [config.topics.registry, config.topics.public].into();
        wanted.extend(config.extra_topics.iter().copied());
        wanted.extend(announced_topics(warehouse, config.topics.registry)?);
        let todo: Vec<EntityId> = wanted.difference(&done).copied().collect();
        if todo.is_empty() {
            return Ok(fetched);
        }
        let cursors = warehouse.cursors()?;
        for topic in todo {
            let after = cursors.get(&topic).copied().unwrap_or(0);
            let messages = match (&config.source, &mirror) {
                (Source::Captured(dir), _) => captured::read_topic(dir, topic, after)?,
                (Source::Mirror(_), Some(m)) => m.fetch_topic(topic, after).await?,
                (Source::Mirror(_), None) => unreachable!("mirror client built above"),
            };
            tracing::info!(%topic, after, new = messages.len(), "fetched topic");
            if defer && topic != config.topics.registry {
                let start = fetched.messages.len();
                fetched.unstored.push((topic, start..start + messages.len()));
            } else {
                warehouse.append(topic, &messages)?;
            }
            fetched.messages.extend(messages);
            done.insert(topic);
        }
    }
}

/// Topics announced by valid-looking `register` messages on the registry
/// topic (whether the registration itself stands is the rules' call).
fn announced_topics(warehouse: &Warehouse, registry: EntityId) -> Result<Vec<EntityId>> {
    let mut topics = Vec::new();
    for message in warehouse.messages_of(registry)? {
        if let (_, Ok(Operation::Register { topic, .. })) = decode(&message.body) {
            topics.push(topic);
        }
    }
    Ok(topics)
}

/// Renders routes, in parallel over the cores.
pub fn render(analytics: &Analytics, routes: Vec<Route>) -> Vec<site::File> {
    use rayon::prelude::*;
    routes
        .par_iter()
        .map(|route| {
            let rendered = route.render(analytics).expect("static routes name existing tokens");
            site::File { route: route.canonical(), path: route.file(), representation: rendered }
        })
        .collect()
}
