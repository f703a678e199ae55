//! What search needs of each agent besides its text, as columns: a set of
//! agents ([`Bits`]) per value of each categorical field, the trust scores
//! and signals dense, metadata values with their agents, and the agents in
//! every sort order. A search is then set intersections, population counts
//! and a walk along one order until its page is full.
//!
//! Gathered one agent at a time ([`Builder`]: the generator's agents
//! stream past it; sort keys are kept in string arenas until the orders
//! are made), and written as one binary file the api reads back
//! ([`Columns::write`], [`Columns::read`]) instead of deriving them from
//! the agents again. Pure but for those two.
//!
//! For a field no agent has two values of, the sets are also bit planes
//! (what aggregations count, `log2` of the sets' words read), and the five
//! fields' value combinations are planes in the groups of fields that cost
//! least (`Profiles`: a group of `B` planes costs about `3 × 2^B` operations
//! a word; adapter, type and protocols follow from the registry,
//! verification does not). Sets derived when the columns are made or read,
//! never written: a metadata value held by a 32nd of the agents or more, and
//! 32 steps of the trust order, from which `minTrust` starts. `read` checks
//! lengths, positions and codes.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::bits::{Bits, Planes, MAX_PLANES};
use crate::text::slug;
use broker_model::Agent;

/// The orders `sortBy` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    MostRecent,
    Oldest,
    Name,
    MostAvailable,
    TrustScore,
}

/// The sorts, in the order their two directions are kept.
pub const SORTS: [SortBy; 5] =
    [SortBy::MostRecent, SortBy::Oldest, SortBy::Name, SortBy::MostAvailable, SortBy::TrustScore];

/// Where the order of (`sort`, `ascending`) is kept.
pub fn order_slot(sort: SortBy, ascending: bool) -> usize {
    SORTS.iter().position(|s| *s == sort).expect("every sort is listed") * 2 + usize::from(ascending)
}

/// Interned values of one categorical field, and per value its agents.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Field {
    pub values: Vec<String>,
    pub sets: Vec<Bits>,
    /// The sets as planes when no agent has two of the values (made when
    /// the columns are, never written): what an aggregation counts.
    pub planes: Option<Planes>,
}

impl Field {
    /// Adds agent `i` to the set of `value`.
    fn add(&mut self, n: usize, value: &str, i: usize) {
        let id = match self.values.iter().position(|v| v == value) {
            Some(id) => id,
            None => {
                self.values.push(value.to_string());
                self.sets.push(Bits::empty(n));
                self.values.len() - 1
            }
        };
        self.sets[id].insert(i);
    }

    /// Keeps in `keep` only the agents having a value named in `wanted`
    /// (any case); nothing wanted is no filter. One or two values are
    /// and-ed in from their own sets, with no union made (a union is a
    /// set allocated and written, `n / 64` words, for each filter).
    pub fn keep_any(&self, keep: &mut Bits, wanted: &[String]) {
        if wanted.is_empty() {
            return;
        }
        let sets: Vec<&Bits> = self
            .values
            .iter()
            .zip(&self.sets)
            .filter(|(name, _)| wanted.iter().any(|w| w.eq_ignore_ascii_case(name)))
            .map(|(_, set)| set)
            .collect();
        match sets.as_slice() {
            [] => keep.clear(),
            [one] => keep.intersect(one),
            [one, two] => keep.intersect_either(one, Some(two)),
            [first, rest @ ..] => {
                let mut union = (*first).clone();
                rest.iter().for_each(|set| union.unite(set));
                keep.intersect(&union);
            }
        }
    }
}

/// One flattened metadata path: its distinct values, and per value the
/// agents having it (ascending).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetadataColumn {
    pub values: Vec<String>,
    pub postings: Vec<Vec<u32>>,
    /// The agents of each value held by many (a 32nd of the agents or
    /// more) as a set as well, made when the columns are: a filter
    /// unites it in `n / 64` words instead of setting each agent's bit.
    /// No larger than the postings it copies.
    pub dense: Vec<Option<Bits>>,
}

/// How many steps [`Columns::trust_steps`] cuts the trust order into.
pub const TRUST_STEPS: usize = 32;

