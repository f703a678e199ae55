//! A search ([`SearchQuery`], which the api reads from `GET /api/v1/search`'s
//! parameters) over an [`AgentIndex`] (text, columns, records): filter,
//! rank, sort, page, aggregate. A hit's record is read only once it is on
//! the page. No IO but those reads.
//!
//! A sorted page walks its order, or sorts the matches' places in it
//! (`Columns::places`, the orders' inverses) once the walk has read four
//! entries a match. [`merge`] searches a build's index and a live one as
//! one (totals, pages, sorts, aggregations exact): the parts' ordered lists
//! are merged on keys and columns, no record read; the part whose head
//! comes first gives, as one run, every entry before the other heads, the
//! run's end found by doubling then halving, since a comparison parses two
//! agents' keys. [`similar`]: an agent's similar agents from its capability
//! set's best (`SimilarSets`: per set some agent has, the best `8 + 1`
//! sharing any of it, made from the capability, trust and id columns when
//! the api opens a build), over every agent's columns when what is skipped
//! leaves too few.
//!
//! Decisions where the spec is silent (also in `docs/broker.md`), in the
//! terms of the parameters:
//! - with `q` and no `sortBy`, hits are ranked by relevance; an explicit
//!   `sortBy` orders them instead. Ties break by agent id;
//! - `capabilities` names codes (`4`) or labels (`code-generation`, any
//!   case, spaces or hyphens); an agent must have every one listed;
//! - `verified=true` keeps agents whose verification status is
//!   `registered`; `false`, like `online=false`, does not filter;
//! - `metadata.<path>=<pattern>`: `path` is dot-separated into nested
//!   objects, `*` matches any run of characters, values of one path are
//!   alternatives, paths must all match; arrays match when any element
//!   does; `metadata.isFree` is such a filter (`false` keeps non-free).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use serde::Serialize;

use crate::bits::Bits;
use crate::columns::{order_slot, Columns, Trust, TRUST_STEPS};
use crate::records::Records;
use crate::text::{Ranks, TextIndex};
use broker_model::Agent;

pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 500;

pub use crate::columns::SortBy;
pub use crate::text::slug;

#[derive(Clone, Debug, PartialEq)]
pub struct SearchQuery {
    pub q: Option<String>,
    pub page: usize,
    pub limit: usize,
    pub registries: Vec<String>,
    pub adapters: Vec<String>,
    pub capabilities: Vec<String>,
    pub protocols: Vec<String>,
    pub min_trust: Option<f64>,
    pub min_signals: Vec<(String, f64)>,
    pub include_aggregations: bool,
    pub verification_status: Option<String>,
    pub kind: Option<String>,
    pub verified: bool,
    pub online: bool,
    pub sort_by: Option<SortBy>,
    /// `Some(true)` ascending.
    pub ascending: Option<bool>,
    /// Path to alternatives.
    pub metadata: BTreeMap<Vec<String>, Vec<String>>,
}

impl Default for SearchQuery {
    /// Every agent, the first page of [`DEFAULT_LIMIT`], with aggregations:
    /// a request with no parameters.
    fn default() -> SearchQuery {
        SearchQuery {
            q: None,
            page: 1,
            limit: DEFAULT_LIMIT,
            registries: Vec::new(),
            adapters: Vec::new(),
            capabilities: Vec::new(),
            protocols: Vec::new(),
            min_trust: None,
            min_signals: Vec::new(),
            include_aggregations: true,
            verification_status: None,
            kind: None,
            verified: false,
            online: false,
            sort_by: None,
            ascending: None,
            metadata: BTreeMap::new(),
        }
    }
}

/// `*` matches any run of characters; everything else literally.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || !text[first.len()..].ends_with(last) || text.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// The agents of a build, held for search: their records (mapped, or
/// held for small sets), their text index and their [`Columns`].
pub struct AgentIndex {
    pub records: Records,
    pub text: TextIndex,
    pub columns: Columns,
    /// Whether the text index's documents are in the order of the agents'
    /// ids (as the generator writes and [`AgentIndex::build`] makes them):
    /// then relevance ties are pruned.
    text_in_order: bool,
    /// Whether each agent's position is its rank by id (a build's folder):
    /// then no rank is read from a table.
    ranked: bool,
    /// Each capability set's best agents, made when first asked for.
    similar: OnceLock<SimilarSets>,
}

impl AgentIndex {
    /// Whether any agent is in `registry` (matched as the filter does).
    pub fn has_registry(&self, registry: &str) -> bool {
        self.columns.registry.values.iter().any(|r| r.eq_ignore_ascii_case(registry))
    }

