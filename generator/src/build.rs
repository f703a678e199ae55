//! One generator run, as a list of named steps:
//!
//! 1. **ingest**: fetch each topic's new messages into the warehouse,
//!    following registrations to new topics until none are left;
//! 2. **apply**: incrementally, when the new messages all follow the live
//!    build's (resume its snapshot, apply them, re-render what they touch);
//!    otherwise **replay** every stored message and render every route;
//! 3. **stage**: write the build directory beside the live one, hard-linking
//!    files whose bytes did not change;
//! 4. **snapshot**: finish the build's DuckDB snapshot;
//! 5. **publish**: flip `current`, bring the warehouse's derived tables up
//!    to date, prune old builds.
//!
//! Both paths give byte-identical builds for the same data (tested).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::database;
use crate::entity::EntityId;
use crate::hcs20::analytics::Analytics;
use crate::hcs20::ledger::{captured, mirror};
use crate::hcs20::routes::{Limits, Route};
use crate::hcs20::tables::{self, Meta};
use crate::hcs20::{self, message::decode, Message, Operation, Topics};
use crate::fault;
use crate::http::JSON;
use crate::manifest::{Entry, Manifest};
use crate::site::{self, Layout};
use crate::snapshot;
use crate::warehouse::Warehouse;
use crate::Lap;
use crate::{broker, guard};

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
    /// Guard sources (section B), if this deployment publishes them.
    pub guard: Option<GuardConfig>,
    /// Broker sources (section A), if this deployment publishes them.
    pub broker: Option<BrokerConfig>,
}

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// `agents.json`, `catalog.json`, `feedback.json`.
    pub dir: PathBuf,
    /// The api's journal of live events (`broker::journal`), applied on top.
    pub journal: PathBuf,
    /// The embedding provider for hybrid search; none: no vector search.
    pub embeddings: Option<broker::embed::ProviderConfig>,
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
    /// False when the data gave the build already live.
    pub published: bool,
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
    tables: Option<Tables>,
    /// The staging directory an incremental run began, linking `kept`.
    linking: Option<std::thread::JoinHandle<Result<site::Staging>>>,
}