/// The columns of a set of agents.
#[derive(Clone, Debug, PartialEq)]
pub struct Columns {
    pub len: usize,
    pub registry: Field,
    pub adapter: Field,
    pub protocols: Field,
    pub kind: Field,
    pub verification: Field,
    /// Per capability code (0 to 31), the agents advertising it.
    pub capabilities: Vec<Bits>,
    pub available: Bits,
    pub trust: Vec<f64>,
    /// Capability slug (of a label) to code.
    pub capability_codes: BTreeMap<String, u8>,
    /// Agent positions in each sort order, ties by id; index [`order_slot`].
    pub orders: Vec<Vec<u32>>,
    /// Each agent's rank by id.
    pub id_rank: Vec<u32>,
    /// Metadata flattened by dot-separated path.
    pub metadata: BTreeMap<String, MetadataColumn>,
    /// Trust signal name to each agent's value (NaN when it has none).
    pub signals: BTreeMap<String, Vec<f64>>,
    /// Entry `k - 1` is the set of the first `k n / TRUST_STEPS` agents
    /// of the trust order (highest first), made when the columns are: a
    /// `minTrust` filter starts from the nearest step and sets or clears
    /// at most `n / (2 TRUST_STEPS)` agents, instead of up to all of them.
    pub trust_steps: Vec<Bits>,
    /// The capability codes some agent has (made when the columns are):
    /// an aggregation counts only their sets, not all 32.
    pub capabilities_held: Vec<u8>,
    /// The five fields counted together, when their combinations are few
    /// (made when the columns are).
    pub profiles: Option<Profiles>,
    /// Each agent's place in each sort order (the inverse of
    /// [`Columns::orders`], made when the columns are): a sorted page of a
    /// few matches is their places sorted, not a walk of the order.
    pub places: Vec<Vec<u32>>,
}

/// The combinations of the five categorical fields' values (registry,
/// adapter, protocols, type, verification) the agents have, counted as
/// planes ([`Planes`]) in groups of fields: an aggregation counts each
/// group's combinations and adds each count to its values, where counting
/// the fields apart reads one plane or set per bit or value of each
/// (fifteen at seven registries).
///
/// The fields are grouped as costs least: a group of `B` planes splits
/// each word into `2^B` leaves, about `3 × 2^B` operations a word, so two
/// groups of 3 and 2 planes count three times faster than one of 5 (17 µs
/// against 60 µs over a million agents), for the same five planes read.
/// An adapter, type and protocols follow from the registry in most builds
/// (seven combinations, three planes); verification does not.
#[derive(Clone, Debug, PartialEq)]
pub struct Profiles {
    offsets: [u32; 5],
    groups: Vec<Group>,
}

/// Fields counted together: their bits of an agent's key (see
/// [`Profiles::of`]), and each combination the agents have, in the order
/// of the planes' sets.
#[derive(Clone, Debug, PartialEq)]
struct Group {
    mask: u64,
    keys: Vec<u64>,
    planes: Planes,
}

/// What counting a group of `depth` planes costs, in about operations a
/// word (see [`Profiles`]).
fn group_cost(depth: usize) -> usize {
    3 * (1 << depth) + 2 * depth
}

impl Profiles {
    /// The combinations of `fields` the `n` agents have, in the groups
    /// that cost least; `None` when the fields have over 64 values in all,
    /// or the agents' combinations are too many for any grouping.
    fn of(fields: [&Field; 5], n: usize) -> Option<Profiles> {
        let mut offsets = [0u32; 5];
        let mut next = 0usize;
        for (offset, field) in offsets.iter_mut().zip(fields) {
            *offset = next as u32;
            next += field.values.len();
        }
        if next > 64 {
            return None;
        }
        // Bit `offsets[f] + v` of an agent's key is field `f`'s value `v`.
        let mut key = vec![0u64; n];
        for (offset, field) in offsets.iter().zip(fields) {
            for (v, set) in field.sets.iter().enumerate() {
                set.iter().for_each(|at| key[at] |= 1 << (offset + v as u32));
            }
        }
        let distinct: std::collections::BTreeSet<u64> = key.iter().copied().filter(|k| *k != 0).collect();
        let masks: [u64; 5] = std::array::from_fn(|f| match fields[f].values.len() as u32 {
            0 => 0,
            width => (u64::MAX >> (64 - width)) << offsets[f],
        });
        let mask_of = |fields: u32| (0..5).filter(|f| fields >> f & 1 == 1).fold(0, |m, f| m | masks[f]);
        // Each group's cost (`None` past the planes' bound), once per
        // group of fields: its combinations are the agents' keys cut to
        // its fields.
        let costs: [Option<usize>; 32] = std::array::from_fn(|fields| {
            let mask = mask_of(fields as u32);
            let combinations: std::collections::BTreeSet<u64> =
                distinct.iter().map(|k| k & mask).filter(|k| *k != 0).collect();
            let depth = (usize::BITS - combinations.len().leading_zeros()) as usize;
            (depth <= MAX_PLANES).then(|| group_cost(depth))
        });
        let best = partitions(5)
            .into_iter()
            .filter_map(|groups| Some((groups.iter().map(|g| costs[*g as usize]).sum::<Option<usize>>()?, groups)))
            .min_by_key(|(cost, _)| *cost)?
            .1;
        let groups = best
            .into_iter()
            .filter_map(|fields| {
                let mask = mask_of(fields);
                let mut keys: Vec<u64> = Vec::new();
                let mut sets: Vec<Bits> = Vec::new();
                for (at, cut) in key.iter().map(|k| k & mask).enumerate().filter(|(_, cut)| *cut != 0) {
                    let k = match keys.iter().position(|k| *k == cut) {
                        Some(k) => k,
                        None => {
                            keys.push(cut);
                            sets.push(Bits::empty(n));
                            keys.len() - 1
                        }
                    };
                    sets[k].insert(at);
                }
                // A group none of whose values any agent has counts nothing.
                (!sets.is_empty()).then(|| Planes::of(&sets).map(|planes| Group { mask, keys, planes }))
            })
            .collect::<Option<Vec<Group>>>()?;
        Some(Profiles { offsets, groups })
    }

