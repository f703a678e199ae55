//! Changed agents indexed in log-structured segments: the api's live
//! overlay is a [`Segments`], one immutable state after another.
//!
//! **Cost.** A change indexes only its own agents as a new segment, and a
//! segment no larger than twice the next one's is merged with it (dropping
//! agents changed since). There are O(log n) segments and each agent is
//! indexed O(log n) times, so a change costs little whatever the state
//! holds, and a search merges a handful of small indexes with the build's
//! ([`crate::query::merge`]). [`Segments::settled`] indexes them again as
//! one, which the overlay does once changes pause.
//!
//! A state holds, by UAID, the last change (its `seq`, and where its agent
//! is, or nothing when deleted); a segment's copy of an agent changed again
//! since is left out of every search ([`Segments::stale`]).

use std::collections::HashMap;
use std::sync::Arc;

use broker_model::Agent;

use crate::bits::Bits;
use crate::query::AgentIndex;

/// A change: its `seq`, the UAID, and the agent as it is now or `None`
/// when deleted.
pub type Change = (i64, String, Option<Agent>);

/// Where the agent of a change is: segment and position.
type Place = (u32, u32);

/// Some changed agents, indexed: immutable, shared by the states holding it.
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

/// What a state says of one UAID for a build.
pub enum Found<'a> {
    /// Changed since the build: the agent as it is now.
    Live(&'a Agent),
    /// Deleted since the build.
    Deleted,
    /// Not changed since the build: ask the build.
    Build,
}

/// One state of the changes. Cloning shares the segments.
#[derive(Clone, Default)]
pub struct Segments {
    /// By UAID, the last change: its `seq` and where its agent is, or
    /// `None` when it was deleted.
    changes: HashMap<Arc<str>, (i64, Option<Place>)>,
    /// The largest `seq` held (0: none): a build at or past it holds them all.
    newest: i64,
    /// Oldest first; each more than twice the size of the next, until
    /// settled into one.
    segments: Vec<Arc<Segment>>,
}

impl Segments {
    fn new(mut changes: HashMap<Arc<str>, (i64, Option<Place>)>, segments: Vec<Arc<Segment>>, from: usize) -> Segments {
        place(&mut changes, &segments, from);
        let newest = changes.values().map(|(seq, _)| *seq).max().unwrap_or(0);
        Segments { changes, newest, segments }
    }

    /// The state after `changes`, or `None` when none of them is newer than
    /// what is held for its UAID (two requests may finish out of order).
    /// Indexes only the changed agents as a new segment, then merges the
    /// last two while the older is no more than twice the newer.
    pub fn apply(&self, changes: Vec<Change>) -> Option<Segments> {
        let mut latest: HashMap<String, (i64, Option<Agent>)> = HashMap::new();
        for (seq, uaid, agent) in changes {
            let held = self.changes.get(uaid.as_str()).map(|(held, _)| *held);
            let newer = latest.get(&uaid).map_or(held, |(s, _)| Some(*s)).is_none_or(|held| held < seq);
            if newer {
                latest.insert(uaid, (seq, agent));
            }
        }
        if latest.is_empty() {
            return None;
        }
        let mut changes = self.changes.clone();
        let mut added = Vec::new();
        for (uaid, (seq, agent)) in latest {
            changes.insert(uaid.into(), (seq, None));
            added.extend(agent.map(|agent| (seq, agent)));
        }
        let mut segments = self.segments.clone();
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
        debug_assert!(segments.windows(2).all(|w| w[0].len() > 2 * w[1].len()), "each segment over twice the next");
        Some(Segments::new(changes, segments, from))
    }

    /// The state without the changes a build with journal point `seq`
    /// holds, what stays indexed again as one segment; `None` when it
    /// holds none of them.
    pub fn prune(&self, seq: i64) -> Option<Segments> {
        if self.changes.values().all(|(held, _)| *held > seq) {
            return None;
        }
        let mut changes = self.changes.clone();
        changes.retain(|_, (held, _)| *held > seq);
        Some(Segments::whole(changes, &self.segments))
    }