struct Tables {
    ledger: hcs20::Ledger,
    recent: Vec<crate::hcs20::analytics::EventRow>,
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

pub async fn run(config: &BuildConfig) -> Result<BuildReport> {
    let mut report = BuildReport::default();
    let layout = &config.layout;
    // A bad guard record fails the build before anything else is done.
    // Sources other than the ledger are rendered whole every run (a bad
    // record fails the build before anything is written); files whose
    // bytes did not change are linked from the live build.
    let mut side_files = match &config.guard {
        Some(guard) => {
            let sources = guard::load(&guard.dir).context("guard sources")?;
            guard::render(&guard::project(&sources, guard.today))
        }
        None => Vec::new(),
    };
    let broker = match &config.broker {
        Some(b) => {
            let lap = Lap::new();
            let mut sources = broker::load(&b.dir).context("broker sources")?;
            lap.mark("load broker sources");
            let records = broker::journal::read(&b.journal).context("the broker journal")?;
            broker::journal::apply(&mut sources, &records).context("the broker journal")?;
            Some(sources)
        }
        None => None,
    };
    if let Some(sources) = &broker {
        let lap = Lap::new();
        side_files.extend(broker::render::files(sources));
        lap.mark("render broker");
    }
    fault::point("sources");
    let mut warehouse = open_warehouse(&layout.warehouse(), config.full)?;
    let embeddings = match (&broker, config.broker.as_ref().and_then(|b| b.embeddings.clone())) {
        (Some(sources), Some(provider)) => {
            Some(embed(&warehouse, provider, sources).await.context("embedding agents")?)
        }
        _ => None,
    };

    let started = Instant::now();
    // Into an empty warehouse, what is fetched is everything there is: it is
    // replayed from memory while a second connection stores it.
    let fresh = warehouse.cursors()?.is_empty();
    let fetched = ingest(config, &mut warehouse, fresh).await.context("ingest")?;
    report.fetched = fetched.messages.len();
    tracing::info!(step = "ingest", fetched = report.fetched, ms = ms(started));
    fault::point("ingested");

    let previous = layout.current().context("reading the live build")?;
    let manifest = std::thread::scope(|scope| -> Result<Option<Manifest>> {
        // DuckDB appends on one core. Other connections store the new
        // messages and a full replay's operations (different tables, so
        // the two never conflict), while the replay, the rendering and the
        // staging of files go on.
        let mut storer = warehouse.writer()?;
        let fetched = &fetched;
        let storing = scope.spawn(move || {
            let lap = Lap::new();
            for (topic, range) in &fetched.unstored {
                storer.append(*topic, &fetched.messages[range.clone()])?;
            }
            lap.mark("store messages");
            fault::point("stored");
            anyhow::Ok(())
        });
        let (operations_out, operations_in) = std::sync::mpsc::sync_channel::<Vec<hcs20::OperationRow>>(1);
        let judge = warehouse.writer()?;
        let judging = scope.spawn(move || {
            if let Ok(operations) = operations_in.recv() {
                let lap = Lap::new();
                tables::write_operations(judge.conn(), &operations)?;
                lap.mark("operations");
            }
            anyhow::Ok(())
        });
        let written = || -> Result<()> {
            storing.join().expect("storing messages panicked").context("storing messages")?;
            judging.join().expect("writing operations panicked").context("writing operations")
        };

        let started = Instant::now();
        let step = match &previous {
            Some((_, live)) if !config.full && !fresh => {
                incremental(config, &warehouse, live, &side_files, &mut report)?
            }
            _ => Step::Replay,
        };
        let mut computed = match step {
            Step::Apply(computed) => {
                drop(operations_out);
                *computed
            }
            Step::Replay => {
                let everything = fresh.then_some(fetched.messages.as_slice());
                full(config, &warehouse, everything, &side_files, operations_out, &mut report)?
            }
            Step::UpToDate(live) => {
                tracing::info!(build = %live.build, "nothing new since the live build");
                report.build = live.build;
                drop(operations_out);
                written()?;
                return Ok(None);
            }
        };
        fault::point("applied");
        tracing::info!(
            step = "apply",
            incremental = report.incremental,
            applied = report.applied,
            rejected = report.rejected,
            files = computed.files.len(),
            kept = computed.kept.len(),
            ms = ms(started)
        );

        // Stage the files while the warehouse gets the derived tables, is
        // named for the build and copied to its snapshot.
        let started = Instant::now();
        let manifest = site::manifest_of(&computed.files, &computed.kept)?;
        let linking = computed.linking.take();
        let (staged, snapshotted) = std::thread::scope(|inner| {
            let staging = inner.spawn(|| match linking {
                Some(linking) => linking.join().expect("linking panicked")?.finish(
                    layout,
                    &manifest,
                    &computed.files,
                    previous.as_ref(),
                ),
                None => site::stage(layout, &manifest, &computed.files, &computed.kept, previous.as_ref()),
            }
            .inspect(|_| fault::point("staged")));
            let snapshotted = written().and_then(|()| {
                if let Some(t) = &computed.tables {
                    tables::write_full(warehouse.conn(), &t.ledger, &t.recent, &computed.meta)?;
                }
                if let Some(sources) = &broker {
                    let lap = Lap::new();
                    broker::store::write(warehouse.conn(), sources, embeddings.as_ref())?;
                    lap.mark("broker tables");
                }
                tables::write_meta(warehouse.conn(), &manifest.build, &computed.meta)?;
                let snapshot_path = layout.snapshot(&manifest);
                if !snapshot::reusable(&snapshot_path)? {
                    snapshot::copy_to(warehouse.conn(), warehouse.path(), &snapshot_path)?;
                }
                fault::point("snapshot");
                Ok(())
            });
            (staging.join().expect("staging panicked"), snapshotted)
        });
        let staged = staged.context("stage")?;
        snapshotted.context("snapshot")?;
        report.build = manifest.build.clone();
        (report.files, report.written, report.linked) = (staged.files, staged.written, staged.linked);
        tracing::info!(step = "stage+snapshot", build = %manifest.build, written = staged.written,
            linked = staged.linked, reused = staged.reused, ms = ms(started));
        Ok(Some(manifest))
    })?;
    let Some(manifest) = manifest else { return Ok(report) };
    drop(fetched);

    let started = Instant::now();
    report.published = previous.as_ref().map(|(_, m)| &m.build) != Some(&manifest.build);
    if report.published {
        site::publish(layout, &manifest).context("publish")?;
        fault::point("published");
    }
    let pruned = site::prune(layout, config.keep_builds).context("pruning old builds")?;
    fault::point("pruned");
    tracing::info!(step = "publish", build = %manifest.build, published = report.published, pruned, ms = ms(started));
    Ok(report)
}

/// Opens the warehouse. One this DuckDB cannot read (written by DuckDB 2.0)
/// fails the run before anything is written, unless the run is full: a full
/// run sets the file aside and rebuilds a new warehouse from the sources.
fn open_warehouse(path: &std::path::Path, full: bool) -> Result<Warehouse> {
    let error = match Warehouse::open(path) {
        Err(error) if full => error,
        opened => return opened,
    };
    let Some(unreadable) = error.downcast_ref::<database::Unreadable>() else { return Err(error) };
    let aside = database::set_aside(unreadable)?;
    tracing::warn!(
        reason = %unreadable,
        aside = %aside.display(),
        "set the unreadable warehouse aside (delete it when it is no longer wanted); rebuilding from the sources"
    );
    Warehouse::open(path)
}

/// Embeds the agents, asking the provider only for texts no earlier run
/// embedded with the same model.
async fn embed(
    warehouse: &Warehouse,
    provider: broker::embed::ProviderConfig,
    sources: &broker::Sources,
) -> Result<broker::store::Embeddings> {
    let started = Instant::now();
    let provider = broker::embed::Provider::new(provider)?;
    let cached = broker::store::cached_embeddings(warehouse.conn(), provider.model())?;
    let (vectors, computed) = broker::embed::agents(&provider, &sources.agents, &cached).await?;
    broker::store::cache_embeddings(warehouse.conn(), provider.model(), &computed)?;
    tracing::info!(step = "embed", agents = vectors.len(), computed = computed.len(), ms = ms(started));
    Ok(broker::store::Embeddings { model: provider.model().to_string(), vectors })
}

pub(crate) fn ms(started: Instant) -> u64 {
    started.elapsed().as_millis() as u64
}

/// Replays every stored message and renders every route. The operations go
/// to the warehouse writer as soon as they are known; the other derived
/// tables are written while the files are staged.
fn full(
    config: &BuildConfig,
    warehouse: &Warehouse,
    everything: Option<&[Message]>,
    side_files: &[site::File],
    operations_out: std::sync::mpsc::SyncSender<Vec<hcs20::OperationRow>>,
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
    // The writer is gone only if it failed; its error is reported on join.
    let _ = operations_out.send(operations);
    let analytics = Analytics::from_ledger(&ledger, config.limits.max_page_size);
    let mut files = render(&analytics, Route::all_static(&analytics));
    files.extend_from_slice(side_files);
    let recent = analytics.recent_events().to_vec();
    Ok(Computed { files, kept: Vec::new().into(), meta, tables: Some(Tables { ledger, recent }), linking: None })
}

/// Applies only the messages the live build has not seen, when that gives
/// the same result as a replay: they must all follow the live build's last
/// message in consensus order, announce no topic, and hold no chunk of a
/// submission begun earlier.
fn incremental(
    config: &BuildConfig,
    warehouse: &Warehouse,
    live: &Manifest,
    side_files: &[site::File],
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
        if unchanged(side_files, live, config.limits) {
            return Ok(Step::UpToDate(live.clone()));
        }
        // Only guard data changed: keep every section C file.
        let kept: std::sync::Arc<[Entry]> =
            live.routes.iter().filter(|e| route_of(e, config.limits).is_some()).cloned().collect();
        let linking = link_kept(config, live, &kept);
        report.incremental = true;
        let files = side_files.to_vec();
        return Ok(Step::Apply(Box::new(Computed { files, kept, meta, tables: None, linking: Some(linking) })));
    }
    if let Some(reason) = needs_replay(&new, &meta) {
        tracing::info!(reason, "replaying everything");
        return Ok(Step::Replay);
    }