    /// The index of `agents`, held in memory.
    pub fn build(agents: Vec<Agent>) -> AgentIndex {
        let columns = Columns::of(&agents);
        let text = TextIndex::build(&agents, &columns.id_rank);
        AgentIndex::of_parts(Records::held(agents), text, columns).expect("an index of as many agents")
    }

    /// The index of `records` from the text index and columns made for
    /// them; all three must hold as many agents.
    pub fn of_parts(records: Records, text: TextIndex, columns: Columns) -> anyhow::Result<AgentIndex> {
        anyhow::ensure!(
            text.len() == records.len() && columns.len == records.len(),
            "the text index holds {} agents, the columns {}, the records {}",
            text.len(),
            columns.len,
            records.len()
        );
        let text_in_order = text.in_order(&columns.id_rank);
        let ranked = columns.positions_are_ranks();
        Ok(AgentIndex { records, text, columns, text_in_order, ranked, similar: OnceLock::new() })
    }

    pub fn len(&self) -> usize {
        self.columns.len
    }

    /// Each capability set's best agents ([`SimilarSets`]), made on the
    /// first call.
    pub fn similar_sets(&self) -> &SimilarSets {
        self.similar.get_or_init(|| SimilarSets::of(&self.columns))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What agent `i` is ordered by in `sort`: read from its keys and the
    /// columns, not its record.
    fn sort_key(&self, i: usize, sort: SortBy) -> SortKey<'_> {
        let c = &self.columns;
        match sort {
            SortBy::MostRecent => SortKey::Time(self.records.keys(i).updated_at),
            SortBy::Oldest => SortKey::Time(self.records.keys(i).created_at),
            SortBy::Name => SortKey::Name(self.records.keys(i).name),
            SortBy::MostAvailable => {
                let uptime = c.signals.get("uptime").map_or(0.0, |u| u[i]);
                let uptime = if uptime.is_nan() { 0.0 } else { uptime };
                SortKey::Availability(c.available.contains(i), (uptime * 1000.0) as i64)
            }
            SortBy::TrustScore => SortKey::Trust(Trust(c.trust[i])),
        }
    }
}