    /// The same changes in one segment; `None` when they are in one already.
    pub fn settled(&self) -> Option<Segments> {
        (self.segments.len() >= 2).then(|| Segments::whole(self.changes.clone(), &self.segments))
    }

    /// `changes`, with the agents of `segments` still current in them
    /// indexed again as one segment.
    fn whole(changes: HashMap<Arc<str>, (i64, Option<Place>)>, segments: &[Arc<Segment>]) -> Segments {
        let all: Vec<&Arc<Segment>> = segments.iter().collect();
        let kept = current(&changes, &all);
        let segments = if kept.is_empty() { Vec::new() } else { vec![Arc::new(Segment::new(kept))] };
        Segments::new(changes, segments, 0)
    }

    /// The largest `seq` held (0: none).
    pub fn newest(&self) -> i64 {
        self.newest
    }

    /// How many UAIDs have a change held.
    pub fn change_count(&self) -> usize {
        self.changes.len()
    }

    /// How many segments there are.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The size of each segment, oldest first.
    pub fn sizes(&self) -> Vec<usize> {
        self.segments.iter().map(|s| s.len()).collect()
    }

    /// Whether `uaid` has a change held.
    pub fn is_changed(&self, uaid: &str) -> bool {
        self.changes.contains_key(uaid)
    }

    /// Whether `uaid`'s last change left an agent (not a deletion).
    pub fn holds_agent(&self, uaid: &str) -> bool {
        matches!(self.changes.get(uaid), Some((_, Some(_))))
    }