    let lap = Lap::new();
    let conn = warehouse.conn();
    let mut ledger = tables::load_ledger(conn, &meta, &accounts_named(&new))?;
    lap.mark("resume ledger");
    let operations = ledger.apply_messages(&new);
    let changes = ledger.changes.take().unwrap_or_default();
    lap.mark("apply");
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
    lap.mark("keep");

    tables::apply_delta(conn, &ledger, &changes, &operations, config.limits.max_page_size)?;
    lap.mark("delta");
    let model = tables::load_partial(conn, &token_keys, &accounts, config.limits.max_page_size)?;
    lap.mark("load partial model");

    let mut routes = Route::global_static();
    for token in model.tokens.iter().filter(|t| token_keys.contains(&(t.topic, t.tick.clone()))) {
        routes.extend(Route::token_static(token));
    }
    routes.extend(accounts.iter().map(|a| Route::Account(*a)));
    let mut files = render(&model, routes);
    files.extend_from_slice(side_files);
    lap.mark("render");

    report.incremental = true;
    report.applied = operations.len();
    report.rejected = operations.iter().filter(|o| o.rejection.is_some()).count();
    let meta = Meta { last_applied: ledger.last_applied, applied: last_sequences(&new, meta.applied.clone()), ..meta };
    Ok(Step::Apply(Box::new(Computed { files, kept, meta, tables: None, linking: Some(linking) })))
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
    let (path, query) = entry.route.split_once('?').unwrap_or((&entry.route, ""));
    Route::parse(path, query, limits).ok().flatten()
}