/// What an agent is ordered by in one sort (ties are broken by id): the
/// keys [`columns::Builder`](super::columns::Builder) ranks.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum SortKey<'a> {
    Time(&'a str),
    Name(Cow<'a, str>),
    /// Available first, then uptime in thousandths.
    Availability(bool, i64),
    Trust(Trust),
}

/// How agent `x.1` of index `x.0` and agent `y.1` of index `y.0` are
/// ordered by (`sort`, `ascending`), ties by id: the order each index
/// keeps.
fn compare(x: (&AgentIndex, usize), y: (&AgentIndex, usize), sort: SortBy, ascending: bool) -> Ordering {
    let forward = x.0.sort_key(x.1, sort).cmp(&y.0.sort_key(y.1, sort));
    let primary = if ascending { forward } else { forward.reverse() };
    primary.then_with(|| x.0.records.keys(x.1).id.cmp(y.0.records.keys(y.1).id))
}

/// The order a query asks for: `None` is relevance (with `q` and no
/// `sortBy`); otherwise the sort and its direction (each sort's natural
/// one unless `sortOrder` says).
pub fn order(query: &SearchQuery) -> Option<(SortBy, bool)> {
    if query.q.is_some() && query.sort_by.is_none() {
        return None;
    }
    let sort_by = query.sort_by.unwrap_or(SortBy::MostRecent);
    Some((sort_by, query.ascending.unwrap_or(matches!(sort_by, SortBy::Oldest | SortBy::Name))))
}

/// The agents passing every filter of `query` (its `q` aside) but the
/// numeric thresholds ([`thresholds`]).
fn categories(index: &AgentIndex, query: &SearchQuery) -> Bits {
    let c = &index.columns;
    let n = c.len;
    let mut keep = Bits::full(n);
    let one = |wanted: &Option<String>| wanted.iter().cloned().collect::<Vec<_>>();
    let verified = if query.verified { vec!["registered".to_string()] } else { Vec::new() };
    c.registry.keep_any(&mut keep, &query.registries);
    c.adapter.keep_any(&mut keep, &query.adapters);
    c.protocols.keep_any(&mut keep, &query.protocols);
    c.kind.keep_any(&mut keep, &one(&query.kind));
    c.verification.keep_any(&mut keep, &one(&query.verification_status));
    c.verification.keep_any(&mut keep, &verified);
    if query.online {
        keep.intersect(&c.available);
    }
    for wanted in &query.capabilities {
        let code = wanted.parse::<u8>().ok().filter(|c| *c < 32).or_else(|| c.capability_codes.get(wanted).copied());
        match code {
            Some(code) => keep.intersect(&c.capabilities[code as usize]),
            None => return Bits::empty(n),
        }
    }
    for (path, patterns) in &query.metadata {
        let Some(column) = c.metadata.get(&path.join(".")) else { return Bits::empty(n) };
        let mut matching = Bits::empty(n);
        for ((value, postings), dense) in column.values.iter().zip(&column.postings).zip(&column.dense) {
            if patterns.iter().any(|p| glob(p, value)) {
                match dense {
                    Some(set) => matching.unite(set),
                    None => postings.iter().for_each(|i| matching.insert(*i as usize)),
                }
            }
        }
        keep.intersect(&matching);
    }
    keep
}

/// Leaves in `kept` the agents passing the numeric thresholds of `query`
/// (a test per agent still in: applied last, to the fewest).
fn thresholds(index: &AgentIndex, query: &SearchQuery, kept: &mut Bits) {
    let c = &index.columns;
    if let Some(t) = query.min_trust {
        // Each agent still in is tested when they are no more than a set
        // made from a step would set or clear.
        if kept.count() <= c.len / (2 * TRUST_STEPS) {
            kept.retain(|i| c.trust[i] >= t);
        } else {
            kept.intersect(&c.trust_at_least(t));
        }
    }
    for (signal, min) in &query.min_signals {
        match c.signals.get(signal) {
            Some(column) => kept.retain(|i| column[i] >= *min),
            None => *kept = Bits::empty(c.len),
        }
    }
}

/// One page of a search, as indices into the agents.
#[derive(Debug, PartialEq)]
pub struct Page {
    pub hits: Vec<usize>,
    /// Each hit's relevance, when the page is in relevance order.
    pub scores: Vec<f32>,
    pub total: usize,
    pub page: usize,
    pub limit: usize,
    pub aggregations: Option<Aggregations>,
}

/// Counts over every agent that passed the filters (not only the page).
#[derive(Debug, Default, PartialEq, Serialize)]
pub struct Aggregations {
    pub registries: BTreeMap<String, usize>,
    pub adapters: BTreeMap<String, usize>,
    pub protocols: BTreeMap<String, usize>,
    pub capabilities: BTreeMap<String, usize>,
    #[serde(rename = "type")]
    pub kinds: BTreeMap<String, usize>,
    #[serde(rename = "verificationStatus")]
    pub verification: BTreeMap<String, usize>,
}

impl Aggregations {
    /// Adds another index's counts to these.
    pub fn add(&mut self, other: Aggregations) {
        let sum = |into: &mut BTreeMap<String, usize>, from: BTreeMap<String, usize>| {
            from.into_iter().for_each(|(k, n)| *into.entry(k).or_default() += n)
        };
        sum(&mut self.registries, other.registries);
        sum(&mut self.adapters, other.adapters);
        sum(&mut self.protocols, other.protocols);
        sum(&mut self.capabilities, other.capabilities);
        sum(&mut self.kinds, other.kinds);
        sum(&mut self.verification, other.verification);
    }
}

fn aggregate(index: &AgentIndex, matched: &Bits) -> Aggregations {
    let c = &index.columns;
    // A sparse set is counted where it has members only (the words are
    // listed only then): where fewer than an eighth of its words do, as a
    // cache line holds eight, or the lines read are about all of them.
    let held = matched.words().iter().filter(|w| **w != 0).count();
    let occupied = (held * 8 < matched.words().len()).then(|| matched.occupied());
    let count = |set: &Bits| match &occupied {
        Some(occupied) => matched.count_with_in(set, occupied),
        None => matched.count_with(set),
    };
    let fields = c.fields();
    let counts: [Vec<usize>; 5] = match &c.profiles {
        Some(profiles) => profiles.counts(matched, occupied.as_deref(), fields),
        None => fields.map(|field| match &field.planes {
            Some(planes) => planes.counts(matched, occupied.as_deref()),
            None => field.sets.iter().map(count).collect(),
        }),
    };
    let [registries, adapters, protocols, kinds, verification] = std::array::from_fn(|f| {
        let (field, counts) = (fields[f], &counts[f]);
        field.values.iter().zip(counts).filter(|(_, n)| **n > 0).map(|(k, n)| (k.clone(), *n)).collect()
    });
    let held: Vec<&Bits> = c.capabilities_held.iter().map(|code| &c.capabilities[*code as usize]).collect();
    let capabilities = match &occupied {
        Some(_) => held.iter().map(|set| count(set)).collect(),
        None => matched.count_with_each(&held),
    };
    let labels: BTreeMap<u8, &String> = c.capability_codes.iter().map(|(slug, code)| (*code, slug)).collect();
    Aggregations {
        registries,
        adapters,
        protocols,
        kinds,
        verification,
        capabilities: c
            .capabilities_held
            .iter()
            .zip(capabilities)
            .filter(|(_, n)| *n > 0)
            .map(|(code, n)| (labels.get(code).map_or(code.to_string(), |l| l.to_string()), n))
            .collect(),
    }
}

/// Agents passing every filter of `query` (its `q` aside), in index order.
pub fn filtered(index: &AgentIndex, query: &SearchQuery) -> Vec<usize> {
    let mut kept = categories(index, query);
    thresholds(index, query, &mut kept);
    kept.iter().collect()
}

/// The agents similar to one whose capability set is `mask`: the `limit`
/// (at most [`SIMILAR_LIMIT`]) sharing the most of it (at least one),
/// then by trust score (higher first), then id, the agents `skip` names
/// (the agent itself, those a live change replaced or deleted) left out.
/// From the set's best ([`SimilarSets`]) when what is skipped leaves
/// enough of them, else over every agent's columns.
pub fn similar(index: &AgentIndex, mask: u32, skip: impl Fn(usize) -> bool, limit: usize) -> Vec<usize> {
    let limit = limit.min(SIMILAR_LIMIT);
    let best = index.similar_sets().best(&index.columns, mask);
    let kept: Vec<usize> = best.iter().map(|i| *i as usize).filter(|i| !skip(*i)).take(limit).collect();
    // A set's best are all the agents sharing any of it when fewer than
    // it keeps.
    if kept.len() == limit || best.len() <= SIMILAR_LIMIT {
        return kept;
    }
    sharing(index, mask, skip, limit)
}

/// [`similar`] over every agent's columns.
fn sharing(index: &AgentIndex, mask: u32, skip: impl Fn(usize) -> bool, limit: usize) -> Vec<usize> {
    let c = &index.columns;
    let mut shared = vec![0u8; c.len];
    for (code, set) in c.capabilities.iter().enumerate() {
        if mask & (1 << code) != 0 {
            set.iter().for_each(|i| shared[i] += 1);
        }
    }
    let key = |i: usize| (c.trust[i], c.id_rank[i]);
    let rank = |a: usize, b: usize| shared[b].cmp(&shared[a]).then_with(|| better(key(a), key(b)));
    let mut top: Vec<usize> = Vec::with_capacity(limit + 1);
    for i in (0..c.len).filter(|i| shared[*i] > 0 && !skip(*i)) {
        if limit == 0 || (top.len() == limit && rank(i, top[limit - 1]).is_ge()) {
            continue;
        }
        let at = top.partition_point(|t| rank(*t, i).is_lt());
        top.insert(at, i);
        top.truncate(limit);
    }
    top
}

/// Agents listed by `/agents/{uaid}/similar`.
pub const SIMILAR_LIMIT: usize = 8;

/// Whether an agent of trust score and rank by id `a` ranks before one of
/// `b` among agents sharing as many capabilities: higher trust score, then
/// id.
fn better(a: (f64, u32), b: (f64, u32)) -> Ordering {
    b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1))
}