    /// `uaid` as of now, for a build whose journal point is `seq`.
    pub fn find(&self, uaid: &str, seq: i64) -> Found<'_> {
        match self.changes.get(uaid) {
            Some((held, Some(at))) if *held > seq => Found::Live(self.agent(*at)),
            Some((held, None)) if *held > seq => Found::Deleted,
            _ => Found::Build,
        }
    }

    fn agent(&self, (k, p): Place) -> &Agent {
        &self.segments[k as usize].agents()[p as usize]
    }

    /// The live agents newer than a build with journal point `seq`, in no
    /// order.
    pub fn agents_after(&self, seq: i64) -> impl Iterator<Item = &Agent> {
        self.changes.values().filter(move |(held, _)| *held > seq).filter_map(|(_, at)| at.map(|at| self.agent(at)))
    }

    /// The UAIDs changed (or deleted) after a build with journal point `seq`.
    pub fn changed_after(&self, seq: i64) -> impl Iterator<Item = &Arc<str>> {
        self.changes.iter().filter(move |(_, (held, _))| *held > seq).map(|(uaid, _)| uaid)
    }

    /// Each segment's index and agents, oldest first.
    pub fn each(&self) -> impl Iterator<Item = (&AgentIndex, &[Agent])> {
        self.segments.iter().map(|s| (&s.index, s.agents()))
    }

    /// Segment `k`'s index.
    pub fn segment_index(&self, k: usize) -> &AgentIndex {
        &self.segments[k].index
    }

    /// For each segment, the agents a build with journal point `seq` leaves
    /// out of it: those the build holds already, and those a later change
    /// replaced. O(agents held).
    pub fn stale(&self, seq: i64) -> Vec<Bits> {
        self.segments
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
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use broker_model::generate::agents;

    fn ids<'a>(agents: impl Iterator<Item = &'a Agent>) -> Vec<String> {
        let mut ids: Vec<String> = agents.map(|a| a.id.clone()).collect();
        ids.sort();
        ids
    }

    /// Single changes one after another: segments stay each more than twice
    /// the next (so O(log n) of them), every change is found as it was
    /// last made, and what a build holds is left out of the segments.
    #[test]
    fn single_changes_keep_few_segments_and_the_last_of_each() {
        let set = agents(120, 3);
        let mut state = Segments::default();
        let mut truth: HashMap<String, (i64, Option<Agent>)> = HashMap::new();
        for n in 1..=400i64 {
            let mut agent = set[(n as usize * 7) % set.len()].clone();
            agent.description = format!("change {n}");
            let change = if n % 11 == 0 { None } else { Some(agent.clone()) };
            truth.insert(agent.uaid.as_str().to_string(), (n, change.clone()));
            state = state.apply(vec![(n, agent.uaid.as_str().to_string(), change)]).expect("a newer change");
            let sizes = state.sizes();
            assert!(sizes.windows(2).all(|w| w[0] > 2 * w[1]), "{sizes:?} after {n}");
            assert!(sizes.len() <= (n as usize).ilog2() as usize + 2, "{sizes:?} after {n}");
        }
        assert_eq!(state.newest(), 400);
        assert_eq!(state.change_count(), truth.len());
        for (uaid, (seq, agent)) in &truth {
            match (state.find(uaid, 0), agent) {
                (Found::Live(found), Some(agent)) => assert_eq!(found, agent),
                (Found::Deleted, None) => {}
                _ => panic!("{uaid} at {seq}"),
            }
            assert!(matches!(state.find(uaid, 400), Found::Build), "a build through 400 holds {uaid}");
        }
        // Searched for a build through 300: each segment keeps exactly the
        // agents changed after it, each once.
        let kept: Vec<&Agent> = state
            .each()
            .zip(state.stale(300))
            .flat_map(|((_, agents), stale)| agents.iter().enumerate().filter(move |(p, _)| !stale.contains(*p)))
            .map(|(_, agent)| agent)
            .collect();
        let expected = truth.values().filter(|(seq, _)| *seq > 300).filter_map(|(_, a)| a.as_ref());
        assert_eq!(ids(kept.into_iter()), ids(expected));
        assert_eq!(
            ids(state.agents_after(300)),
            ids(truth.values().filter(|(s, _)| *s > 300).filter_map(|(_, a)| a.as_ref()))
        );
    }

    /// A change older than the one held is ignored; pruning drops what a
    /// build holds and settling makes one segment, both keeping every
    /// change's last agent.
    #[test]
    fn old_changes_are_ignored_and_prune_and_settle_keep_the_last() {
        let set = agents(40, 5);
        let change = |seq: i64, agent: &Agent| (seq, agent.uaid.as_str().to_string(), Some(agent.clone()));
        let state = Segments::default().apply(set[..20].iter().zip(1..).map(|(a, n)| change(n, a)).collect()).unwrap();
        let state = state.apply(set[20..].iter().zip(21..).map(|(a, n)| change(n, a)).collect()).unwrap();
        assert!(state.apply(vec![change(3, &set[2])]).is_none(), "an older change than the one held");
        let mut renamed = set[2].clone();
        renamed.name = "Renamed".into();
        let state = state.apply(vec![change(50, &renamed)]).unwrap();
        assert!(matches!(state.find(set[2].uaid.as_str(), 0), Found::Live(a) if a.name == "Renamed"));

        let settled = state.settled().unwrap();
        assert_eq!(settled.sizes(), [40]);
        assert!(settled.settled().is_none(), "one segment already");
        let pruned = settled.prune(30).unwrap();
        assert!(pruned.prune(30).is_none(), "nothing more to drop");
        assert_eq!(pruned.sizes(), [11]);
        assert_eq!(pruned.change_count(), 11);
        assert!(pruned.is_changed(set[2].uaid.as_str()) && !pruned.is_changed(set[3].uaid.as_str()));
        assert!(matches!(pruned.find(set[2].uaid.as_str(), 0), Found::Live(a) if a.name == "Renamed"));
        assert_eq!(pruned.changed_after(30).count(), 11);
    }
}
