//! One generator run, as a list of named steps:
//!
//! 1. **ingest**: fetch each topic's new messages into the warehouse,
//!    following registrations to new topics until none are left;
//! 2. **replay**: apply every stored message in consensus order;
//! 3. **render**: every static route through the shared query functions;
//! 4. **stage**: write the build directory beside the live one;
//! 5. **snapshot**: write the build's DuckDB snapshot;
//! 6. **publish**: flip `current`, copy the derived tables into the
//!    warehouse, prune old builds.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::analytics::Analytics;
use crate::entity::EntityId;
use crate::hcs20::{self, message::decode, Operation, Topics};
use crate::ledger::{captured, mirror};
use crate::routes::{Limits, Route};
use crate::site::{self, Layout};
use crate::warehouse::Warehouse;
use crate::{snapshot, JSON};

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
}

#[derive(Debug, Default, Clone)]
pub struct BuildReport {
    pub fetched: usize,
    pub messages: usize,
    pub valid: usize,
    pub rejected: usize,
    pub build: String,
    pub files: usize,
    pub written: usize,
    pub linked: usize,
    /// False when the data gave the build already live.
    pub published: bool,
}

pub async fn run(config: &BuildConfig) -> Result<BuildReport> {
    let mut report = BuildReport::default();
    let layout = &config.layout;
    let mut warehouse = Warehouse::open(&layout.warehouse())?;

    let started = Instant::now();
    report.fetched = ingest(config, &mut warehouse).await.context("ingest")?;
    tracing::info!(step = "ingest", fetched = report.fetched, ms = started.elapsed().as_millis() as u64);

    let started = Instant::now();
    let messages = warehouse.messages().context("loading messages from the warehouse")?;
    let (ledger, operations) = hcs20::replay(&messages, config.topics);
    report.messages = messages.len();
    report.rejected = operations.iter().filter(|o| o.rejection.is_some()).count();
    report.valid = operations.len() - report.rejected;
    drop(messages);
    tracing::info!(step = "replay", messages = report.messages, valid = report.valid, rejected = report.rejected,
        ms = started.elapsed().as_millis() as u64);

    let started = Instant::now();
    let analytics = Analytics::from_ledger(&ledger, config.limits.max_page_size);
    let files = render(&analytics);
    tracing::info!(step = "render", files = files.len(), ms = started.elapsed().as_millis() as u64);

    let started = Instant::now();
    let previous = layout.current().context("reading the live build")?;
    let (manifest, staged) = site::stage(layout, files, previous.as_ref()).context("stage")?;
    report.build = manifest.build.clone();
    report.files = staged.files;
    report.written = staged.written;
    report.linked = staged.linked;
    tracing::info!(step = "stage", build = %manifest.build, written = staged.written, linked = staged.linked,
        reused = staged.reused, ms = started.elapsed().as_millis() as u64);

    let snapshot_path = layout.snapshot(&manifest);
    if !snapshot_path.exists() {
        let started = Instant::now();
        snapshot::write(&snapshot_path, &manifest.build, &ledger, &operations).context("snapshot")?;
        tracing::info!(step = "snapshot", path = %snapshot_path.display(), ms = started.elapsed().as_millis() as u64);
    }

    let started = Instant::now();
    report.published = previous.as_ref().map(|(_, m)| &m.build) != Some(&manifest.build);
    if report.published {
        site::publish(layout, &manifest).context("publish")?;
        warehouse.copy_derived(&snapshot_path)?;
    }
    let pruned = site::prune(layout, config.keep_builds).context("pruning old builds")?;
    tracing::info!(step = "publish", build = %manifest.build, published = report.published, pruned,
        ms = started.elapsed().as_millis() as u64);
    Ok(report)
}

/// Fetches every known topic's new messages; returns how many were stored.
async fn ingest(config: &BuildConfig, warehouse: &mut Warehouse) -> Result<usize> {
    let mirror = match &config.source {
        Source::Mirror(c) => Some(mirror::Mirror::new(c.clone())?),
        Source::Captured(_) => None,
    };
    let mut done: BTreeSet<EntityId> = BTreeSet::new();
    let mut fetched = 0;
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
            fetched += messages.len();
            warehouse.append(topic, &messages)?;
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

/// Renders every static route. Parallel over the cores: for a large ledger
/// this is most of a build.
pub fn render(analytics: &Analytics) -> Vec<site::File> {
    let routes = Route::all_static(analytics);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = routes.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = routes
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|route| {
                            let rendered = route.render(analytics).expect("static routes name existing tokens");
                            site::File {
                                route: route.canonical(),
                                path: route.file(),
                                body: rendered.body,
                                last_modified: rendered.last_modified,
                                content_type: JSON,
                                cache_control: rendered.cache.header(),
                            }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("renderer panicked")).collect()
    })
}