    /// How many agents of `within` have each value of each of the five
    /// fields (see [`Planes::counts`] for `occupied`).
    pub fn counts(&self, within: &Bits, occupied: Option<&[u32]>, fields: [&Field; 5]) -> [Vec<usize>; 5] {
        let mut out: [Vec<usize>; 5] = std::array::from_fn(|f| vec![0; fields[f].values.len()]);
        for group in &self.groups {
            let counts = group.planes.counts(within, occupied);
            for (f, values) in out.iter_mut().enumerate() {
                for (v, value) in values.iter_mut().enumerate() {
                    let bit = 1u64 << (self.offsets[f] + v as u32);
                    if group.mask & bit != 0 {
                        *value += group
                            .keys
                            .iter()
                            .zip(&counts)
                            .filter(|(key, _)| *key & bit != 0)
                            .map(|(_, n)| n)
                            .sum::<usize>();
                    }
                }
            }
        }
        out
    }
}

/// Every partition of `n` fields into groups, each group a mask of them
/// (52 for five): each field joins a group before it or starts the next.
fn partitions(n: usize) -> Vec<Vec<u32>> {
    fn grow(field: usize, n: usize, groups: &mut Vec<u32>, out: &mut Vec<Vec<u32>>) {
        if field == n {
            out.push(groups.clone());
            return;
        }
        for g in 0..=groups.len() {
            if g == groups.len() {
                groups.push(1 << field);
                grow(field + 1, n, groups, out);
                groups.pop();
            } else {
                groups[g] |= 1 << field;
                grow(field + 1, n, groups, out);
                groups[g] &= !(1 << field);
            }
        }
    }
    let mut out = Vec::new();
    grow(0, n, &mut Vec::new(), &mut out);
    out
}

impl Columns {
    /// The sets kept beside the columns for the filters (see
    /// [`MetadataColumn::dense`] and [`Columns::trust_steps`]), and the
    /// orders' places: computed from the rest, never written.
    fn derive(&mut self) {
        let n = self.len;
        for field in self.fields_mut() {
            field.planes = Planes::of(&field.sets);
        }
        self.profiles = Profiles::of(self.fields(), n);
        self.capabilities_held =
            (0..self.capabilities.len()).filter(|c| self.capabilities[*c].count() > 0).map(|c| c as u8).collect();
        for column in self.metadata.values_mut() {
            column.dense = column
                .postings
                .iter()
                .map(|p| (p.len() >= n / 32).then(|| Bits::from_positions(n, p.iter().map(|i| *i as usize))))
                .collect();
        }
        self.places = self
            .orders
            .iter()
            .map(|order| {
                let mut places = vec![0u32; n];
                order.iter().enumerate().for_each(|(place, at)| places[*at as usize] = place as u32);
                places
            })
            .collect();
        let order = &self.orders[order_slot(SortBy::TrustScore, false)];
        let mut set = Bits::empty(n);
        let mut done = 0;
        self.trust_steps = (1..TRUST_STEPS)
            .map(|k| {
                let end = trust_step_end(n, k);
                order[done..end].iter().for_each(|i| set.insert(*i as usize));
                done = end;
                set.clone()
            })
            .collect();
    }