/// Per capability set some agent has, the best `SIMILAR_LIMIT + 1` agents
/// sharing any of it, best first (by capabilities shared, trust, id):
/// an agent's similar list is its set's, less the agent itself (hence one
/// more). Only a set's own best `SIMILAR_LIMIT + 1` can be on any list,
/// so the work and the memory grow with the number of distinct sets, not
/// with the agents: one pass over the capability columns, then the sets
/// against one another, over the cores.
pub struct SimilarSets {
    /// Per set, the best of the agents whose set it is.
    own: HashMap<u32, Vec<u32>>,
    /// Per set, the best of the agents sharing any of it.
    best: HashMap<u32, Vec<u32>>,
}

impl SimilarSets {
    pub fn of(c: &Columns) -> SimilarSets {
        use rayon::prelude::*;
        let mut masks = vec![0u32; c.len];
        for (code, set) in c.capabilities.iter().enumerate() {
            set.iter().for_each(|i| masks[i] |= 1 << code);
        }
        let mut own: HashMap<u32, Vec<u32>> = HashMap::new();
        for (i, mask) in masks.iter().enumerate().filter(|(_, m)| **m != 0) {
            let group = own.entry(*mask).or_default();
            let key = |at: u32| (c.trust[at as usize], c.id_rank[at as usize]);
            if group.len() > SIMILAR_LIMIT && better(key(i as u32), key(group[SIMILAR_LIMIT])).is_ge() {
                continue;
            }
            let at = group.partition_point(|g| better(key(*g), key(i as u32)).is_lt());
            group.insert(at, i as u32);
            group.truncate(SIMILAR_LIMIT + 1);
        }
        let sets: Vec<u32> = own.keys().copied().collect();
        let best = sets.into_par_iter().map(|m| (m, best_for(&own, c, m))).collect();
        SimilarSets { own, best }
    }

