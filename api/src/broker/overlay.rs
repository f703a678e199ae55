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
//! **Cost.** The overlay's agents are indexed in segments, as a
//! log-structured index keeps them: a change indexes only its own agents
//! as a new segment, and a segment no larger than twice the next one's is
//! merged with it (dropping agents changed since). There are O(log n)
//! segments and each agent is indexed O(log n) times, so a change costs
//! little whatever the overlay holds, and a search merges a handful of
//! small indexes with the build's. Requests' changes that arrive while a
//! segment is being indexed wait and go into the next one together
//! ([`Overlay::apply_together`]): a segment's fixed cost is paid once per
//! batch, not once per registration.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use almanac::broker::bits::Bits;
use almanac::broker::query::{self, AgentIndex, Hit, Merged, Part, SearchQuery};
use almanac::broker::Agent;

use super::agents::Agents;

/// A change as the store lists it: its `seq`, the UAID, and the agent as
/// it is now or `None` when deleted.
pub type Change = (i64, String, Option<Agent>);

/// The overlay, shared by every request.
#[derive(Default)]
pub struct Overlay {
    view: RwLock<Arc<View>>,
    /// Serialises changes (each makes the next view from the last).
    changing: Mutex<()>,
    /// Changes handed in by requests and not yet applied: whoever applies
    /// next takes them all (see [`Overlay::apply_together`]).
    waiting: Mutex<Vec<Change>>,
    /// Embeddings of live agents for hybrid search, by UAID: the key of
    /// the text embedded and its vector. Made on the first hybrid search
    /// that needs them; kept while the agent is in the overlay.
    embedded: Mutex<HashMap<String, Embedded>>,
    /// Told of each change applied (see [`Overlay::settle_when_quiet`]).
    changed: tokio::sync::Notify,
}

/// A live agent's embedding: the key of the text embedded, and its vector.
type Embedded = (String, Arc<[f32]>);

/// Some changed agents, indexed: immutable, shared by the views holding it.
struct Segment {
    index: AgentIndex,
    /// The `seq` of each agent of `index`.
    seqs: Vec<i64>,
}

impl Segment {
    fn new(entries: Vec<(i64, Agent)>) -> Segment {
        let (seqs, agents): (Vec<i64>, Vec<Agent>) = entries.into_iter().unzip();
        Segment { index: AgentIndex::build(agents), seqs }
    }

    fn len(&self) -> usize {
        self.seqs.len()
    }

    /// The segment's agents (held in memory, as [`AgentIndex::build`]
    /// keeps them).
    fn agents(&self) -> &[Agent] {
        self.index.records.held_agents().expect("a segment's agents are held")
    }
}

/// Where the agent of a change is: segment and position.
type Place = (u32, u32);

/// One state of the overlay.
pub struct View {
    /// By UAID, the last change: its `seq` and where its agent is, or
    /// `None` when it was deleted. A segment's copy of an agent whose
    /// entry points elsewhere has been changed since.
    changes: HashMap<Arc<str>, (i64, Option<Place>)>,
    /// The largest `seq` held (0: none): a build at or past it holds them all.
    newest: i64,
    /// Oldest first; each more than twice the size of the next.
    segments: Vec<Arc<Segment>>,
    /// The exclusions of the last build searched with this view.
    excluded: Mutex<Option<Exclusions>>,
}

struct Exclusions {
    /// Which build: its index's address and journal point.
    build: (usize, i64),
    base: Arc<Bits>,
    segments: Arc<Vec<Bits>>,
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
        View::new(HashMap::new(), Vec::new())
    }
}

impl Overlay {
    pub fn view(&self) -> Arc<View> {
        self.view.read().expect("overlay").clone()
    }

    /// Applies changes; a change older than the one held for its UAID is
    /// ignored (two requests may finish out of order). Indexes only the
    /// changed agents, then merges segments as [`View`] keeps them.
    pub fn apply(&self, changes: Vec<Change>) {
        let _one_at_a_time = self.changing.lock().expect("overlay");
        self.apply_held(changes);
    }