    /// The agents whose trust is `t` or more: the head of the trust order
    /// (highest first), made from the nearest of [`Columns::trust_steps`].
    pub fn trust_at_least(&self, t: f64) -> Bits {
        let (n, order) = (self.len, &self.orders[order_slot(SortBy::TrustScore, false)]);
        let above = order.partition_point(|i| self.trust[*i as usize] >= t);
        // Step k ends at k n / STEPS, for k from 1 to STEPS - 1; no agent
        // (empty) is step 0, all of them (full) step STEPS.
        let nearest = (0..=TRUST_STEPS).min_by_key(|k| trust_step_end(n, *k).abs_diff(above)).expect("steps");
        let end = trust_step_end(n, nearest);
        let mut set = match nearest {
            0 => Bits::empty(n),
            k if k == TRUST_STEPS => Bits::full(n),
            k => self.trust_steps[k - 1].clone(),
        };
        order[end.min(above)..above].iter().for_each(|i| set.insert(*i as usize));
        order[above..end.max(above)].iter().for_each(|i| set.remove(*i as usize));
        set
    }

    /// The same columns with each agent moved to its rank by id (agent
    /// `i` to position `id_rank[i]`), as a build's search index folder
    /// keeps them: its text index is sorted by id, so that its documents
    /// are the agents' positions, with no table between them.
    pub fn in_id_order(mut self) -> Columns {
        let n = self.len;
        let by_id = self.id_order();
        let rank = std::mem::take(&mut self.id_rank);
        let moved = |set: &Bits| Bits::from_positions(n, set.iter().map(|i| rank[i] as usize));
        for field in self.fields_mut() {
            field.sets = field.sets.iter().map(moved).collect();
        }
        self.capabilities = self.capabilities.iter().map(moved).collect();
        self.available = moved(&self.available);
        self.trust = by_id.iter().map(|at| self.trust[*at as usize]).collect();
        for values in self.signals.values_mut() {
            *values = by_id.iter().map(|at| values[*at as usize]).collect();
        }
        for order in &mut self.orders {
            order.iter_mut().for_each(|at| *at = rank[*at as usize]);
        }
        for postings in self.metadata.values_mut().flat_map(|column| column.postings.iter_mut()) {
            postings.iter_mut().for_each(|at| *at = rank[*at as usize]);
            postings.sort_unstable();
        }
        self.id_rank = (0..n as u32).collect();
        self.derive();
        self
    }

    /// The agents' positions in id order (the inverse of `id_rank`).
    pub fn id_order(&self) -> Vec<u32> {
        let mut by_id = vec![0u32; self.len];
        self.id_rank.iter().enumerate().for_each(|(at, rank)| by_id[*rank as usize] = at as u32);
        by_id
    }

    /// The categorical fields, each a set per value.
    /// The five categorical fields, in [`Profiles`]' order.
    pub fn fields(&self) -> [&Field; 5] {
        [&self.registry, &self.adapter, &self.protocols, &self.kind, &self.verification]
    }

    fn fields_mut(&mut self) -> [&mut Field; 5] {
        [&mut self.registry, &mut self.adapter, &mut self.protocols, &mut self.kind, &mut self.verification]
    }

    /// Whether each agent's position is its rank by id.
    pub fn positions_are_ranks(&self) -> bool {
        self.id_rank.iter().enumerate().all(|(at, rank)| *rank as usize == at)
    }
}

/// Where step `k` of the trust order ends (how many agents it holds).
fn trust_step_end(n: usize, k: usize) -> usize {
    k * n / TRUST_STEPS
}

impl Columns {
    /// The columns of `agents`, agent `i` at position `i`.
    pub fn of(agents: &[Agent]) -> Columns {
        let mut builder = Builder::new(agents.len());
        agents.iter().for_each(|a| builder.add(a));
        builder.finish()
    }
}

/// Text kept end to end, each string's end recorded: sort keys of a
/// million agents without a million allocations.
#[derive(Default)]
struct Arena {
    bytes: String,
    ends: Vec<usize>,
}

impl Arena {
    fn push(&mut self, text: &str) {
        self.bytes.push_str(text);
        self.ends.push(self.bytes.len());
    }

    fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    fn all(&self) -> Vec<&str> {
        (0..self.ends.len()).map(|i| self.get(i)).collect()
    }
}

/// Gathers the columns of `len` agents, given one at a time in position
/// order.
pub struct Builder {
    columns: Columns,
    added: usize,
    updated: Arena,
    created: Arena,
    names: Arena,
    ids: Arena,
    /// Per metadata path, each value's index in its column.
    metadata_ids: std::collections::HashMap<String, std::collections::HashMap<String, u32>>,
    /// Available first, then uptime in thousandths.
    availability: Vec<(bool, i64)>,
}

