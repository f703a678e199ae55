//! A build made as a **layer** over the live build's base: what a run
//! writes when the live build is large and the agents did not change.
//!
//! A whole build is a folder holding every route's file: at a million
//! agents, 4.4 million files, which even hard-linked take minutes to put
//! in a new folder. A layer's folder holds only the files whose bytes
//! changed since its base (a whole build); its manifest and index list
//! those routes and the base's routes it no longer serves (`removed`), and
//! every other route is the base's, its file in the base's folder. A layer
//! is always over a whole build, never over another layer: the next layer
//! over the same base carries what the live layer holds that it does not
//! render again (linked from the live layer's folder), so a route is found
//! in at most two lookups, and a layer grows with what changed since its
//! base until it passes `--layer-max-routes`; then the next build is whole
//! again.
//!
//! A layer is made when the live build has at least `--layer-min-routes`
//! routes (by default where the static hosts' configurations stop: a
//! layer has none, its folder is not a site by itself), and the broker's
//! sources are byte for byte the live build's (their digest,
//! [`crate::broker::scan::digest`], against the one in its snapshot and in
//! the warehouse). Then either:
//!
//! - the journal is the live build's too: every broker route (under
//!   `/api/v1/` but the OpenAPI document, the agents' pages under
//!   `/agents`, and the agents' exports) is the live build's, and nothing
//!   of the agents is read; or
//! - the journal only grew, by agents registered, updated or deleted
//!   ([`crate::broker::delta`]): they are applied to the warehouse, and
//!   the broker's files they change are rendered: their own and the files
//!   made of every agent (the catalog files, the directory's pages, the
//!   exports), from what the warehouse keeps; a deleted agent's routes are
//!   removed.
//!
//! Either way the live build's search index folder is linked under the new
//! build's name, and the snapshot names it ([`broker_site::store::SearchIndex`]):
//! the api searches it with its live overlay, which holds every change
//! after the folder's journal point. Everything else is rendered whole, as
//! a full build renders it (a replay of the ledger; the guard's files; the
//! other pages; the exports), and kept in the layer only where it differs
//! from the base.
//!
//! The agents' pages share their frame with every page, which links the
//! guard's section when the build has one: a run where it came or went is
//! whole.
//!
//! The live build's files are not verified by a layered run (a whole run
//! reads all of them): a layer reads and links only the live layer's.

use std::collections::HashSet;
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::broker::delta::{self, Delta};
use broker_site::rows::{Digest, Facts};
use broker_site::store::{self, SearchIndex};
use shared::http::OPENAPI_ROUTE;
use shared::index::{Index, Record, Stack};
use shared::manifest::{Entry, Manifest};
use shared::site::{self, File, Layout, StageReport};

/// When runs make layers.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// A live build with fewer routes is followed by a whole build.
    pub min_routes: usize,
    /// A live layer holding more routes than this is followed by a whole
    /// build (which folds it into a new base).
    pub max_routes: usize,
}

/// The live build a run makes a layer over the base of.
pub struct Live {
    pub id: String,
    pub stack: Stack,
    /// The live build's own folder and manifest, when it is a layer (they
    /// are small: what changed since its base).
    pub layer: Option<(PathBuf, Manifest)>,
    /// What the pages say of its agents.
    pub facts: Facts,
    /// The agents changed since, when the journal grew (`None`: they did
    /// not change).
    pub delta: Option<Delta>,
    /// The search index folder the layer keeps (the live build's).
    pub search: SearchIndex,
}

impl Live {
    /// The whole build the new layer is over: the live one's base, or the
    /// live build itself.
    pub fn base(&self) -> &Index {
        self.stack.base.as_ref().unwrap_or(&self.stack.top)
    }

    pub fn base_id(&self) -> &str {
        self.base().build().unwrap_or_default()
    }

    /// The manifest's entries of the agents' exports, read from the live
    /// build's files of them (a layer keeps them).
    pub fn exports(
        &self,
        layout: &Layout,
        conn: &duckdb_files::sql::Connection,
    ) -> Result<Vec<shared::manifest::Export>> {
        let kept = |(route, what): (String, &str)| {
            let file = self.file(layout, &route).with_context(|| format!("the live build has no {route}"))?;
            crate::analysts::kept(conn, &file, route, what)
        };
        crate::analysts::broker_exports().map(kept).collect()
    }

    /// Where the file of the live build's `route` is.
    fn file(&self, layout: &Layout, route: &str) -> Option<PathBuf> {
        let (record, layer) = self.stack.get(route)?;
        let build = match layer {
            shared::index::Layer::Top => &self.id,
            shared::index::Layer::Base => self.base_id(),
        };
        Some(layout.build_dir(build).join(record.file))
    }
}

