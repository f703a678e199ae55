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
//! the two ([`search::query::merge`]): totals, pages, sorts and
//! aggregations are those of one index holding both. (Overlay agents are
//! scored for relevance with the build's term statistics and their own;
//! the build's agents with the build's alone, until the next build.)
//!
//! **Cost.** The overlay's agents are indexed in log-structured segments
//! ([`search::segments`]): a change indexes only its own agents, and a
//! search merges a handful of small indexes with the build's. Requests'
//! changes that arrive while a segment is being indexed wait and go into
//! the next one together ([`Writer`]): a segment's fixed cost is paid once
//! per batch, not once per registration.
//!
//! **One writer.** Every change after the start is made on one thread
//! of its own ([`Writer`]): applying, pruning after a build swap, and
//! settling the segments into one once changes pause. Changes are made
//! one at a time anyway, each view from the last; on one thread,
//! indexing reuses one thread's memory. Run on the blocking pool, each
//! registration held a thread waiting its turn (20 at once under 32
//! clients), the indexing's memory was spread over their heaps (RSS 650
//! to 1,200 MiB at a million agents, 10k registrations), and when they
//! ended together, 10 s idle later, giving back 500 MiB stalled every
//! search for 10 to 25 ms.

use std::borrow::Cow;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use broker_model::Agent;
use search::bits::Bits;
use search::query::{self, AgentIndex, Hit, Merged, Part, SearchQuery};
use search::segments::{Change, Found, Segments};

use super::agents::Agents;

/// The overlay, shared by every request.
#[derive(Default)]
pub struct Overlay {
    view: RwLock<Arc<View>>,
    /// Serialises changes (each makes the next view from the last).
    changing: Mutex<()>,
    /// Embeddings of live agents for hybrid search, by UAID: the key of
    /// the text embedded and its vector. Made on the first hybrid search
    /// that needs them; kept while the agent is in the overlay.
    embedded: Mutex<HashMap<String, Embedded>>,
}

/// A live agent's embedding: the key of the text embedded, and its vector.
type Embedded = (String, Arc<[f32]>);

/// One state of the overlay.
pub struct View {
    /// The changes and their segments.
    pub segments: Segments,
    /// The exclusions of the last build searched with this view.
    excluded: Mutex<Option<Exclusions>>,
    /// Where the build holds the changed agents, shared by the views made
    /// from this one.
    positions: Arc<Mutex<Positions>>,
}

/// Where one build (by its tables' fingerprint) holds each changed UAID,
/// remembered across views: a new view's exclusions then look up only
/// the UAIDs changed since the last search. Why: a lookup is a
/// positioned read of the build's keys, and with 10k agents in the
/// overlay looking them all up again took the first search after each
/// change 20 to 30 ms.
#[derive(Default)]
struct Positions {
    fingerprint: String,
    at: HashMap<Arc<str>, Option<usize>>,
}

struct Exclusions {
    /// Which build: its index's address and journal point.
    build: (usize, i64),
    base: Arc<Bits>,
    segments: Arc<Vec<Bits>>,
}

