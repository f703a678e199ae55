//! The live overlay: agents registered, updated or deleted since the
//! published build, in front of it. The build stays read-only; every
//! lookup by UAID and every search consults the overlay first, so a change
//! is visible the moment its write returns, and stays so until a build
//! that applied the journal through the change's `seq` is published.
//!
//! **Exactness.** A change belongs to the overlay only while its `seq` is
//! above the build's journal point, decided per request against the build
//! the request holds: a build swap never shows a change twice or not at
//! all. Search runs over the build without the agents the overlay
//! replaced or deleted and over the overlay's own small index, then merges
//! the two ([`almanac::broker::query::merge`]): totals, pages, sorts and
//! aggregations are those of one index holding both. (Overlay agents are
//! scored for relevance with the build's term statistics and their own;
//! the build's agents with the build's alone, until the next build.)
//!
//! The overlay's index is rebuilt on every change, from the overlay's
//! agents only: cheap while the overlay is small, which the next build
//! keeps it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use almanac::broker::bits::Bits;
use almanac::broker::query::{self, AgentIndex, Merged, SearchQuery, Side};
use almanac::broker::Agent;

use super::agents::Agents;

/// The overlay, shared by every request.
#[derive(Default)]
pub struct Overlay {
    view: RwLock<Arc<View>>,
    /// Serialises changes (each rebuilds the view from the last).
    changing: Mutex<()>,
    /// Embeddings of live agents for hybrid search, by UAID: the key of
    /// the text embedded and its vector. Made on the first hybrid search
    /// that needs them; kept while the agent is in the overlay.
    embedded: Mutex<HashMap<String, (String, Arc<[f32]>)>>,
}

/// One state of the overlay.
pub struct View {
    /// By UAID, the last live change: its `seq` and the agent's position
    /// in `index`, or `None` when it was deleted.
    changes: HashMap<String, (i64, Option<u32>)>,
    /// The largest `seq` held (0: none): a build at or past it holds them all.
    newest: i64,
    index: AgentIndex,
    /// The `seq` of each agent of `index`.
    seqs: Vec<i64>,
    hits: Vec<Box<str>>,
    /// The exclusions of the last build searched with this view.
    excluded: Mutex<Option<Exclusions>>,
}

struct Exclusions {
    /// Which build: its index's address and journal point.
    build: (usize, i64),
    base: Arc<Bits>,
    live: Arc<Bits>,
}

/// What the overlay says of one UAID for a build.
pub enum Found<'a> {
    /// Changed since the build: the agent as it is now.
    Live(&'a Agent),
    /// Deleted since the build.
    Deleted,
    /// Not changed since the build: ask the build.
    Build,
}

impl Default for View {
    fn default() -> View {
        View::build(HashMap::new())
    }
}

impl Overlay {
    /// An overlay holding `changes` (`seq`, UAID, agent or `None` when
    /// deleted), as the store lists them.
    pub fn new(changes: Vec<(i64, String, Option<Agent>)>) -> Overlay {
        let overlay = Overlay::default();
        overlay.apply(changes);
        overlay
    }

    pub fn view(&self) -> Arc<View> {
        self.view.read().expect("overlay").clone()
    }

    /// Applies changes; a change older than the one held for its UAID is
    /// ignored (two requests may finish out of order).
    pub fn apply(&self, changes: Vec<(i64, String, Option<Agent>)>) {
        let _one_at_a_time = self.changing.lock().expect("overlay");
        let mut entries = self.view().entries();
        for (seq, uaid, agent) in changes {
            if entries.get(&uaid).is_none_or(|(held, _)| *held < seq) {
                entries.insert(uaid, (seq, agent));
            }
        }
        self.publish(View::build(entries));
    }

    /// Drops the changes a build holds (its journal point is `seq`).
    pub fn prune(&self, seq: i64) {
        let _one_at_a_time = self.changing.lock().expect("overlay");
        let old = self.view();
        if old.changes.values().all(|(held, _)| *held > seq) {
            return;
        }
        let mut entries = old.entries();
        entries.retain(|_, (held, _)| *held > seq);
        self.publish(View::build(entries));
    }

    /// Makes `view` the one requests see; forgets embeddings of agents it
    /// no longer holds.
    fn publish(&self, view: View) {
        self.embedded.lock().expect("overlay").retain(|uaid, _| matches!(view.changes.get(uaid), Some((_, Some(_)))));
        *self.view.write().expect("overlay") = Arc::new(view);
    }

    /// The embedding of a live agent whose text has key `key`, if made.
    pub fn embedding(&self, uaid: &str, key: &str) -> Option<Arc<[f32]>> {
        let embedded = self.embedded.lock().expect("overlay");
        embedded.get(uaid).filter(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    /// Keeps the embedding of a live agent's text.
    pub fn remember(&self, uaid: &str, key: String, vector: Arc<[f32]>) {
        self.embedded.lock().expect("overlay").insert(uaid.to_string(), (key, vector));
    }
}

/// The overlay as one build sees it: the build's agents it replaced or
/// deleted, and its own agents newer than the build.
pub struct Live<'a> {
    view: &'a View,
    /// Build agents the overlay replaces or deletes.
    pub base_excluded: Arc<Bits>,
    /// Overlay agents the build already holds.
    pub excluded: Arc<Bits>,
}

impl<'a> Live<'a> {
    /// The overlay's index (with agents `excluded` leaves out).
    pub fn index(&self) -> &'a AgentIndex {
        &self.view.index
    }