/// Whether a route is the broker's: kept from the live build by a layer
/// (its JSON, its pages, Programmable Secrets' pages and its exports).
pub fn is_broker(route: &str) -> bool {
    route.starts_with(pages::routes::AGENTS)
        || (route.starts_with(broker_site::render::API) && route != OPENAPI_ROUTE)
        || route.starts_with(pages::routes::SECRETS)
        || route.starts_with(pages::routes::PLUGINS)
        || crate::analysts::broker_exports().any(|(r, _)| r == route)
}

/// The broker's route prefixes, in route order (see [`is_broker`]).
const BROKER_PREFIXES: [&str; 4] =
    [pages::routes::AGENTS, broker_site::render::API, pages::routes::PLUGINS, pages::routes::SECRETS];

/// What a run asks for, as far as layering goes.
pub struct Run<'a> {
    pub layout: &'a Layout,
    pub settings: Settings,
    /// `--full`: everything replayed and rendered.
    pub full: bool,
    /// The digest of the agents' sources and journal, with the embedding
    /// model.
    pub digest: &'a Digest,
    /// The api's journal.
    pub journal: &'a std::path::Path,
    /// Whether the build has the guard's section.
    pub guard: bool,
}

/// The live build, when this run makes a layer over its base; `None`
/// (and why, logged) when it makes a whole build.
pub fn candidate(run: &Run, warehouse: &duckdb_files::sql::Connection) -> Result<Option<Live>> {
    let whole = |why: String| {
        tracing::info!(why, "a whole build");
        Ok(None)
    };
    let (layout, settings) = (run.layout, run.settings);
    let Some(id) = layout.current_build() else { return Ok(None) };
    if run.full {
        return whole("--full".into());
    }
    let stack = match Stack::open(&layout.builds(), &id) {
        Ok(stack) => stack,
        Err(e) => return whole(format!("the live build's index: {e:#}")),
    };
    let routes = stack.len();
    if routes < settings.min_routes {
        return whole(format!("the live build has {routes} routes, fewer than --layer-min-routes"));
    }
    if stack.base.is_some() && stack.top.len() > settings.max_routes {
        return whole(format!("the live layer holds {} routes, more than --layer-max-routes", stack.top.len()));
    }
    // Every page's frame links the guard's section when there is one: the
    // agents' pages are the live build's only if that has not changed.
    if stack.get(pages::routes::GUARD).is_some() != run.guard {
        return whole("the guard's section came or went: the agents' pages change".into());
    }
    let digest = run.digest;
    let snapshot = layout.snapshots().join(stack.top.snapshot().unwrap_or_default());
    let (recorded, search) = duckdb_files::snapshot::open_for_build(&snapshot, &id)
        .and_then(|conn| Ok((store::recorded(&conn)?, store::search_index(&conn)?)))
        .with_context(|| format!("the snapshot of build {id}"))?;
    let (Some(recorded), Some(search)) = (recorded, search) else {
        return whole("the live build's snapshot records no digest of its agents".into());
    };
    let delta = match (recorded.digest.whole == digest.whole, recorded.digest.sources == digest.sources) {
        (true, _) => None,
        (false, false) => return whole("the broker's sources changed".into()),
        (false, true) => {
            let Some(applied) = recorded.journal_digest.as_deref() else {
                return whole("the live build records no digest of its journal".into());
            };
            let records = match broker_model::journal::read(run.journal) {
                Ok(records) => records,
                Err(e) => return whole(format!("the broker journal: {e:#}")),
            };
            match delta::after(records, recorded.facts.journal_seq, applied) {
                Ok(delta) => Some(delta),
                Err(why) => return whole(why.into()),
            }
        }
    };
    if store::recorded(warehouse)?.is_none_or(|w| w.digest.whole != recorded.digest.whole) {
        return whole("the warehouse's agents are not the live build's".into());
    }
    let layer = match stack.base {
        Some(_) => {
            let dir = layout.build_dir(&id);
            let manifest = Manifest::load(&dir)?;
            Some((dir, manifest))
        }
        None => None,
    };
    Ok(Some(Live { id, stack, layer, facts: recorded.facts, delta, search }))
}

/// Whether the live build serves each of `files` exactly as rendered
/// (route, file, bytes and headers), and no other route of their kind:
/// every route it has but the broker's, the ledger's, the exports and the
/// pages (all rendered from data that did not change when no message is
/// new) is among them.
pub fn serves(live: &Live, files: &[File]) -> bool {
    let rendered: HashSet<&str> = files.iter().map(|f| f.route.as_str()).collect();
    let derived = |r: &Record| {
        r.route.starts_with("/hcs20") || crate::analysts::is_export(&r.route) || r.content_type == pages::HTML
    };
    let base = live.stack.base.as_ref().map(others);
    let served =
        others(&live.stack.top).chain(base.into_iter().flatten()).filter(|r| live.stack.get(&r.route).is_some());
    files.iter().all(|f| live.stack.get(&f.route).is_some_and(|(r, _)| same(&r, &entry(f))))
        && served.into_iter().all(|r| derived(&r) || rendered.contains(r.route.as_str()))
}