impl Builder {
    pub fn new(len: usize) -> Builder {
        Builder {
            columns: Columns {
                len,
                registry: Field::default(),
                adapter: Field::default(),
                protocols: Field::default(),
                kind: Field::default(),
                verification: Field::default(),
                capabilities: vec![Bits::empty(len); 32],
                available: Bits::empty(len),
                trust: Vec::with_capacity(len),
                capability_codes: BTreeMap::new(),
                orders: Vec::new(),
                id_rank: Vec::new(),
                metadata: BTreeMap::new(),
                signals: BTreeMap::new(),
                trust_steps: Vec::new(),
                capabilities_held: Vec::new(),
                profiles: None,
                places: Vec::new(),
            },
            added: 0,
            updated: Arena::default(),
            created: Arena::default(),
            names: Arena::default(),
            ids: Arena::default(),
            metadata_ids: Default::default(),
            availability: Vec::with_capacity(len),
        }
    }

    /// Adds the agent at the next position.
    ///
    /// # Panics
    /// Past the `len` agents the builder was made for.
    pub fn add(&mut self, agent: &Agent) {
        let (n, i, c) = (self.columns.len, self.added, &mut self.columns);
        assert!(i < n, "more agents than the columns were made for");
        c.registry.add(n, &agent.registry.to_lowercase(), i);
        c.adapter.add(n, &agent.adapter.to_lowercase(), i);
        for p in &agent.protocols {
            c.protocols.add(n, &p.to_lowercase(), i);
        }
        c.kind.add(n, agent.kind.as_str(), i);
        c.verification.add(n, agent.verification_status.as_str(), i);
        for code in &agent.capabilities {
            c.capabilities[usize::from(*code).min(31)].insert(i);
        }
        if agent.available {
            c.available.insert(i);
        }
        for (code, label) in agent.capabilities.iter().zip(&agent.capability_labels) {
            c.capability_codes.entry(slug(label)).or_insert(*code);
        }
        c.trust.push(agent.trust_score);
        let ids = &mut self.metadata_ids;
        flatten("", &agent.metadata, &mut |path, value| {
            let column = c.metadata.entry(path.to_string()).or_default();
            let lookup = ids.entry(path.to_string()).or_default();
            let id = *lookup.entry(value.clone()).or_insert_with(|| {
                column.values.push(value);
                column.postings.push(Vec::new());
                (column.values.len() - 1) as u32
            });
            let postings = &mut column.postings[id as usize];
            if postings.last() != Some(&(i as u32)) {
                postings.push(i as u32);
            }
        });
        for (name, value) in &agent.trust_signals {
            c.signals.entry(name.clone()).or_insert_with(|| vec![f64::NAN; n])[i] = *value;
        }
        self.updated.push(&agent.updated_at);
        self.created.push(&agent.created_at);
        self.names.push(&agent.name.to_lowercase());
        self.ids.push(&agent.id);
        let uptime = agent.trust_signals.get("uptime").copied().unwrap_or(0.0);
        self.availability.push((agent.available, (uptime * 1000.0) as i64));
        self.added += 1;
    }

    /// The columns, with every sort order made.
    ///
    /// # Panics
    /// Before all `len` agents were added.
    pub fn finish(self) -> Columns {
        let mut columns = self.columns;
        let n = columns.len;
        assert_eq!(self.added, n, "fewer agents than the columns were made for");
        let id_rank = ranks(self.ids.all());
        let key_ranks: Vec<Vec<u32>> = SORTS
            .iter()
            .map(|sort| match sort {
                SortBy::MostRecent => ranks(self.updated.all()),
                SortBy::Oldest => ranks(self.created.all()),
                SortBy::Name => ranks(self.names.all()),
                SortBy::MostAvailable => ranks(self.availability.clone()),
                SortBy::TrustScore => ranks(columns.trust.iter().map(|t| Trust(*t)).collect()),
            })
            .collect();
        let mut orders = vec![Vec::new(); SORTS.len() * 2];
        for (sort, key) in SORTS.iter().zip(&key_ranks) {
            for ascending in [false, true] {
                let mut order: Vec<u32> = (0..n as u32).collect();
                order.sort_unstable_by(|a, b| {
                    let (a, b) = (*a as usize, *b as usize);
                    let forward = key[a].cmp(&key[b]);
                    let primary = if ascending { forward } else { forward.reverse() };
                    primary.then_with(|| id_rank[a].cmp(&id_rank[b]))
                });
                orders[order_slot(*sort, ascending)] = order;
            }
        }
        columns.orders = orders;
        columns.id_rank = id_rank;
        columns.derive();
        columns
    }
}