    /// The best `SIMILAR_LIMIT + 1` agents sharing any of `mask`, best
    /// first (made for a set no agent has).
    pub fn best(&self, c: &Columns, mask: u32) -> Cow<'_, [u32]> {
        match self.best.get(&mask) {
            Some(best) => Cow::Borrowed(best),
            None => Cow::Owned(best_for(&self.own, c, mask)),
        }
    }

    /// How many distinct capability sets the agents have.
    pub fn len(&self) -> usize {
        self.own.len()
    }

    pub fn is_empty(&self) -> bool {
        self.own.is_empty()
    }
}

/// The best `SIMILAR_LIMIT + 1` agents sharing any of `mask`, from each
/// set's own best.
fn best_for(own: &HashMap<u32, Vec<u32>>, c: &Columns, mask: u32) -> Vec<u32> {
    let key = |at: u32| (c.trust[at as usize], c.id_rank[at as usize]);
    let order = |x: &(u32, u32), y: &(u32, u32)| y.0.cmp(&x.0).then_with(|| better(key(x.1), key(y.1)));
    // The best (shared, agent) pairs, kept sorted.
    let mut top: Vec<(u32, u32)> = Vec::with_capacity(SIMILAR_LIMIT + 2);
    for (set, members) in own {
        let shared = (set & mask).count_ones();
        if shared == 0 {
            continue;
        }
        for other in members {
            let candidate = (shared, *other);
            if top.len() > SIMILAR_LIMIT && order(&candidate, &top[SIMILAR_LIMIT]).is_ge() {
                break; // the rest of this set ranks lower still
            }
            let at = top.partition_point(|t| order(t, &candidate).is_lt());
            top.insert(at, candidate);
            top.truncate(SIMILAR_LIMIT + 1);
        }
    }
    top.into_iter().map(|(_, at)| at).collect()
}

/// Runs `query` over the index.
pub fn search(index: &AgentIndex, query: &SearchQuery) -> Page {
    search_excluding(index, query, None, None)
}

/// Runs `query` over the index without the agents in `excluded` (those a
/// live change replaced or deleted). With a `reference`, relevance is
/// scored as if the index were part of that one
/// ([`TextIndex::scores`]).
pub fn search_excluding(
    index: &AgentIndex,
    query: &SearchQuery,
    excluded: Option<&Bits>,
    reference: Option<&TextIndex>,
) -> Page {
    let mut matched = categories(index, query);
    if let Some(excluded) = excluded {
        matched.subtract(excluded);
    }
    // With `q`, what matches is read from the postings; only a page in
    // relevance order is scored, below.
    let text = query.q.as_ref().map(|q| index.text.matching(q));
    if let Some(text) = &text {
        text.restrict(&mut matched);
    }
    thresholds(index, query, &mut matched);
    let total = matched.count();
    let aggregations = query.include_aggregations.then(|| aggregate(index, &matched));
    let start = (query.page - 1).saturating_mul(query.limit);
    let end = start.saturating_add(query.limit).min(total);
    let mut scores = Vec::new();
    let hits = match &text {
        _ if start >= total => Vec::new(),
        // With `q` and no `sortBy`: by relevance, ties by id; the text
        // index finds the first `end` without scoring every match.
        Some(text) if query.sort_by.is_none() => {
            let of = (!index.ranked).then_some(index.columns.id_rank.as_slice());
            let rank = Ranks { of, ordered: index.text_in_order };
            let top = index.text.top(text, reference, &matched, end, &rank);
            scores = top[start.min(top.len())..].iter().map(|(_, score)| *score).collect();
            top[start.min(top.len())..].iter().map(|(i, _)| *i as usize).collect()
        }
        // Otherwise in the sort's order.
        _ => {
            let (sort_by, ascending) = order(query).unwrap_or((SortBy::MostRecent, false));
            sorted_page(&index.columns, order_slot(sort_by, ascending), &matched, total, start..end)
        }
    };
    Page { hits, scores, total, page: query.page, limit: query.limit, aggregations }
}

/// How many entries of a sort order [`sorted_page`] walks for each agent
/// matched before it sorts their places instead: reading a place and
/// sorting it cost about this many steps of the walk.
const WALK: usize = 4;