/// What a layer holds.
pub struct Plan {
    /// The live layer's entries this run keeps (the broker's): linked
    /// from the live layer's folder.
    pub carried: Vec<Entry>,
    /// Files rendered this run that the base does not have as they are.
    pub changed: Vec<File>,
    /// Routes of the base the layer does not serve.
    pub removed: Vec<String>,
}

/// What a layer does with the broker's routes.
pub enum Broker<'a> {
    /// The agents did not change: every broker route is the live build's.
    Kept,
    /// Agents changed: the broker's files this run rendered are among the
    /// layer's, all of those made of every agent ([`is_shared`]) among
    /// them but the directory's pages (only those that changed are made:
    /// `pages` are the routes of them all); `gone` are the routes of the
    /// agents deleted.
    Changed { gone: &'a HashSet<String>, pages: &'a HashSet<String> },
}

/// The layer over `live`'s base of a build whose files are `files` (every
/// one of them rendered this run), the broker's as `broker` says.
pub fn plan(live: &Live, files: Vec<File>, broker: Broker) -> Plan {
    let base = live.base();
    let rendered: HashSet<String> = files.iter().map(|f| f.route.clone()).collect();
    // Over the cores: each file's entry made and looked up in the base's
    // index (positioned reads).
    let changed: Vec<File> = {
        use rayon::prelude::*;
        files.into_par_iter().filter(|f| !base.get(&f.route).is_some_and(|r| same(&r, &entry(f)))).collect()
    };
    let empty = HashSet::new();
    let (gone, pages, remade) = match broker {
        Broker::Kept => (&empty, &empty, false),
        Broker::Changed { gone, pages } => (gone, pages, true),
    };
    // Made of every agent and not kept when agents changed: all but the
    // directory's pages are rendered again, and of those, the ones that
    // no longer exist go.
    let stale = |route: &str| is_shared(route) && !(is_directory(route) && pages.contains(route));
    // The live layer's broker routes not rendered again are still what it
    // holds, but those of deleted agents and, when agents changed, the
    // stale ones.
    let superseded = |route: &str| rendered.contains(route) || gone.contains(route) || (remade && stale(route));
    let kept = |route: &str| is_broker(route) && !superseded(route);
    let (mut carried, mut removed) = (Vec::new(), Vec::new());
    if let Some((_, layer)) = &live.layer {
        carried.extend(layer.routes.iter().filter(|e| kept(e.route())).cloned());
        removed.extend(layer.removed.iter().filter(|r| kept(r)).cloned());
    }
    // The base's routes that are not the broker's and were not rendered.
    removed.extend(others(base).map(|r| r.route).filter(|r| !rendered.contains(r)));
    if remade {
        removed.extend(shared(base).map(|r| r.route).filter(|r| !rendered.contains(r) && stale(r)));
        removed.extend(gone.iter().filter(|r| base.get(r).is_some_and(|r| !r.removed)).cloned());
    }
    removed.sort_unstable();
    removed.dedup();
    Plan { carried, changed, removed }
}

/// Whether a broker route is made of every agent or of the catalog (a
/// catalog file, a page of the directory, Programmable Secrets' pages),
/// not of one agent.
pub fn is_shared(route: &str) -> bool {
    let one_agents = route.starts_with(AGENT_ROUTES[0])
        || route.starts_with(AGENT_ROUTES[1])
        || (route.starts_with(PROFILES) && !route.starts_with(DIRECTORY_PAGES));
    is_broker(route) && !one_agents && !crate::analysts::is_export(route)
}

/// Whether a route is one of the directory's pages.
fn is_directory(route: &str) -> bool {
    route == pages::routes::AGENTS || route.starts_with(DIRECTORY_PAGES)
}

/// The prefixes of one agent's JSON routes, in route order.
const AGENT_ROUTES: [&str; 2] = ["/api/v1/agents/", "/api/v1/resolve/"];
/// Profiles are under `/agents/`, but for the directory's pages.
const PROFILES: &str = "/agents/";
const DIRECTORY_PAGES: &str = "/agents/page/";