/// Trust scores ordered by `total_cmp` (they are finite, 0 to 100).
#[derive(Clone, Copy)]
pub struct Trust(pub f64);

impl PartialEq for Trust {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Trust {}

impl PartialOrd for Trust {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Trust {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Dense ranks of `keys` (ascending).
fn ranks<K: Ord>(keys: Vec<K>) -> Vec<u32> {
    let mut order: Vec<u32> = (0..keys.len() as u32).collect();
    order.sort_by(|a, b| keys[*a as usize].cmp(&keys[*b as usize]));
    let mut out = vec![0u32; keys.len()];
    let mut rank = 0u32;
    for (n, i) in order.iter().enumerate() {
        if n > 0 && keys[order[n - 1] as usize] != keys[*i as usize] {
            rank += 1;
        }
        out[*i as usize] = rank;
    }
    out
}

/// Calls `f(path, value)` for every scalar under `map` (arrays give one
/// call per element, on the same path).
fn flatten(prefix: &str, map: &serde_json::Map<String, Value>, f: &mut impl FnMut(&str, String)) {
    for (k, v) in map {
        let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        flatten_value(&path, v, f);
    }
}

fn flatten_value(path: &str, value: &Value, f: &mut impl FnMut(&str, String)) {
    match value {
        Value::Object(map) => flatten(path, map, f),
        Value::Array(items) => items.iter().for_each(|v| flatten_value(path, v, f)),
        Value::String(text) => f(path, text.clone()),
        Value::Null => {}
        other => f(path, other.to_string()),
    }
}

/// The columns' file in a build's search index folder.
pub const FILE: &str = "columns.bin";

/// Writes `columns` into the search index folder `dir`, synced.
pub fn save(columns: &Columns, dir: &std::path::Path) -> Result<()> {
    shared::site::write_synced_with(&dir.join(FILE), |out| Ok(columns.write(out)?))
}

/// The columns saved in the search index folder `dir`.
pub fn load(dir: &std::path::Path) -> Result<Columns> {
    let path = dir.join(FILE);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    Columns::read(&bytes).with_context(|| format!("reading {}", path.display()))
}

/// The file's first bytes: its kind and format version.
const MAGIC: &[u8; 8] = b"ALMCOL01";

impl Columns {
    /// The columns as one file: little-endian numbers, each list after its
    /// length, strings as UTF-8 after theirs.
    pub fn write(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let mut w = Writer { out };
        w.out.write_all(MAGIC)?;
        w.u64(self.len as u64)?;
        for field in [&self.registry, &self.adapter, &self.protocols, &self.kind, &self.verification] {
            w.strings(&field.values)?;
            for set in &field.sets {
                w.bits(set)?;
            }
        }
        w.u64(self.capabilities.len() as u64)?;
        for set in &self.capabilities {
            w.bits(set)?;
        }
        w.bits(&self.available)?;
        w.f64s(&self.trust)?;
        w.u64(self.capability_codes.len() as u64)?;
        for (slug, code) in &self.capability_codes {
            w.string(slug)?;
            w.u64(u64::from(*code))?;
        }
        w.u64(self.orders.len() as u64)?;
        for order in &self.orders {
            w.u32s(order)?;
        }
        w.u32s(&self.id_rank)?;
        w.u64(self.metadata.len() as u64)?;
        for (path, column) in &self.metadata {
            w.string(path)?;
            w.strings(&column.values)?;
            for postings in &column.postings {
                w.u32s(postings)?;
            }
        }
        w.u64(self.signals.len() as u64)?;
        for (name, values) in &self.signals {
            w.string(name)?;
            w.f64s(values)?;
        }
        Ok(())
    }