    /// Every agent of the build and the overlay as one index holds them.
    pub fn agents<'b>(&'b self, build: &'b Agents) -> impl Iterator<Item = &'b Agent> {
        let base = build.index.agents.iter().enumerate().filter(|(i, _)| !self.base_excluded.contains(*i));
        let live = self.view.index.agents.iter().enumerate().filter(|(i, _)| !self.excluded.contains(*i));
        base.chain(live).map(|(_, agent)| agent)
    }
}

impl View {
    fn build(entries: HashMap<String, (i64, Option<Agent>)>) -> View {
        let mut changes = HashMap::with_capacity(entries.len());
        let mut agents = Vec::new();
        let mut seqs = Vec::new();
        for (uaid, (seq, agent)) in entries {
            let at = agent.map(|agent| {
                agents.push(agent);
                seqs.push(seq);
                (agents.len() - 1) as u32
            });
            changes.insert(uaid, (seq, at));
        }
        let hits = agents.iter().map(|a| serde_json::to_string(a).expect("agents serialise").into()).collect();
        let newest = changes.values().map(|(seq, _)| *seq).max().unwrap_or(0);
        View { changes, newest, index: AgentIndex::build(agents), seqs, hits, excluded: Mutex::new(None) }
    }

    /// The changes held, as [`View::build`] takes them.
    fn entries(&self) -> HashMap<String, (i64, Option<Agent>)> {
        self.changes.iter().map(|(uaid, (seq, at))| (uaid.clone(), (*seq, at.map(|i| self.agent(i).clone())))).collect()
    }

    fn agent(&self, i: u32) -> &Agent {
        &self.index.agents[i as usize]
    }

    /// `uaid` as of now, for a build whose journal point is `seq`.
    pub fn find(&self, uaid: &str, seq: i64) -> Found<'_> {
        match self.changes.get(uaid) {
            Some((held, Some(i))) if *held > seq => Found::Live(self.agent(*i)),
            Some((held, None)) if *held > seq => Found::Deleted,
            _ => Found::Build,
        }
    }

    /// The live agents newer than the build, in no order.
    pub fn agents_after(&self, seq: i64) -> impl Iterator<Item = &Agent> {
        self.seqs.iter().zip(&self.index.agents).filter(move |(s, _)| **s > seq).map(|(_, agent)| agent)
    }

    /// Runs `query` over `build` and the overlay as one; `None` when the
    /// overlay changes nothing for this build (search the build alone).
    pub fn search(&self, build: &Agents, query: &SearchQuery) -> Option<Merged> {
        let live = self.live(build)?;
        Some(query::merge(&build.index, &live.base_excluded, &self.index, &live.excluded, query))
    }

    /// The overlay as `build` sees it; `None` when it changes nothing
    /// for that build.
    pub fn live(&self, build: &Agents) -> Option<Live<'_>> {
        if self.newest <= build.journal_seq {
            return None;
        }
        let (base_excluded, excluded) = self.exclusions(build);
        Some(Live { view: self, base_excluded, excluded })
    }

    /// The search hit of overlay agent `i`.
    pub fn hit(&self, i: usize) -> &str {
        &self.hits[i]
    }

    /// Which build agents the overlay replaces or deletes, and which
    /// overlay agents the build already holds: computed once per build.
    fn exclusions(&self, build: &Agents) -> (Arc<Bits>, Arc<Bits>) {
        let key = (std::ptr::from_ref(build) as usize, build.journal_seq);
        let mut cached = self.excluded.lock().expect("overlay");
        if let Some(e) = cached.as_ref().filter(|e| e.build == key) {
            return (e.base.clone(), e.live.clone());
        }
        let seq = build.journal_seq;
        let base = Bits::from_positions(
            build.index.agents.len(),
            self.changes
                .iter()
                .filter(|(_, (held, _))| *held > seq)
                .filter_map(|(uaid, _)| build.agent(uaid).map(|(i, _)| i)),
        );
        let live = Bits::from_positions(
            self.seqs.len(),
            self.seqs.iter().enumerate().filter(|(_, s)| **s <= seq).map(|(i, _)| i),
        );
        let (base, live) = (Arc::new(base), Arc::new(live));
        *cached = Some(Exclusions { build: key, base: base.clone(), live: live.clone() });
        (base, live)
    }

    /// `{hits, total, page, limit[, aggregations]}` of a merged page.
    pub fn page_body(&self, build: &Agents, page: &Merged) -> Vec<u8> {
        let hit = |side: &Side| -> &str {
            match side {
                Side::Base(i) => build.hit(*i),
                Side::Live(i) => self.hit(*i),
            }
        };
        super::agents::page_body(
            page.hits.iter().map(hit),
            page.total,
            page.page,
            page.limit,
            page.aggregations.as_ref(),
        )
    }
}