    /// Applies `changes` together with those other requests hand in
    /// meanwhile, on a blocking thread; returns once they are visible.
    ///
    /// Why: indexing a segment has a fixed cost (tantivy's writer sets up
    /// its tables whatever it indexes), so one segment for the changes
    /// of 32 requests costs little more than one for a single change; and
    /// indexing does not belong on the async threads. Each request hands
    /// its changes in, then takes the lock and applies whatever is
    /// waiting: its own, unless an earlier holder of the lock took them,
    /// and that holder applied them before letting go.
    pub async fn apply_together(self: Arc<Self>, changes: Vec<Change>) {
        self.waiting.lock().expect("overlay").extend(changes);
        let applied = tokio::task::spawn_blocking(move || {
            let _one_at_a_time = self.changing.lock().expect("overlay");
            let waiting = std::mem::take(&mut *self.waiting.lock().expect("overlay"));
            if !waiting.is_empty() {
                self.apply_held(waiting);
            }
        });
        // Only a panic while indexing ends it otherwise: that is a bug,
        // shown as the request's own.
        if let Err(e) = applied.await {
            std::panic::resume_unwind(e.into_panic());
        }
    }

    /// [`Overlay::apply`] once `changing` is held.
    fn apply_held(&self, changes: Vec<Change>) {
        let old = self.view();
        let mut latest: HashMap<String, (i64, Option<Agent>)> = HashMap::new();
        for (seq, uaid, agent) in changes {
            let held = old.changes.get(uaid.as_str()).map(|(held, _)| *held);
            let newer = latest.get(&uaid).map_or(held, |(s, _)| Some(*s)).is_none_or(|held| held < seq);
            if newer {
                latest.insert(uaid, (seq, agent));
            }
        }
        if latest.is_empty() {
            return;
        }
        let mut changes = old.changes.clone();
        let mut added = Vec::new();
        for (uaid, (seq, agent)) in latest {
            changes.insert(uaid.into(), (seq, None));
            added.extend(agent.map(|agent| (seq, agent)));
        }
        let mut segments = old.segments.clone();
        let mut from = segments.len();
        if !added.is_empty() {
            segments.push(Arc::new(Segment::new(added)));
        }
        while let [.., older, newer] = segments.as_slice() {
            if older.len() > 2 * newer.len() {
                break;
            }
            let merged = current(&changes, &[older, newer]);
            segments.truncate(segments.len() - 2);
            segments.push(Arc::new(Segment::new(merged)));
            from = from.min(segments.len() - 1);
        }
        place(&mut changes, &segments, from);
        self.publish(View::new(changes, segments));
        self.changed.notify_one();
    }

    /// Drops the changes a build holds (its journal point is `seq`); what
    /// stays is indexed again as one segment.
    pub fn prune(&self, seq: i64) {
        let _one_at_a_time = self.changing.lock().expect("overlay");
        let old = self.view();
        if old.changes.values().all(|(held, _)| *held > seq) {
            return;
        }
        let mut changes = old.changes.clone();
        changes.retain(|_, (held, _)| *held > seq);
        self.publish(View::whole(changes, &old.segments));
    }

    /// Indexes the overlay's agents again as one segment when they are in
    /// more; says whether it did.
    ///
    /// Why: a search reads every segment (its own tantivy search, filters
    /// and counts), and changes arriving steadily leave O(log n) of them:
    /// at 10k registrations over HTTP, searches were about a fifth slower
    /// than over the same agents in one. Merging all at every change would
    /// index each agent again each time, so it waits until the changes
    /// pause (`--overlay-settle-ms`, [`Overlay::settle_when_quiet`]).
    pub fn settle(&self) -> bool {
        let _one_at_a_time = self.changing.lock().expect("overlay");
        let old = self.view();
        if old.segments.len() < 2 {
            return false;
        }
        self.publish(View::whole(old.changes.clone(), &old.segments));
        true
    }