impl Default for View {
    fn default() -> View {
        View::new(Segments::default(), Arc::default())
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

    /// [`Overlay::apply`] once `changing` is held.
    fn apply_held(&self, changes: Vec<Change>) {
        let old = self.view();
        if let Some(next) = old.segments.apply(changes) {
            self.publish(View::new(next, old.positions.clone()));
        }
    }

    /// Drops the changes a build holds (its journal point is `seq`); what
    /// stays is indexed again as one segment.
    pub fn prune(&self, seq: i64) {
        let _one_at_a_time = self.changing.lock().expect("overlay");
        let old = self.view();
        if let Some(next) = old.segments.prune(seq) {
            self.publish(View::new(next, old.positions.clone()));
        }
    }

    /// Indexes the overlay's agents again as one segment when they are in
    /// more; says whether it did.
    ///
    /// Why: a search reads every segment (its own tantivy search, filters
    /// and counts), and changes arriving steadily leave O(log n) of them:
    /// at 10k registrations over HTTP, searches were about a fifth slower
    /// than over the same agents in one. Merging all at every change would
    /// index each agent again each time, so it waits until the changes
    /// pause (`--overlay-settle-ms`, [`Writer`]).
    pub fn settle(&self) -> bool {
        let _one_at_a_time = self.changing.lock().expect("overlay");
        let old = self.view();
        match old.segments.settled() {
            Some(next) => {
                self.publish(View::new(next, old.positions.clone()));
                true
            }
            None => false,
        }
    }

    /// Makes `view` the one requests see; forgets embeddings of agents it
    /// no longer holds.
    fn publish(&self, view: View) {
        self.embedded.lock().expect("overlay").retain(|uaid, _| view.segments.holds_agent(uaid));
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

/// The overlay's one writer: a thread that applies the changes requests
/// hand in, prunes what a new build holds, and settles the segments once
/// changes have paused for `quiet` (see the module's comment). Dropping
/// it lets the thread finish what it was handed and stop.
pub struct Writer {
    orders: Sender<Order>,
}

enum Order {
    /// Changes to apply, and who to tell once they are visible.
    Apply(Vec<Change>, tokio::sync::oneshot::Sender<()>),
    /// Drop the changes a build holds through this journal point.
    Prune(i64),
}

/// The writer's thread is gone (it panicked: a bug): the change is stored
/// but not shown until the next build or restart.
#[derive(Debug)]
pub struct Lost;

impl Writer {
    /// Starts the writer of `overlay`, which settles once changes have
    /// paused for `quiet`.
    pub fn start(overlay: Arc<Overlay>, quiet: Duration) -> std::io::Result<Writer> {
        let (orders, received) = channel();
        std::thread::Builder::new().name("overlay".to_string()).spawn(move || write(&overlay, &received, quiet))?;
        Ok(Writer { orders })
    }

    /// Applies `changes` together with those other requests hand in
    /// meanwhile; returns once they are visible.
    ///
    /// Why together: indexing a segment has a fixed cost (tantivy's writer
    /// sets up its tables whatever it indexes), so one segment for the
    /// changes of 32 requests costs little more than one for a single
    /// change.
    pub async fn apply(&self, changes: Vec<Change>) -> Result<(), Lost> {
        let (applied, visible) = tokio::sync::oneshot::channel();
        self.send(Order::Apply(changes, applied))?;
        visible.await.map_err(|_| Lost)
    }

    /// Drops the changes a build with journal point `seq` holds; what
    /// stays is indexed again as one segment. Returns at once.
    pub fn prune(&self, seq: i64) -> Result<(), Lost> {
        self.send(Order::Prune(seq))
    }

    fn send(&self, order: Order) -> Result<(), Lost> {
        self.orders.send(order).map_err(|_| Lost)
    }
}

/// The writer's loop: what waits taken as one batch (the changes applied
/// together, in order with the prunes between them); when the overlay is
/// in several segments, settled once no change has come for `quiet` (a
/// prune is not a change: the cleaner sends one every few seconds).
fn write(overlay: &Overlay, orders: &Receiver<Order>, quiet: Duration) {
    let mut last_change = Instant::now();
    loop {
        let first = if overlay.view().segments.segment_count() > 1 {
            match orders.recv_timeout((last_change + quiet).saturating_duration_since(Instant::now())) {
                Ok(order) => order,
                Err(RecvTimeoutError::Timeout) => {
                    overlay.settle();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        } else {
            match orders.recv() {
                Ok(order) => order,
                Err(_) => return,
            }
        };
        let batch: Vec<Order> = std::iter::once(first).chain(orders.try_iter()).collect();
        let changed = batch.iter().any(|order| matches!(order, Order::Apply(..)));
        // A panic here is a bug; the batch's requests learn of it (their
        // answers dropped) and the thread goes on with the next.
        if catch_unwind(AssertUnwindSafe(|| carry_out(overlay, batch))).is_err() {
            tracing::error!("the live overlay failed to apply changes; they show from the next build");
        }
        if changed {
            last_change = Instant::now();
        }
    }
}

/// One batch of orders, in order: consecutive changes as one apply.
fn carry_out(overlay: &Overlay, batch: Vec<Order>) {
    let mut changes = Vec::new();
    let mut applied = Vec::new();
    for order in batch {
        match order {
            Order::Apply(more, answer) => {
                changes.extend(more);
                applied.push(answer);
            }
            Order::Prune(seq) => {
                overlay.apply(std::mem::take(&mut changes));
                overlay.prune(seq);
            }
        }
    }
    overlay.apply(changes);
    // The asker may have gone (its connection closed): nothing to do.
    for answer in applied {
        let _ = answer.send(());
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
        self.view.segments.each().map(|(index, _)| index).zip(self.excluded.iter())
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
        self.view.segments.each().zip(self.excluded.iter()).flat_map(|((_, agents), excluded)| {
            agents.iter().enumerate().filter(|(i, _)| !excluded.contains(*i)).map(|(_, agent)| agent)
        })
    }
}

impl View {
    fn new(segments: Segments, positions: Arc<Mutex<Positions>>) -> View {
        View { segments, excluded: Mutex::new(None), positions }
    }

    /// `uaid` as of now over `build`: the overlay's agent, else the
    /// build's; `None` when deleted or not indexed; an error when the
    /// build's record of it is damaged.
    pub fn current<'b>(&'b self, build: &'b Agents, uaid: &str) -> anyhow::Result<Option<Cow<'b, Agent>>> {
        match self.segments.find(uaid, build.journal_seq) {
            Found::Live(agent) => Ok(Some(Cow::Borrowed(agent))),
            Found::Deleted => Ok(None),
            Found::Build => build.agent(uaid),
        }
    }

    /// The live agents newer than the build, in no order.
    pub fn agents_after(&self, seq: i64) -> impl Iterator<Item = &Agent> {
        self.segments.agents_after(seq)
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
        if self.segments.newest() <= build.journal_seq {
            return None;
        }
        let (base_excluded, excluded) = self.exclusions(build);
        Some(Live { view: self, base_excluded, excluded })
    }

    /// The search hit of a [`Live::parts`] search.
    pub fn hit<'b>(&'b self, build: &'b Agents, hit: Hit) -> anyhow::Result<Cow<'b, [u8]>> {
        match hit.part {
            0 => build.hit(hit.at),
            k => self.segments.segment_index(k - 1).records.json(hit.at),
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
        let base = {
            let mut known = self.positions.lock().expect("overlay");
            if known.fingerprint != build.fingerprint {
                *known = Positions { fingerprint: build.fingerprint.clone(), at: HashMap::new() };
            }
            // UAIDs no longer changed (pruned) are forgotten now and then.
            if known.at.len() > 2 * self.segments.change_count() + 1024 {
                known.at.retain(|uaid, _| self.segments.is_changed(uaid));
            }
            let changed = self.segments.changed_after(seq);
            let at = changed.filter_map(|uaid| *known.at.entry(uaid.clone()).or_insert_with(|| build.position(uaid)));
            Bits::from_positions(build.index.len(), at)
        };
        let segments = self.segments.stale(seq);
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
    use broker_site::store::Stored;
    use search::query::search;

    /// A build of 300 agents, journal point 0.
    fn build() -> Agents {
        build_in_order(false)
    }

    /// 300 generated agents of the datasets' catalog as a build, in their
    /// order or reversed (another build: its own fingerprint, every agent
    /// at another position).
    fn build_in_order(reversed: bool) -> Agents {
        let agents = broker_model::generate::agents(300, 7);
        let feedback = broker_model::generate::feedback(&agents, 7);
        let catalog = broker_model::generate::checked_in_catalog();
        let sources = broker_model::Sources { agents, catalog, feedback, journal_seq: 0 };
        sources.validate().unwrap();
        let broker_model::Sources { mut agents, catalog, feedback, .. } = sources;
        if reversed {
            agents.reverse();
        }
        let stored = Stored {
            catalog,
            journal_seq: 0,
            agents: agents.len(),
            fingerprint: if reversed { "reversed" } else { "" }.to_string(),
        };
        let feedback = super::super::agents::Feedback::held(feedback);
        Agents::new(stored, AgentIndex::build(agents), feedback, None).unwrap()
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
        let writer = Arc::new(Writer::start(overlay.clone(), Duration::from_secs(60)).unwrap());
        let fresh = broker_model::generate::agents(96, 5);
        let calls: Vec<_> = fresh
            .iter()
            .enumerate()
            .map(|(i, agent)| {
                let (overlay, writer) = (overlay.clone(), writer.clone());
                let mut agent = agent.clone();
                // The second half changes the first half's agents again.
                let seq = i as i64 + 1;
                if i >= 48 {
                    agent = fresh[i - 48].clone();
                    agent.name = format!("Renamed {i}");
                }
                tokio::spawn(async move {
                    let uaid = agent.uaid.to_string();
                    writer.apply(vec![(seq, uaid.clone(), Some(agent.clone()))]).await.unwrap();
                    // Visible now; a later change of the same agent may
                    // already have replaced it, never an earlier one.
                    match overlay.view().segments.find(&uaid, 0) {
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
        let more = broker_model::generate::agents(100, 6);
        for (i, agent) in more.iter().enumerate().skip(96) {
            let uaid = agent.uaid.to_string();
            writer.apply(vec![(i as i64 + 1, uaid.clone(), Some(agent.clone()))]).await.unwrap();
            assert!(matches!(overlay.view().segments.find(&uaid, 0), Found::Live(found) if found == agent), "{uaid}");
        }
        let view = overlay.view();
        for (i, agent) in fresh.iter().enumerate().take(48) {
            match view.segments.find(agent.uaid.as_str(), 0) {
                Found::Live(found) => assert_eq!(found.name, format!("Renamed {}", i + 48)),
                _ => panic!("{} is missing", agent.uaid),
            }
        }
        assert_eq!(view.segments.newest(), 100);
    }

    /// Once changes pause, the overlay's segments become one; while they
    /// keep coming, they stay as the changes left them. Prunes are not
    /// changes: sent all along, they do not put settling off. A prune
    /// drops what a build holds.
    #[tokio::test]
    async fn segments_become_one_when_changes_pause() {
        let overlay = Arc::new(Overlay::default());
        let quiet = Duration::from_millis(200);
        let writer = Arc::new(Writer::start(overlay.clone(), quiet).unwrap());
        let fresh = broker_model::generate::agents(12, 4);
        let change = |(i, agent): (usize, &Agent)| (i as i64 + 1, agent.uaid.to_string(), Some(agent.clone()));
        // Ten together, then one: a segment of ten and one of one.
        writer.apply(fresh.iter().enumerate().take(10).map(change).collect()).await.unwrap();
        let started = Instant::now();
        writer.apply(vec![change((10, &fresh[10]))]).await.unwrap();
        assert_eq!(overlay.view().segments.segment_count(), 2, "not yet: the changes have not paused");
        let pruning = tokio::spawn({
            let writer = writer.clone();
            async move {
                loop {
                    writer.prune(0).unwrap();
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
        while overlay.view().segments.segment_count() > 1 {
            assert!(started.elapsed() < Duration::from_secs(10), "never settled");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(started.elapsed() >= quiet, "settled before the changes paused");
        pruning.abort();
        let view = overlay.view();
        assert_eq!(view.segments.sizes()[0], 11);
        assert!(fresh
            .iter()
            .take(11)
            .all(|a| matches!(view.segments.find(a.uaid.as_str(), 0), Found::Live(found) if found == a)));
        // A build holding the first five changes: the other six stay.
        writer.prune(5).unwrap();
        while overlay.view().segments.change_count() == 11 {
            assert!(started.elapsed() < Duration::from_secs(10), "never pruned");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let view = overlay.view();
        assert_eq!(view.segments.sizes(), [6]);
        for (i, agent) in fresh.iter().take(11).enumerate() {
            let found = view.segments.find(agent.uaid.as_str(), 0);
            assert_eq!(matches!(found, Found::Build), i < 5, "{i}");
        }
    }

    /// Changes one at a time (registrations, updates of built and live
    /// agents, deletions of both): after each, lookups and searches are
    /// those of one index holding the build with the changes applied, and
    /// the segments stay few. Searched with another build now and then
    /// (the same agents in reverse order), the overlay hides that build's
    /// copies, not those the first build holds at the same positions.
    #[test]
    fn many_single_changes_read_as_one_index() {
        let build = build();
        let reversed = build_in_order(true);
        let overlay = Overlay::default();
        let fresh = broker_model::generate::agents(400, 9);
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
            assert!(
                view.segments.segment_count() <= 2 * (n.ilog2() as usize + 1),
                "{} segments after {n}",
                view.segments.segment_count()
            );
            if !n.is_multiple_of(50) {
                continue;
            }
            reads_as_one_index(&build, &view, &truth, n);
            if n.is_multiple_of(150) {
                reads_as_one_index(&reversed, &view, &truth, n);
            }
            // Settled, the same agents in one segment read the same.
            if n.is_multiple_of(100) {
                let settled = overlay.settle();
                assert_eq!(settled, view.segments.segment_count() > 1, "after {n}");
                let view = overlay.view();
                assert!(view.segments.segment_count() <= 1, "{} segments once settled", view.segments.segment_count());
                reads_as_one_index(&build, &view, &truth, n);
            }
        }
        // A build holding the first 300 changes: they leave the overlay.
        overlay.prune(300);
        let view = overlay.view();
        assert_eq!(view.segments.changed_after(300).count(), view.segments.change_count());
        assert!(view.segments.segment_count() <= 1);
    }

    /// Lookups and searches of `view` over the test's build are those of
    /// one index holding the build with the changes `truth` applied.
    fn reads_as_one_index(build: &Agents, view: &View, truth: &HashMap<String, Option<Agent>>, n: usize) {
        let queries = ["", "sortBy=name&page=3&limit=7", "sortBy=trust-score&limit=50", "registries=hashgraph-online"];
        for (uaid, agent) in truth {
            match (view.segments.find(uaid, 0), agent) {
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
            let query = crate::broker::search_parameters::parse(raw).unwrap();
            let merged = view.search(build, &query).unwrap();
            let expected = search(&whole, &query);
            let ids: Vec<String> = merged
                .hits
                .iter()
                .map(|hit| match hit.part {
                    0 => build.index.records.keys(hit.at).id.to_string(),
                    k => view.segments.each().nth(k - 1).unwrap().1[hit.at].id.clone(),
                })
                .collect();
            let expected_ids: Vec<String> =
                expected.hits.iter().map(|i| whole.records.keys(*i).id.to_string()).collect();
            assert_eq!((ids, merged.total), (expected_ids, expected.total), "{raw} after {n}");
        }
    }
}