/// The records of `index` that are broker routes made of every agent
/// ([`is_shared`]), read by ranges: the one agent's routes between them
/// are never read.
fn shared(index: &Index) -> impl Iterator<Item = Record<'_>> {
    let range = |prefix: &str| index.lower_bound(prefix)..index.lower_bound(&successor(prefix));
    let api = broker_site::render::API;
    let (agents, resolve) = (range(AGENT_ROUTES[0]), range(AGENT_ROUTES[1]));
    let ranges = [
        index.lower_bound(api)..agents.start,
        agents.end..resolve.start,
        resolve.end..index.lower_bound(&successor(api)),
        range(DIRECTORY_PAGES),
        range(pages::routes::SECRETS),
        range(pages::routes::PLUGINS),
    ];
    let directory = index.get(pages::routes::AGENTS);
    ranges
        .into_iter()
        .flatten()
        .filter_map(|p| index.at(p))
        .chain(directory)
        .filter(|r| !r.removed && is_shared(&r.route))
}

/// Writes the layer `plan` over `live`'s base (with the manifest's
/// `exports`) and names its folder for the build.
pub fn stage(
    layout: &Layout,
    live: &Live,
    plan: Plan,
    exports: Vec<shared::manifest::Export>,
) -> Result<(Manifest, StageReport)> {
    let layer = live.layer.as_ref();
    let mut staging = site::Staging::begin(layout, &plan.carried, layer.map(|(dir, _)| dir.as_path()))?;
    let previous = layer.map(site::Previous::of);
    let written = staging.write(&plan.changed, previous.as_ref())?;
    let mut entries = plan.carried;
    entries.extend(written);
    let base = live.base();
    let mut manifest = Manifest::layer(entries, live.base_id(), base.last_modified(), plan.removed);
    manifest.exports = exports;
    let report = staging.finish(layout, &manifest, &[], &[], None)?;
    Ok((manifest, report))
}

/// The entry a rendered file gets.
fn entry(f: &File) -> Entry {
    Entry::new(&f.route, &f.path, &f.representation)
}

/// Whether an index's record is `entry`: the same file, bytes and headers.
fn same(record: &Record, entry: &Entry) -> bool {
    let modified = std::time::UNIX_EPOCH + std::time::Duration::from_secs(record.last_modified);
    !record.removed
        && record.file == entry.file()
        && record.etag_text() == entry.etag.as_str()
        && record.length == entry.length
        && record.content_type == entry.content_type
        && record.cache_control == entry.cache_control
        && httpdate::fmt_http_date(modified) == entry.last_modified.as_str()
}

/// The records of `index` that are not the broker's ([`is_broker`]),
/// read without reading the broker's ranges: those outside them, and the
/// OpenAPI document's among them.
fn others(index: &Index) -> impl Iterator<Item = Record<'_>> {
    let openapi = index.get(OPENAPI_ROUTE).filter(|r| !r.removed);
    outside(index, &BROKER_PREFIXES).chain(openapi).filter(|r| !is_broker(&r.route))
}

/// The records of `index` whose routes begin with none of `prefixes`
/// (given in route order): the ranges between them, each found by binary
/// search, so the routes under them are never read.
fn outside<'a>(index: &'a Index, prefixes: &[&str]) -> impl Iterator<Item = Record<'a>> + 'a {
    let mut ranges = Vec::new();
    let mut from = 0;
    for prefix in prefixes {
        ranges.push(from..index.lower_bound(prefix));
        from = index.lower_bound(&successor(prefix));
    }
    ranges.push(from..index.len());
    ranges.into_iter().flatten().filter_map(|p| index.at(p)).filter(|r| !r.removed)
}

/// The least string above every string beginning with `prefix` (its last
/// byte, ASCII, one higher).
fn successor(prefix: &str) -> String {
    let mut bytes = prefix.as_bytes().to_vec();
    let last = bytes.pop().expect("a prefix is not empty");
    assert!(last < 0x7f, "an ASCII prefix");
    bytes.push(last + 1);
    String::from_utf8(bytes).expect("ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_routes_outside_the_brokers_are_read_and_no_others() {
        let etag = shared::manifest::etag(b"x");
        let routes = [
            "/",
            "/accounts/0.0.1",
            "/agents",
            "/agents/uaid%3Aa",
            "/agents?page=2",
            "/api/guard/x",
            "/api/v1/agents/a",
            "/api/v1/openapi.json",
            "/api/v1/stats",
            "/api/v10",
            "/exports/a.parquet",
            "/hcs20/stats",
            "/tokens",
        ];
        let entries = routes
            .iter()
            .map(|r| Entry::of(r, "f", etag, "Mon, 01 Jan 2024 00:00:00 GMT", "a/b", "no-cache", 1))
            .collect();
        let index = Index::of(&Manifest::new(entries)).unwrap();
        let read: Vec<String> = outside(&index, &BROKER_PREFIXES).map(|r| r.route).collect();
        let expected: Vec<&str> =
            routes.iter().copied().filter(|r| !r.starts_with("/agents") && !r.starts_with("/api/v1/")).collect();
        assert_eq!(read, expected);
        for route in routes {
            assert_eq!(is_broker(route), !expected.contains(&route) && route != OPENAPI_ROUTE, "{route}");
        }
    }
}