    /// Columns written by [`Columns::write`]; anything else, or a file cut
    /// short, is an error.
    pub fn read(bytes: &[u8]) -> Result<Columns> {
        let mut r = Reader { bytes, at: 0 };
        if r.take(MAGIC.len())? != MAGIC {
            bail!("not a columns file of this version");
        }
        let len = r.count()?;
        let field = |r: &mut Reader| -> Result<Field> {
            let values = r.strings()?;
            let sets = values.iter().map(|_| r.bits(len)).collect::<Result<_>>()?;
            Ok(Field { values, sets, planes: None })
        };
        let (registry, adapter, protocols, kind, verification) =
            (field(&mut r)?, field(&mut r)?, field(&mut r)?, field(&mut r)?, field(&mut r)?);
        let capabilities = (0..r.count()?).map(|_| r.bits(len)).collect::<Result<_>>()?;
        let available = r.bits(len)?;
        let trust = r.f64s()?;
        let mut capability_codes = BTreeMap::new();
        for _ in 0..r.count()? {
            let slug = r.string()?;
            capability_codes.insert(slug, u8::try_from(r.u64()?).context("a capability code")?);
        }
        let orders = (0..r.count()?).map(|_| r.u32s()).collect::<Result<_>>()?;
        let id_rank = r.u32s()?;
        let mut metadata = BTreeMap::new();
        for _ in 0..r.count()? {
            let path = r.string()?;
            let values = r.strings()?;
            let postings = values.iter().map(|_| r.u32s()).collect::<Result<_>>()?;
            metadata.insert(path, MetadataColumn { values, postings, dense: Vec::new() });
        }
        let mut signals = BTreeMap::new();
        for _ in 0..r.count()? {
            let name = r.string()?;
            signals.insert(name, r.f64s()?);
        }
        if r.at != bytes.len() {
            bail!("{} bytes follow the columns", bytes.len() - r.at);
        }
        let mut columns = Columns {
            len,
            registry,
            adapter,
            protocols,
            kind,
            verification,
            capabilities,
            available,
            trust,
            capability_codes,
            orders,
            id_rank,
            metadata,
            signals,
            trust_steps: Vec::new(),
            capabilities_held: Vec::new(),
            profiles: None,
            places: Vec::new(),
        };
        columns.check()?;
        columns.derive();
        Ok(columns)
    }

    /// What search relies on: every per-agent list as long as the agents,
    /// every position and code in range.
    fn check(&self) -> Result<()> {
        let n = self.len;
        let per_agent = [self.trust.len(), self.id_rank.len()].into_iter().chain(self.signals.values().map(Vec::len));
        if per_agent.into_iter().any(|l| l != n)
            || self.capabilities.len() != 32
            || self.orders.len() != SORTS.len() * 2
        {
            bail!("the columns do not describe {n} agents");
        }
        let positions = self.orders.iter().chain(self.metadata.values().flat_map(|c| &c.postings));
        if positions.flatten().any(|p| *p as usize >= n) || self.orders.iter().any(|o| o.len() != n) {
            bail!("the columns name agents past {n}");
        }
        if self.capability_codes.values().any(|c| *c >= 32) {
            bail!("a capability code is past 31");
        }
        Ok(())
    }
}

struct Writer<'a, W> {
    out: &'a mut W,
}

impl<W: std::io::Write> Writer<'_, W> {
    fn u64(&mut self, v: u64) -> std::io::Result<()> {
        self.out.write_all(&v.to_le_bytes())
    }

    fn string(&mut self, s: &str) -> std::io::Result<()> {
        self.u64(s.len() as u64)?;
        self.out.write_all(s.as_bytes())
    }

    fn strings(&mut self, list: &[String]) -> std::io::Result<()> {
        self.u64(list.len() as u64)?;
        list.iter().try_for_each(|s| self.string(s))
    }

    fn bits(&mut self, bits: &Bits) -> std::io::Result<()> {
        bits.words().iter().try_for_each(|w| self.u64(*w))
    }

    fn u32s(&mut self, list: &[u32]) -> std::io::Result<()> {
        self.u64(list.len() as u64)?;
        let bytes: Vec<u8> = list.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.out.write_all(&bytes)
    }