/// The agents of `matched` (`total` of them) at `range` in the order of
/// `slot`: the order is walked until the page is full, which is soon
/// when the matches are many or come early in it; past `WALK` entries a
/// match, the matches' places are sorted instead (a few matches, or
/// matches bunched late in the order: a word that is in the names of
/// agents sorted by name, at a million agents, walked 0.9 ms).
fn sorted_page(c: &Columns, slot: usize, matched: &Bits, total: usize, range: std::ops::Range<usize>) -> Vec<usize> {
    let order = &c.orders[slot];
    let mut page = Vec::with_capacity(range.len());
    let mut seen = 0;
    for (step, at) in order.iter().enumerate() {
        if step == total.saturating_mul(WALK) {
            let mut places: Vec<u32> = matched.iter().map(|at| c.places[slot][at]).collect();
            if places.len() > range.end {
                places.select_nth_unstable(range.end);
                places.truncate(range.end);
            }
            places.sort_unstable();
            let places = &places[range.start.min(places.len())..];
            return places.iter().map(|place| order[*place as usize] as usize).collect();
        }
        if matched.contains(*at as usize) {
            if seen >= range.start {
                page.push(*at as usize);
                if page.len() == range.len() {
                    break;
                }
            }
            seen += 1;
        }
    }
    page
}

/// One index of a [`merge`]d search: its agents but `excluded` (those a
/// later change replaced or deleted); with a `reference`, relevance is
/// scored beside that index's term statistics.
pub struct Part<'a> {
    pub index: &'a AgentIndex,
    pub excluded: &'a Bits,
    pub reference: Option<&'a TextIndex>,
}

/// A hit of a [`merge`]d search: agent `at` of part `part`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    pub part: usize,
    pub at: usize,
}

/// A page of a search over several indexes at once.
#[derive(Debug, PartialEq)]
pub struct Merged {
    pub hits: Vec<Hit>,
    pub total: usize,
    pub page: usize,
    pub limit: usize,
    pub aggregations: Option<Aggregations>,
}

/// Runs `query` over `parts` as if over one index holding them all:
/// totals and counts add up, and the page is the parts' ordered lists
/// merged (relevance ties, and sorts, by id). A page needs only the first
/// `page × limit` of each part.
pub fn merge(parts: &[Part], query: &SearchQuery) -> Merged {
    let end = query.page.saturating_mul(query.limit);
    let first = SearchQuery { page: 1, limit: end, ..query.clone() };
    let mut pages: Vec<Page> =
        parts.iter().map(|p| search_excluding(p.index, &first, Some(p.excluded), p.reference)).collect();
    let total = pages.iter().map(|p| p.total).sum();
    let aggregations = pages.iter_mut().filter_map(|p| p.aggregations.take()).reduce(|mut all, more| {
        all.add(more);
        all
    });
    // Each part's list is in the query's order already: the page is
    // their merge (reading keys, never records).
    let order = order(query);
    let precedes = |(p, n): (usize, usize), (q, m): (usize, usize)| -> bool {
        let (x, y) = ((parts[p].index, pages[p].hits[n]), (parts[q].index, pages[q].hits[m]));
        match order {
            None => {
                let by_id = || x.0.records.keys(x.1).id.cmp(y.0.records.keys(y.1).id);
                pages[q].scores[m].total_cmp(&pages[p].scores[n]).then_with(by_id).is_lt()
            }
            Some((sort, ascending)) => compare(x, y, sort, ascending).is_lt(),
        }
    };
    // A part's entries that come before every other head are taken as
    // one run, its length found by doubling then halving: a comparison
    // reads two agents' keys, and a build's are parsed from its keys file,
    // so taken head by head a page of 20 read about 40 of them and a deep
    // page (the first `page × limit` merged) hundreds; a run reads a few.
    let mut next = vec![0usize; pages.len()];
    let mut all: Vec<Hit> = Vec::with_capacity(end.min(pages.iter().map(|p| p.hits.len()).sum()));
    let first_of = |heads: &mut dyn Iterator<Item = usize>, next: &[usize]| {
        heads.reduce(|best, p| if precedes((p, next[p]), (best, next[best])) { p } else { best })
    };
    while all.len() < end {
        let open = |p: &usize| next[*p] < pages[*p].hits.len();
        let Some(best) = first_of(&mut (0..pages.len()).filter(open), &next) else {
            break;
        };
        let room = (pages[best].hits.len() - next[best]).min(end - all.len());
        let run = match first_of(&mut (0..pages.len()).filter(open).filter(|p| *p != best), &next) {
            Some(rival) => leading(room, |k| precedes((best, next[best] + k), (rival, next[rival]))),
            None => room,
        };
        let run = run.max(1);
        all.extend(pages[best].hits[next[best]..next[best] + run].iter().map(|at| Hit { part: best, at: *at }));
        next[best] += run;
    }
    let start = (query.page - 1).saturating_mul(query.limit).min(all.len());
    let hits = all.split_off(start);
    Merged { hits, total, page: query.page, limit: query.limit, aggregations }
}