    /// Settles the overlay ([`Overlay::settle`], on a blocking thread) each
    /// time changes have stopped for `quiet`; runs until dropped.
    pub async fn settle_when_quiet(self: Arc<Self>, quiet: std::time::Duration) {
        loop {
            self.changed.notified().await;
            // Until a whole `quiet` passes with no change.
            while tokio::time::timeout(quiet, self.changed.notified()).await.is_ok() {}
            let overlay = self.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || overlay.settle()).await {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }

    /// Makes `view` the one requests see; forgets embeddings of agents it
    /// no longer holds.
    fn publish(&self, view: View) {
        self.embedded
            .lock()
            .expect("overlay")
            .retain(|uaid, _| matches!(view.changes.get(uaid.as_str()), Some((_, Some(_)))));
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

/// The agents of `segments` still current in `changes`: what merging
/// them keeps.
fn current(changes: &HashMap<Arc<str>, (i64, Option<Place>)>, segments: &[&Arc<Segment>]) -> Vec<(i64, Agent)> {
    let mut kept = Vec::new();
    for segment in segments {
        for (agent, seq) in segment.agents().iter().zip(&segment.seqs) {
            if changes.get(agent.uaid.as_str()).is_some_and(|(held, _)| held == seq) {
                kept.push((*seq, agent.clone()));
            }
        }
    }
    kept
}

/// Points each change's entry at its agent in segments `from` on.
fn place(changes: &mut HashMap<Arc<str>, (i64, Option<Place>)>, segments: &[Arc<Segment>], from: usize) {
    for (k, segment) in segments.iter().enumerate().skip(from) {
        for (p, (agent, seq)) in segment.agents().iter().zip(&segment.seqs).enumerate() {
            if let Some((held, at)) = changes.get_mut(agent.uaid.as_str()) {
                if held == seq {
                    *at = Some((k as u32, p as u32));
                }
            }
        }
    }
}

/// The overlay as one build sees it: the build's agents it replaced or
/// deleted, and in each segment the agents the build already holds or a
/// later change replaced.
pub struct Live<'a> {
    view: &'a View,
    /// Build agents the overlay replaces or deletes.
    pub base_excluded: Arc<Bits>,
    excluded: Arc<Vec<Bits>>,
}

impl<'a> Live<'a> {
    /// Each segment with the agents to leave out of it.
    pub fn segments(&self) -> impl Iterator<Item = (&'a AgentIndex, &Bits)> + '_ {
        self.view.segments.iter().map(|s| &s.index).zip(self.excluded.iter())
    }

    /// The build and the segments as parts of one search (the build is
    /// part 0, segment `k` part `k + 1`).
    pub fn parts<'b>(&'b self, build: &'b Agents) -> Vec<Part<'b>> {
        let base = Part { index: &build.index, excluded: &self.base_excluded, reference: None };
        let live =
            self.segments().map(|(index, excluded)| Part { index, excluded, reference: Some(&build.index.text) });
        std::iter::once(base).chain(live).collect()
    }

    /// The agents of the overlay as the build sees them.
    pub fn agents(&self) -> impl Iterator<Item = &'a Agent> + '_ {
        self.view.segments.iter().zip(self.excluded.iter()).flat_map(|(segment, excluded)| {
            segment.agents().iter().enumerate().filter(|(i, _)| !excluded.contains(*i)).map(|(_, agent)| agent)
        })
    }
}

impl View {
    fn new(changes: HashMap<Arc<str>, (i64, Option<Place>)>, segments: Vec<Arc<Segment>>) -> View {
        let newest = changes.values().map(|(seq, _)| *seq).max().unwrap_or(0);
        View { changes, newest, segments, excluded: Mutex::new(None) }
    }

    /// `changes`, with the agents of `segments` still current in them
    /// indexed again as one segment.
    fn whole(mut changes: HashMap<Arc<str>, (i64, Option<Place>)>, segments: &[Arc<Segment>]) -> View {
        let all: Vec<&Arc<Segment>> = segments.iter().collect();
        let kept = current(&changes, &all);
        let segments: Vec<Arc<Segment>> = if kept.is_empty() { Vec::new() } else { vec![Arc::new(Segment::new(kept))] };
        place(&mut changes, &segments, 0);
        View::new(changes, segments)
    }

    fn agent(&self, (k, p): Place) -> &Agent {
        &self.segments[k as usize].agents()[p as usize]
    }

    /// `uaid` as of now, for a build whose journal point is `seq`.
    pub fn find(&self, uaid: &str, seq: i64) -> Found<'_> {
        match self.changes.get(uaid) {
            Some((held, Some(at))) if *held > seq => Found::Live(self.agent(*at)),
            Some((held, None)) if *held > seq => Found::Deleted,
            _ => Found::Build,
        }
    }

    /// The live agents newer than the build, in no order.
    pub fn agents_after(&self, seq: i64) -> impl Iterator<Item = &Agent> {
        self.changes.values().filter(move |(held, _)| *held > seq).filter_map(|(_, at)| at.map(|at| self.agent(at)))
    }

    /// Runs `query` over `build` and the overlay as one; `None` when the
    /// overlay changes nothing for this build (search the build alone).
    pub fn search(&self, build: &Agents, query: &SearchQuery) -> Option<Merged> {
        let live = self.live(build)?;
        Some(query::merge(&live.parts(build), query))
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

    /// The search hit of a [`Live::parts`] search.
    pub fn hit<'b>(&'b self, build: &'b Agents, hit: Hit) -> anyhow::Result<Cow<'b, [u8]>> {
        match hit.part {
            0 => build.hit(hit.at),
            k => self.segments[k - 1].index.records.json(hit.at),
        }
    }

    /// Which build agents the overlay replaces or deletes, and which
    /// segment agents the build already holds or a later change replaced:
    /// computed once per build.
    fn exclusions(&self, build: &Agents) -> (Arc<Bits>, Arc<Vec<Bits>>) {
        let key = (std::ptr::from_ref(build) as usize, build.journal_seq);
        let mut cached = self.excluded.lock().expect("overlay");
        if let Some(e) = cached.as_ref().filter(|e| e.build == key) {
            return (e.base.clone(), e.segments.clone());
        }
        let seq = build.journal_seq;
        let base = Bits::from_positions(
            build.index.len(),
            self.changes.iter().filter(|(_, (held, _))| *held > seq).filter_map(|(uaid, _)| build.position(uaid)),
        );
        let segments: Vec<Bits> = self
            .segments
            .iter()
            .enumerate()
            .map(|(k, segment)| {
                let stale = |(p, agent): (usize, &Agent)| {
                    let now = self.changes.get(agent.uaid.as_str());
                    segment.seqs[p] <= seq || now.is_none_or(|(_, at)| *at != Some((k as u32, p as u32)))
                };
                Bits::from_positions(
                    segment.len(),
                    segment.agents().iter().enumerate().filter(|e| stale(*e)).map(|(p, _)| p),
                )
            })
            .collect();
        let (base, segments) = (Arc::new(base), Arc::new(segments));
        *cached = Some(Exclusions { build: key, base: base.clone(), segments: segments.clone() });
        (base, segments)
    }

    /// `{hits, total, page, limit[, aggregations]}` of a merged page.
    pub fn page_body(&self, build: &Agents, page: &Merged) -> anyhow::Result<Vec<u8>> {
        let hits = page.hits.iter().map(|hit| self.hit(build, *hit)).collect::<anyhow::Result<Vec<_>>>()?;
        super::agents::page_body(&hits, page.total, page.page, page.limit, page.aggregations.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use almanac::broker::query::search;
    use almanac::broker::store::Stored;

    /// A build of the checked-in agents, journal point 0.
    fn build() -> Agents {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/broker");
        let sources = almanac::broker::load(&dir).unwrap();
        let stored = Stored {
            catalog: sources.catalog,
            journal_seq: 0,
            agents: sources.agents.len(),
            fingerprint: String::new(),
        };
        let feedback = super::super::agents::Feedback::held(sources.feedback);
        Agents::new(stored, AgentIndex::build(sources.agents), feedback, None).unwrap()
    }

    fn built(build: &Agents, i: usize) -> Agent {
        build.index.records.agent(i % build.index.len()).unwrap().into_owned()
    }

    /// Changes handed in by many requests at once: each is visible when
    /// its own call returns, the latest change of a UAID wins whichever
    /// call applied it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn changes_applied_together_are_visible_on_return() {
        let overlay = Arc::new(Overlay::default());
        let fresh = almanac::broker::generate::agents(96, 5);
        let calls: Vec<_> = fresh
            .iter()
            .enumerate()
            .map(|(i, agent)| {
                let overlay = overlay.clone();
                let mut agent = agent.clone();
                // The second half changes the first half's agents again.
                let seq = i as i64 + 1;
                if i >= 48 {
                    agent = fresh[i - 48].clone();
                    agent.name = format!("Renamed {i}");
                }
                tokio::spawn(async move {
                    let uaid = agent.uaid.to_string();
                    overlay.clone().apply_together(vec![(seq, uaid.clone(), Some(agent.clone()))]).await;
                    // Visible now; a later change of the same agent may
                    // already have replaced it, never an earlier one.
                    match overlay.view().find(&uaid, 0) {
                        Found::Live(found) => assert!(found == &agent || found.name.starts_with("Renamed")),
                        _ => panic!("{uaid} is not visible after its call returned"),
                    }
                })
            })
            .collect();
        for call in calls {
            call.await.unwrap();
        }
        // And one at a time, each alone in its batch.
        let more = almanac::broker::generate::agents(100, 6);
        for (i, agent) in more.iter().enumerate().skip(96) {
            let uaid = agent.uaid.to_string();
            overlay.clone().apply_together(vec![(i as i64 + 1, uaid.clone(), Some(agent.clone()))]).await;
            assert!(matches!(overlay.view().find(&uaid, 0), Found::Live(found) if found == agent), "{uaid}");
        }
        let view = overlay.view();
        for (i, agent) in fresh.iter().enumerate().take(48) {
            match view.find(agent.uaid.as_str(), 0) {
                Found::Live(found) => assert_eq!(found.name, format!("Renamed {}", i + 48)),
                _ => panic!("{} is missing", agent.uaid),
            }
        }
        assert_eq!(view.newest, 100);
    }

    /// Once changes pause, the overlay's segments become one; while they
    /// keep coming, they stay as the changes left them.
    #[tokio::test]
    async fn segments_become_one_when_changes_pause() {
        let overlay = Arc::new(Overlay::default());
        let quiet = std::time::Duration::from_millis(200);
        let settling = tokio::spawn(overlay.clone().settle_when_quiet(quiet));
        let fresh = almanac::broker::generate::agents(12, 4);
        let change = |(i, agent): (usize, &Agent)| (i as i64 + 1, agent.uaid.to_string(), Some(agent.clone()));
        // Ten together, then one: a segment of ten and one of one.
        overlay.apply(fresh.iter().enumerate().take(10).map(change).collect());
        overlay.apply(vec![change((10, &fresh[10]))]);
        assert_eq!(overlay.view().segments.len(), 2, "not yet: the changes have not paused");
        let started = std::time::Instant::now();
        while overlay.view().segments.len() > 1 {
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "never settled");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(started.elapsed() >= quiet, "settled before the changes paused");
        let view = overlay.view();
        assert_eq!(view.segments[0].len(), 11);
        assert!(fresh
            .iter()
            .take(11)
            .all(|a| matches!(view.find(a.uaid.as_str(), 0), Found::Live(found) if found == a)));
        settling.abort();
    }

    /// Changes one at a time (registrations, updates of built and live
    /// agents, deletions of both): after each, lookups and searches are
    /// those of one index holding the build with the changes applied, and
    /// the segments stay few.
    #[test]
    fn many_single_changes_read_as_one_index() {
        let build = build();
        let overlay = Overlay::default();
        let fresh = almanac::broker::generate::agents(400, 9);
        let mut truth: HashMap<String, Option<Agent>> = HashMap::new();
        for seq in 1..=600i64 {
            let n = seq as usize;
            let (uaid, agent) = match n % 6 {
                // An update of a built agent.
                0 => {
                    let mut agent = built(&build, n * 7);
                    agent.name = format!("Changed {n}");
                    (agent.uaid.to_string(), Some(agent))
                }
                // A deletion: of a built agent, or of a live one.
                1 if n % 12 == 1 => (built(&build, n * 13).uaid.to_string(), None),
                1 => (fresh[(n / 3) % 200].uaid.to_string(), None),
                // An update of a live agent.
                2 => {
                    let mut agent = fresh[(n / 2) % 200].clone();
                    agent.trust_score = (n % 100) as f64;
                    (agent.uaid.to_string(), Some(agent))
                }
                // A registration.
                _ => {
                    let agent = fresh[n % fresh.len()].clone();
                    (agent.uaid.to_string(), Some(agent))
                }
            };
            truth.insert(uaid.clone(), agent.clone());
            overlay.apply(vec![(seq, uaid, agent)]);
            let view = overlay.view();
            assert!(view.segments.len() <= 2 * (n.ilog2() as usize + 1), "{} segments after {n}", view.segments.len());
            if !n.is_multiple_of(50) {
                continue;
            }
            reads_as_one_index(&build, &view, &truth, n);
            // Settled, the same agents in one segment read the same.
            if n.is_multiple_of(100) {
                let settled = overlay.settle();
                assert_eq!(settled, view.segments.len() > 1, "after {n}");
                let view = overlay.view();
                assert!(view.segments.len() <= 1, "{} segments once settled", view.segments.len());
                reads_as_one_index(&build, &view, &truth, n);
            }
        }
        // A build holding the first 300 changes: they leave the overlay.
        overlay.prune(300);
        let view = overlay.view();
        assert!(view.changes.values().all(|(seq, _)| *seq > 300));
        assert!(view.segments.len() <= 1);
    }

    /// Lookups and searches of `view` over the test's build are those of
    /// one index holding the build with the changes `truth` applied.
    fn reads_as_one_index(build: &Agents, view: &View, truth: &HashMap<String, Option<Agent>>, n: usize) {
        let queries = ["", "sortBy=name&page=3&limit=7", "sortBy=trust-score&limit=50", "registries=hashgraph-online"];
        for (uaid, agent) in truth {
            match (view.find(uaid, 0), agent) {
                (Found::Live(found), Some(agent)) => assert_eq!(found, agent),
                (Found::Deleted, None) => {}
                _ => panic!("{uaid} after {n}"),
            }
        }
        let mut whole: Vec<Agent> =
            (0..build.index.len()).map(|i| built(build, i)).filter(|a| !truth.contains_key(a.uaid.as_str())).collect();
        whole.extend(truth.values().flatten().cloned());
        let whole = AgentIndex::build(whole);
        for raw in queries {
            let query = SearchQuery::parse(raw).unwrap();
            let merged = view.search(build, &query).unwrap();
            let expected = search(&whole, &query);
            let ids: Vec<String> = merged
                .hits
                .iter()
                .map(|hit| match hit.part {
                    0 => build.index.records.keys(hit.at).id.to_string(),
                    k => view.segments[k - 1].agents()[hit.at].id.clone(),
                })
                .collect();
            let expected_ids: Vec<String> =
                expected.hits.iter().map(|i| whole.records.keys(*i).id.to_string()).collect();
            assert_eq!((ids, merged.total), (expected_ids, expected.total), "{raw} after {n}");
        }
    }
}