/// Whether the live build already serves exactly these files (and no other
/// guard route).
fn unchanged(files: &[site::File], live: &Manifest, limits: Limits) -> bool {
    let routes = live.by_route();
    let same = files.iter().all(|f| {
        routes
            .get(f.route.as_str())
            .is_some_and(|e| e.etag == crate::manifest::etag(&f.body) && e.last_modified == f.last_modified.http_date())
    });
    let rendered: BTreeSet<&str> = files.iter().map(|f| f.route.as_str()).collect();
    same && live.routes.iter().all(|e| route_of(e, limits).is_some() || rendered.contains(e.route.as_str()))
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

/// Accounts whose balances the messages may touch.
fn accounts_named(messages: &[Message]) -> BTreeSet<EntityId> {
    let mut order: Vec<&Message> = messages.iter().collect();
    order.sort_unstable_by_key(|m| m.order_key());
    let (envelopes, _) = hcs20::chunks::assemble(order.into_iter());
    let mut accounts = BTreeSet::new();
    for envelope in &envelopes {
        match decode(&envelope.body).1 {
            Ok(Operation::Mint { to, .. }) => {
                accounts.insert(to);
            }
            Ok(Operation::Burn { from, .. }) => {
                accounts.insert(from);
            }
            Ok(Operation::Transfer { from, to, .. }) => {
                accounts.extend([from, to]);
            }
            _ => {}
        }
    }
    accounts
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
    crate::parallel_map(&routes, |route| {
        let rendered = route.render(analytics).expect("static routes name existing tokens");
        site::File {
            route: route.canonical(),
            path: route.file(),
            body: rendered.body,
            last_modified: rendered.last_modified,
            content_type: JSON,
            cache: rendered.cache,
        }
    })
}