/// How many of `0..len` lead, `before(k)` being true for those and false
/// for every later `k`: found by doubling then halving, in about twice
/// the answer's log2 calls of `before`.
fn leading(len: usize, before: impl Fn(usize) -> bool) -> usize {
    // Every k below `low` leads.
    let (mut low, mut step) = (0, 1);
    while low + step <= len && before(low + step - 1) {
        low += step;
        step *= 2;
    }
    // The first that does not lead is at or below `high`.
    let high = (low + step - 1).min(len);
    low + super::records::partition_point(high - low, |k| before(low + k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_model::generate::agents;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn leading_counts_the_entries_before_the_first_that_does_not_lead() {
        for len in 0..40 {
            for answer in 0..=len {
                let calls = std::cell::Cell::new(0);
                let before = |k: usize| {
                    calls.set(calls.get() + 1);
                    assert!(k < len, "{k} asked of {len}");
                    k < answer
                };
                assert_eq!(leading(len, before), answer, "{answer} of {len}");
                assert!(calls.get() <= 2 * (usize::BITS - len.leading_zeros()) as usize + 1, "{answer} of {len}");
            }
        }
    }

    /// A sorted page is the matches' run of the order, whether the walk
    /// fills it or gives way to sorting the matches' places: few matches,
    /// matches bunched at the end of the order or spread, deep pages.
    #[test]
    fn a_sorted_page_is_the_run_of_the_order_it_names() {
        let index = AgentIndex::build(agents(500, 9));
        let c = &index.columns;
        let slot = order_slot(SortBy::Name, true);
        let late: Vec<usize> = c.orders[slot][440..].iter().map(|at| *at as usize).collect();
        let sets = [
            Bits::empty(500),
            Bits::full(500),
            Bits::from_positions(500, [7]),
            Bits::from_positions(500, (0..500).filter(|i| i % 3 == 1)),
            Bits::from_positions(500, late),
        ];
        for (set, slot) in sets.iter().flat_map(|set| (0..c.orders.len()).map(move |slot| (set, slot))) {
            let walked: Vec<usize> =
                c.orders[slot].iter().map(|at| *at as usize).filter(|at| set.contains(*at)).collect();
            for range in [0..1, 0..20, 5..25, 40..60, 55..80, 480..500, 600..620] {
                let expected = &walked[range.start.min(walked.len())..range.end.min(walked.len())];
                assert_eq!(sorted_page(c, slot, set, set.count(), range.clone()), expected, "{slot} {range:?}");
            }
        }
    }

    #[test]
    fn globs() {
        for (pattern, text, ok) in [
            ("eu-*", "eu-west", true),
            ("eu-*", "us-east", false),
            ("*east", "us-east", true),
            ("*", "", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXcYb", false),
            ("free", "free", true),
            ("free", "freebie", false),
            ("ab*ba", "aba", false),
        ] {
            assert_eq!(glob(pattern, text), ok, "{pattern} ~ {text}");
        }
    }

    /// Aggregations count, for each value of each field, the agents that
    /// pass the filters and have it, as the agents themselves say: with the
    /// five categorical fields counted as their combinations (the planes of
    /// `Profiles`) and apart.
    #[test]
    fn aggregations_count_each_value_of_the_filtered_agents() {
        let set = agents(300, 9);
        let mut index = AgentIndex::build(set.clone());
        assert!(index.columns.profiles.is_some(), "the generated agents' combinations are few");
        for profiles in [true, false] {
            if !profiles {
                index.columns.profiles = None;
            }
            let queries = [
                SearchQuery::default(),
                SearchQuery { registries: strings(&["hashgraph-online"]), ..SearchQuery::default() },
                SearchQuery { online: true, min_trust: Some(40.0), ..SearchQuery::default() },
                SearchQuery { capabilities: strings(&["text-generation"]), ..SearchQuery::default() },
                SearchQuery { kind: Some("mcp-servers".into()), ..SearchQuery::default() },
                SearchQuery {
                    protocols: strings(&["a2a"]),
                    verification_status: Some("pending".into()),
                    ..SearchQuery::default()
                },
                SearchQuery { registries: strings(&["nanda", "olas"]), ..SearchQuery::default() },
                SearchQuery { min_trust: Some(99.9), ..SearchQuery::default() },
            ];
            for query in queries {
                let got = search(&index, &query).aggregations.unwrap();
                let mut want = Aggregations::default();
                for agent in filtered(&index, &query).into_iter().map(|i| &set[i]) {
                    let add =
                        |map: &mut BTreeMap<String, usize>, key: &str| *map.entry(key.to_string()).or_default() += 1;
                    add(&mut want.registries, &agent.registry.to_lowercase());
                    add(&mut want.adapters, &agent.adapter.to_lowercase());
                    agent.protocols.iter().for_each(|p| add(&mut want.protocols, &p.to_lowercase()));
                    add(&mut want.kinds, agent.kind.as_str());
                    add(&mut want.verification, agent.verification_status.as_str());
                    agent.capability_labels.iter().for_each(|l| add(&mut want.capabilities, &crate::text::slug(l)));
                }
                assert_eq!(got, want, "{query:?} (profiles: {profiles})");
            }
        }
    }

    #[test]
    fn a_merged_search_is_the_search_of_its_parts_as_one_index() {
        let set = agents(260, 21);
        // The build holds the first 200; live changes replace ten of them,
        // delete ten, and add sixty, in two segments.
        let (built, fresh) = set.split_at(200);
        let mut changed: Vec<Agent> = built.iter().step_by(20).cloned().collect();
        for (n, agent) in changed.iter_mut().enumerate() {
            agent.name = format!("Renamed {n}");
            agent.updated_at = "2030-01-01T00:00:00Z".into();
            agent.trust_score = (n * 9) as f64;
        }
        let deleted: Vec<usize> = (5..200).step_by(20).collect();
        let replaced: Vec<usize> = (0..200).step_by(20).collect();
        let live_agents: Vec<Agent> = changed.iter().chain(fresh).cloned().collect();
        let base = AgentIndex::build(built.to_vec());
        let excluded = Bits::from_positions(200, replaced.iter().chain(&deleted).copied());
        // The older segment: its first agent is changed again in the newer
        // one (left out here); the newer: its last agent is already in the
        // build (an older change, left out).
        let (older, newer) = live_agents.split_at(30);
        let mut newer = newer.to_vec();
        let mut again = older[0].clone();
        again.description = "changed twice".into();
        newer.insert(0, again);
        let older_excluded = Bits::from_positions(30, [0]);
        let newer_excluded = Bits::from_positions(newer.len(), [newer.len() - 1]);
        let mut whole: Vec<Agent> =
            built.iter().enumerate().filter(|(i, _)| !excluded.contains(*i)).map(|(_, a)| a.clone()).collect();
        whole.extend(older[1..].iter().cloned());
        whole.extend(newer[..newer.len() - 1].iter().cloned());
        let (older, newer) = (AgentIndex::build(older.to_vec()), AgentIndex::build(newer));
        let truth = AgentIndex::build(whole);
        let indexes = [&base, &older, &newer];
        let ids_of = |merged: &Merged| -> Vec<String> {
            merged.hits.iter().map(|hit| indexes[hit.part].records.keys(hit.at).id.to_string()).collect()
        };
        let parts = [
            Part { index: &base, excluded: &excluded, reference: None },
            Part { index: &older, excluded: &older_excluded, reference: Some(&base.text) },
            Part { index: &newer, excluded: &newer_excluded, reference: Some(&base.text) },
        ];
        let sorted = |sort: SortBy| SearchQuery { sort_by: Some(sort), ..SearchQuery::default() };
        let queries = [
            SearchQuery::default(),
            SearchQuery { page: 3, limit: 7, ..SearchQuery::default() },
            sorted(SortBy::Name),
            SearchQuery { ascending: Some(false), page: 4, limit: 9, ..sorted(SortBy::Name) },
            SearchQuery { limit: 50, ..sorted(SortBy::TrustScore) },
            SearchQuery { page: 2, ..sorted(SortBy::Oldest) },
            SearchQuery { limit: 100, ..sorted(SortBy::MostAvailable) },
            SearchQuery { registries: strings(&["hashgraph-online"]), ..sorted(SortBy::Name) },
            SearchQuery { capabilities: strings(&["text-generation"]), page: 2, limit: 5, ..SearchQuery::default() },
            SearchQuery { online: true, min_trust: Some(40.0), ..SearchQuery::default() },
            SearchQuery { q: Some("translator".into()), ..sorted(SortBy::TrustScore) },
            SearchQuery { page: 40, ..SearchQuery::default() },
        ];
        for query in queries {
            let merged = merge(&parts, &query);
            let expected = search(&truth, &query);
            let expected_ids: Vec<String> =
                expected.hits.iter().map(|i| truth.records.keys(*i).id.to_string()).collect();
            assert_eq!(ids_of(&merged), expected_ids, "{query:?}");
            assert_eq!(merged.total, expected.total, "{query:?}");
            assert_eq!(merged.aggregations, expected.aggregations, "{query:?}");
        }
        // Relevance: the same agents match (the build's scores use the
        // build's statistics alone, so only the set is compared).
        let query = SearchQuery { q: Some("translator".into()), limit: 500, ..SearchQuery::default() };
        let merged = merge(&parts, &query);
        let mut got = ids_of(&merged);
        let mut expected: Vec<String> =
            search(&truth, &query).hits.iter().map(|i| truth.records.keys(*i).id.to_string()).collect();
        got.sort();
        expected.sort();
        assert_eq!(got, expected);
        assert!(!got.is_empty());
    }
}