    fn f64s(&mut self, list: &[f64]) -> std::io::Result<()> {
        self.u64(list.len() as u64)?;
        let bytes: Vec<u8> = list.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.out.write_all(&bytes)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        let end =
            self.at.checked_add(len).filter(|e| *e <= self.bytes.len()).context("the columns file is cut short")?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("eight bytes")))
    }

    /// A length, which cannot exceed what is left to read.
    fn count(&mut self) -> Result<usize> {
        let n = usize::try_from(self.u64()?).context("a length")?;
        if n > self.bytes.len() {
            bail!("a length of {n} in a columns file of {} bytes", self.bytes.len());
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<String> {
        let len = self.count()?;
        Ok(std::str::from_utf8(self.take(len)?).context("a string in the columns")?.to_string())
    }

    fn strings(&mut self) -> Result<Vec<String>> {
        (0..self.count()?).map(|_| self.string()).collect()
    }

    fn bits(&mut self, len: usize) -> Result<Bits> {
        let words = self.take(len.div_ceil(64) * 8)?;
        Bits::from_words(len, words.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().expect("eight bytes"))))
            .context("a set past its agents")
    }

    fn u32s(&mut self) -> Result<Vec<u32>> {
        let len = self.count()?;
        let bytes = self.take(len.checked_mul(4).context("a length")?)?;
        Ok(bytes.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("four bytes"))).collect())
    }

    fn f64s(&mut self) -> Result<Vec<f64>> {
        let len = self.count()?;
        let bytes = self.take(len.checked_mul(8).context("a length")?)?;
        Ok(bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("eight bytes"))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_model::generate::agents;

    /// A field filter keeps the agents having any value named, in any
    /// case, however many are named; a name no agent has keeps none of its
    /// own, and naming none is no filter.
    #[test]
    fn a_field_filter_keeps_the_agents_having_any_value_named() {
        let set = agents(500, 8);
        let columns = Columns::of(&set);
        let check = |wanted: &[&str]| {
            let wanted: Vec<String> = wanted.iter().map(|w| w.to_string()).collect();
            let mut keep = Bits::full(set.len());
            columns.registry.keep_any(&mut keep, &wanted);
            let want: Vec<usize> = (0..set.len())
                .filter(|i| wanted.is_empty() || wanted.iter().any(|w| w.eq_ignore_ascii_case(&set[*i].registry)))
                .collect();
            assert_eq!(keep.iter().collect::<Vec<_>>(), want, "{wanted:?}");
        };
        let names = &columns.registry.values;
        assert!(names.len() >= 4, "{names:?}");
        check(&[]);
        check(&["no-such-registry"]);
        check(&[&names[0]]);
        check(&[&names[0].to_uppercase()]);
        check(&[&names[0], &names[1]]);
        check(&[&names[0], "no-such-registry"]);
        check(&[&names[0], &names[1], &names[2]]);
        check(&[&names[0], &names[1], &names[2], &names[3]]);
    }

    /// Each field in exactly one group, every way: the Bell numbers.
    #[test]
    fn partitions_put_each_field_in_one_group_every_way() {
        for (n, count) in [(1, 1), (2, 2), (3, 5), (4, 15), (5, 52)] {
            let all = partitions(n);
            assert_eq!(all.len(), count, "{n}");
            for groups in &all {
                assert_eq!(groups.iter().fold(0, |seen, g| seen | g), (1 << n) - 1, "{groups:?}");
                assert_eq!(groups.iter().map(|g| g.count_ones()).sum::<u32>(), n as u32, "{groups:?}");
            }
            let distinct: std::collections::BTreeSet<Vec<u32>> = all.into_iter().collect();
            assert_eq!(distinct.len(), count, "{n}");
        }
    }

    /// The generated agents' adapter, type and protocols follow from their
    /// registry and their verification does not: counted as two groups,
    /// not one of all the combinations.
    #[test]
    fn profiles_group_the_fields_that_follow_one_another() {
        let columns = Columns::of(&agents(2000, 3));
        let profiles = columns.profiles.as_ref().expect("few combinations");
        assert!(profiles.groups.len() >= 2, "{} groups", profiles.groups.len());
        let combinations: usize = profiles.groups.iter().map(|g| g.keys.len()).sum();
        assert!(combinations < 21, "{combinations} combinations counted");
    }

    #[test]
    fn columns_written_read_back_are_the_same_and_damage_is_refused() {
        for n in [0, 1, 63, 64, 65, 777] {
            let columns = Columns::of(&agents(n, 4));
            // An agent is of one registry and one kind: their sets are
            // counted as planes.
            assert_eq!(columns.registry.planes.is_some() && columns.kind.planes.is_some(), n > 0, "{n}");
            let mut bytes = Vec::new();
            columns.write(&mut bytes).unwrap();
            assert_eq!(Columns::read(&bytes).unwrap(), columns, "{n}");
            for cut in [0, 7, 8, 16, bytes.len() / 2, bytes.len().saturating_sub(1)] {
                if cut < bytes.len() {
                    assert!(Columns::read(&bytes[..cut]).is_err(), "{n} agents cut at {cut}");
                }
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(Columns::read(&longer).is_err());
        }
        let mut bytes = Vec::new();
        Columns::of(&agents(10, 4)).write(&mut bytes).unwrap();
        // A position past the agents (the first order's first entry).
        let mut bad = Columns::of(&agents(10, 4));
        bad.orders[0][0] = 10;
        let mut damaged = Vec::new();
        bad.write(&mut damaged).unwrap();
        assert!(Columns::read(&damaged).is_err());
        bytes[0] = b'X';
        assert!(Columns::read(&bytes).is_err());
    }
}
