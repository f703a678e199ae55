//! `GET /api/v1/search`: its parameters (parsed with their bounds, a bad
//! one is a 400 naming it), and the search itself over the agents held in
//! memory: filter, rank, sort, page, aggregate. Pure: no IO.
//!
//! Decisions where the spec is silent (also in the README):
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

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::text::TextIndex;
use super::{Agent, KINDS, VERIFICATION};
use crate::routes::BadParameter;

pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 500;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    MostRecent,
    Oldest,
    Name,
    MostAvailable,
    TrustScore,
}

#[derive(Clone, Debug, Default, PartialEq)]
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

fn list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

fn boolean(parameter: &'static str, value: &str) -> Result<bool, BadParameter> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(BadParameter::new(parameter, format!("{parameter} must be true or false"))),
    }
}

/// Lower-case words joined by hyphens: `Code Generation` is `code-generation`.
pub fn slug(label: &str) -> String {
    super::text::tokens(label).collect::<Vec<_>>().join("-")
}

impl SearchQuery {
    /// Parses a raw query string. Unknown parameters are ignored.
    pub fn parse(raw: &str) -> Result<SearchQuery, BadParameter> {
        let mut out = SearchQuery { page: 1, limit: DEFAULT_LIMIT, include_aggregations: true, ..Default::default() };
        for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
            let value = value.trim();
            match key.as_ref() {
                "q" => out.q = Some(value.to_string()).filter(|q| !q.is_empty()),
                "page" => {
                    out.page = value
                        .parse()
                        .ok()
                        .filter(|p| *p >= 1)
                        .ok_or_else(|| BadParameter::new("page", "page must be an integer of at least 1"))?
                }
                "limit" => {
                    out.limit = value.parse().ok().filter(|l| (1..=MAX_LIMIT).contains(l)).ok_or_else(|| {
                        BadParameter::new("limit", format!("limit must be an integer from 1 to {MAX_LIMIT}"))
                    })?
                }
                "registries" => out.registries.extend(list(value)),
                "adapters" | "adapter" => out.adapters.extend(list(value)),
                "capabilities" => out.capabilities.extend(list(value).iter().map(|c| slug(c))),
                "protocols" => out.protocols.extend(list(value)),
                "minTrust" => {
                    out.min_trust =
                        Some(
                            value.parse::<f64>().ok().filter(|t| (0.0..=100.0).contains(t)).ok_or_else(|| {
                                BadParameter::new("minTrust", "minTrust must be a number from 0 to 100")
                            })?,
                        )
                }
                "minSignals" => {
                    for part in list(value) {
                        let parsed = part
                            .split_once(':')
                            .and_then(|(k, v)| Some((k.trim().to_string(), v.trim().parse::<f64>().ok()?)))
                            .filter(|(k, v)| !k.is_empty() && v.is_finite());
                        let pair = parsed.ok_or_else(|| {
                            BadParameter::new("minSignals", "minSignals is a list of <signalKey>:<min>")
                        })?;
                        out.min_signals.push(pair);
                    }
                }
                "includeAggregations" => out.include_aggregations = boolean("includeAggregations", value)?,
                "verificationStatus" => {
                    if !VERIFICATION.contains(&value) {
                        return Err(BadParameter::new(
                            "verificationStatus",
                            format!("verificationStatus is one of {}", VERIFICATION.join(", ")),
                        ));
                    }
                    out.verification_status = Some(value.to_string());
                }
                "type" => {
                    if !KINDS.contains(&value) {
                        return Err(BadParameter::new("type", format!("type is one of {}", KINDS.join(", "))));
                    }
                    out.kind = Some(value.to_string());
                }
                "verified" => out.verified = boolean("verified", value)?,
                "online" => out.online = boolean("online", value)?,
                "sortBy" => {
                    out.sort_by = Some(match value {
                        "most-recent" => SortBy::MostRecent,
                        "oldest" => SortBy::Oldest,
                        "name" => SortBy::Name,
                        "most-available" => SortBy::MostAvailable,
                        "trust-score" => SortBy::TrustScore,
                        _ => {
                            return Err(BadParameter::new(
                                "sortBy",
                                "sortBy is one of most-recent, oldest, name, most-available, trust-score",
                            ))
                        }
                    })
                }
                "sortOrder" => {
                    out.ascending = Some(match value {
                        "asc" => true,
                        "desc" => false,
                        _ => return Err(BadParameter::new("sortOrder", "sortOrder is asc or desc")),
                    })
                }
                other => {
                    if let Some(path) = other.strip_prefix("metadata.") {
                        let path: Vec<String> = path.split('.').map(str::to_string).collect();
                        if path.iter().any(String::is_empty) {
                            return Err(BadParameter::new("metadata", format!("{other} is not a metadata path")));
                        }
                        out.metadata.entry(path).or_default().push(value.to_string());
                    }
                }
            }
        }
        Ok(out)
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

/// The agents of a build, held for search: the records, their text index,
/// and the columns filters and sorts read, interned or ranked once so that
/// a search touching every agent compares integers.
pub struct AgentIndex {
    pub agents: Vec<Agent>,
    pub text: TextIndex,
    names: Names,
    registry: Vec<u16>,
    adapter: Vec<u16>,
    protocols: Vec<Vec<u16>>,
    kind: Vec<u16>,
    verification: Vec<u16>,
    /// Bit `c` set when the agent has capability code `c`.
    capabilities: Vec<u32>,
    /// Capability slug (of a label) to code.
    capability_codes: BTreeMap<String, u8>,
    /// Dense ranks: equal keys share a rank.
    updated_rank: Vec<u32>,
    created_rank: Vec<u32>,
    name_rank: Vec<u32>,
    available_rank: Vec<u32>,
    id_rank: Vec<u32>,
    /// Metadata flattened by dot-separated path: the distinct values seen,
    /// and per agent the ids of its values (several for an array).
    metadata: BTreeMap<String, MetadataColumn>,
    /// Trust signal name to each agent's value (NaN when it has none).
    signals: BTreeMap<String, Vec<f64>>,
}

#[derive(Default)]
struct MetadataColumn {
    values: Vec<String>,
    lookup: BTreeMap<String, u32>,
    per_agent: Vec<Vec<u32>>,
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

/// Interned strings of each categorical column.
#[derive(Default)]
struct Names {
    registries: Vec<String>,
    adapters: Vec<String>,
    protocols: Vec<String>,
    kinds: Vec<String>,
    verification: Vec<String>,
}

fn intern(names: &mut Vec<String>, lookup: &mut BTreeMap<String, u16>, value: &str) -> u16 {
    *lookup.entry(value.to_string()).or_insert_with(|| {
        names.push(value.to_string());
        (names.len() - 1) as u16
    })
}

/// Dense ranks of `keys` (ascending).
fn ranks<K: Ord>(keys: Vec<K>) -> Vec<u32> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|a, b| keys[*a].cmp(&keys[*b]));
    let mut out = vec![0u32; keys.len()];
    let mut rank = 0u32;
    for (n, i) in order.iter().enumerate() {
        if n > 0 && keys[order[n - 1]] != keys[*i] {
            rank += 1;
        }
        out[*i] = rank;
    }
    out
}

impl AgentIndex {
    pub fn build(agents: Vec<Agent>) -> AgentIndex {
        let text = TextIndex::build(&agents);
        let mut names = Names::default();
        let mut lookups: [BTreeMap<String, u16>; 5] = Default::default();
        let mut capability_codes = BTreeMap::new();
        let (mut registry, mut adapter, mut protocols, mut kind, mut verification, mut capabilities) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for agent in &agents {
            registry.push(intern(&mut names.registries, &mut lookups[0], &agent.registry.to_lowercase()));
            adapter.push(intern(&mut names.adapters, &mut lookups[1], &agent.adapter.to_lowercase()));
            protocols.push(
                agent
                    .protocols
                    .iter()
                    .map(|p| intern(&mut names.protocols, &mut lookups[2], &p.to_lowercase()))
                    .collect(),
            );
            kind.push(intern(&mut names.kinds, &mut lookups[3], &agent.kind));
            verification.push(intern(&mut names.verification, &mut lookups[4], &agent.verification_status));
            capabilities.push(agent.capabilities.iter().fold(0u32, |bits, c| bits | 1 << c));
            for (code, label) in agent.capabilities.iter().zip(&agent.capability_labels) {
                capability_codes.entry(slug(label)).or_insert(*code);
            }
        }
        let updated_rank = ranks(agents.iter().map(|a| a.updated_at.as_str()).collect());
        let created_rank = ranks(agents.iter().map(|a| a.created_at.as_str()).collect());
        let name_rank = ranks(agents.iter().map(|a| a.name.to_lowercase()).collect());
        let available_rank = ranks(
            agents
                .iter()
                .map(|a| (a.available, (a.trust_signals.get("uptime").copied().unwrap_or(0.0) * 1000.0) as i64))
                .collect(),
        );
        let id_rank = ranks(agents.iter().map(|a| a.id.as_str()).collect());
        let mut metadata: BTreeMap<String, MetadataColumn> = BTreeMap::new();
        for (i, agent) in agents.iter().enumerate() {
            flatten("", &agent.metadata, &mut |path, value| {
                let column = metadata.entry(path.to_string()).or_insert_with(|| MetadataColumn {
                    per_agent: vec![Vec::new(); agents.len()],
                    ..MetadataColumn::default()
                });
                let id = *column.lookup.entry(value.clone()).or_insert_with(|| {
                    column.values.push(value);
                    (column.values.len() - 1) as u32
                });
                column.per_agent[i].push(id);
            });
        }
        let mut signals: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (i, agent) in agents.iter().enumerate() {
            for (name, value) in &agent.trust_signals {
                signals.entry(name.clone()).or_insert_with(|| vec![f64::NAN; agents.len()])[i] = *value;
            }
        }
        AgentIndex {
            signals,
            metadata,
            text,
            names,
            registry,
            adapter,
            protocols,
            kind,
            verification,
            capabilities,
            capability_codes,
            updated_rank,
            created_rank,
            name_rank,
            available_rank,
            id_rank,
            agents,
        }
    }
}

/// A query's filters resolved against an index's interned names.
struct Filters<'a> {
    query: &'a SearchQuery,
    /// `None`: no filter; `Some(ids)`: the agent's value must be one of them.
    registries: Option<Vec<u16>>,
    adapters: Option<Vec<u16>>,
    protocols: Option<Vec<u16>>,
    kind: Option<Vec<u16>>,
    verification: Option<Vec<u16>>,
    /// Every bit must be set; `None` when a capability names nothing.
    capabilities: Option<u32>,
    /// Per `minSignals` entry: the signal's column (`None`: no agent has
    /// it) and the minimum.
    signals: Vec<(Option<&'a Vec<f64>>, f64)>,
    /// Per metadata path in the query: its column and which of its values
    /// match a pattern (`None`: no agent has the path).
    metadata: Vec<Option<(&'a MetadataColumn, Vec<bool>)>>,
}

impl<'a> Filters<'a> {
    fn new(index: &'a AgentIndex, query: &'a SearchQuery) -> Filters<'a> {
        let resolve = |wanted: &[String], names: &[String]| -> Option<Vec<u16>> {
            (!wanted.is_empty()).then(|| {
                (0..names.len() as u16)
                    .filter(|i| wanted.iter().any(|w| w.eq_ignore_ascii_case(&names[*i as usize])))
                    .collect()
            })
        };
        let one = |wanted: &Option<String>| wanted.iter().cloned().collect::<Vec<_>>();
        let mut bits = Some(0u32);
        for wanted in &query.capabilities {
            let code =
                wanted.parse::<u8>().ok().filter(|c| *c < 32).or_else(|| index.capability_codes.get(wanted).copied());
            bits = match (bits, code) {
                (Some(b), Some(c)) => Some(b | 1 << c),
                _ => None,
            };
        }
        Filters {
            query,
            registries: resolve(&query.registries, &index.names.registries),
            adapters: resolve(&query.adapters, &index.names.adapters),
            protocols: resolve(&query.protocols, &index.names.protocols),
            kind: resolve(&one(&query.kind), &index.names.kinds),
            verification: resolve(&one(&query.verification_status), &index.names.verification),
            capabilities: bits,
            signals: query.min_signals.iter().map(|(k, min)| (index.signals.get(k), *min)).collect(),
            metadata: query
                .metadata
                .iter()
                .map(|(path, patterns)| {
                    let column = index.metadata.get(&path.join("."))?;
                    let matching = column.values.iter().map(|v| patterns.iter().any(|p| glob(p, v))).collect();
                    Some((column, matching))
                })
                .collect(),
        }
    }

    /// Whether agent `i` passes every filter.
    fn keeps(&self, index: &AgentIndex, i: usize) -> bool {
        let q = self.query;
        let within = |ids: &Option<Vec<u16>>, value: u16| ids.as_ref().is_none_or(|ids| ids.contains(&value));
        let Some(bits) = self.capabilities else { return false };
        within(&self.registries, index.registry[i])
            && within(&self.adapters, index.adapter[i])
            && within(&self.kind, index.kind[i])
            && within(&self.verification, index.verification[i])
            && self.protocols.as_ref().is_none_or(|ids| index.protocols[i].iter().any(|p| ids.contains(p)))
            && index.capabilities[i] & bits == bits
            && (!q.online || index.agents[i].available)
            && (!q.verified || index.agents[i].verification_status == "registered")
            && q.min_trust.is_none_or(|t| index.agents[i].trust_score >= t)
            && self.signals.iter().all(|(column, min)| column.is_some_and(|c| c[i] >= *min))
            && self.metadata.iter().all(|resolved| {
                resolved
                    .as_ref()
                    .is_some_and(|(column, matching)| column.per_agent[i].iter().any(|id| matching[*id as usize]))
            })
    }
}

/// One page of a search, as indices into the agents.
#[derive(Debug, PartialEq)]
pub struct Page {
    pub hits: Vec<usize>,
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

/// Agents passing every filter of `query` (its `q` aside), in index order.
pub fn filtered(index: &AgentIndex, query: &SearchQuery) -> Vec<usize> {
    let filters = Filters::new(index, query);
    (0..index.agents.len()).filter(|i| filters.keeps(index, *i)).collect()
}

/// Runs `query` over the index.
pub fn search(index: &AgentIndex, query: &SearchQuery) -> Page {
    let filters = Filters::new(index, query);
    let mut scored: Vec<(usize, f32)> = match &query.q {
        Some(q) => index
            .text
            .search(q)
            .into_iter()
            .map(|(doc, score)| (doc as usize, score))
            .filter(|(doc, _)| filters.keeps(index, *doc))
            .collect(),
        None => (0..index.agents.len()).filter(|i| filters.keeps(index, *i)).map(|i| (i, 0.0)).collect(),
    };
    let aggregations = query.include_aggregations.then(|| {
        let names = &index.names;
        let mut counts: [Vec<usize>; 5] = [
            vec![0; names.registries.len()],
            vec![0; names.adapters.len()],
            vec![0; names.protocols.len()],
            vec![0; names.kinds.len()],
            vec![0; names.verification.len()],
        ];
        let mut capabilities = [0usize; 32];
        for (i, _) in &scored {
            counts[0][index.registry[*i] as usize] += 1;
            counts[1][index.adapter[*i] as usize] += 1;
            for p in &index.protocols[*i] {
                counts[2][*p as usize] += 1;
            }
            counts[3][index.kind[*i] as usize] += 1;
            counts[4][index.verification[*i] as usize] += 1;
            let mut bits = index.capabilities[*i];
            while bits != 0 {
                capabilities[bits.trailing_zeros() as usize] += 1;
                bits &= bits - 1;
            }
        }
        let named = |values: &[String], counts: &[usize]| -> BTreeMap<String, usize> {
            values.iter().zip(counts).filter(|(_, n)| **n > 0).map(|(k, n)| (k.clone(), *n)).collect()
        };
        let labels: BTreeMap<u8, &String> = index.capability_codes.iter().map(|(slug, code)| (*code, slug)).collect();
        Aggregations {
            registries: named(&names.registries, &counts[0]),
            adapters: named(&names.adapters, &counts[1]),
            protocols: named(&names.protocols, &counts[2]),
            kinds: named(&names.kinds, &counts[3]),
            verification: named(&names.verification, &counts[4]),
            capabilities: capabilities
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(code, n)| (labels.get(&(code as u8)).map_or(code.to_string(), |l| l.to_string()), *n))
                .collect(),
        }
    });
    let total = scored.len();
    let by_relevance = query.q.is_some() && query.sort_by.is_none();
    let sort_by = query.sort_by.unwrap_or(SortBy::MostRecent);
    // Natural directions; `sortOrder` overrides.
    let natural_ascending = matches!(sort_by, SortBy::Oldest | SortBy::Name);
    let ascending = query.ascending.unwrap_or(natural_ascending);
    let order = |a: &(usize, f32), b: &(usize, f32)| {
        let (x, y) = (a.0, b.0);
        let primary = if by_relevance {
            b.1.total_cmp(&a.1)
        } else {
            let forward = match sort_by {
                SortBy::MostRecent => index.updated_rank[x].cmp(&index.updated_rank[y]),
                SortBy::Oldest => index.created_rank[x].cmp(&index.created_rank[y]),
                SortBy::Name => index.name_rank[x].cmp(&index.name_rank[y]),
                SortBy::MostAvailable => index.available_rank[x].cmp(&index.available_rank[y]),
                SortBy::TrustScore => index.agents[x].trust_score.total_cmp(&index.agents[y].trust_score),
            };
            if ascending {
                forward
            } else {
                forward.reverse()
            }
        };
        primary.then_with(|| index.id_rank[x].cmp(&index.id_rank[y]))
    };
    let start = (query.page - 1).saturating_mul(query.limit);
    let end = start.saturating_add(query.limit).min(total);
    let hits = if start >= total {
        Vec::new()
    } else {
        // Only the first `end` need ordering.
        if end < scored.len() {
            scored.select_nth_unstable_by(end - 1, order);
            scored.truncate(end);
        }
        scored.sort_unstable_by(order);
        scored[start..].iter().map(|(i, _)| *i).collect()
    };
    Page { hits, total, page: query.page, limit: query.limit, aggregations }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::generate::agents;

    fn run(agents: &[Agent], raw: &str) -> Page {
        let index = AgentIndex::build(agents.to_vec());
        search(&index, &SearchQuery::parse(raw).unwrap())
    }

    #[test]
    fn parameters_outside_their_bounds_name_themselves() {
        let check = |raw: &str, parameter: Option<&str>| {
            let got = SearchQuery::parse(raw).err().map(|e| e.parameter);
            assert_eq!(got, parameter, "{raw}");
        };
        check("", None);
        check("page=1&limit=500&minTrust=0&minTrust=100", None);
        check("page=0", Some("page"));
        check("page=x", Some("page"));
        check("limit=0", Some("limit"));
        check("limit=501", Some("limit"));
        check("minTrust=-1", Some("minTrust"));
        check("minTrust=100.5", Some("minTrust"));
        check("minSignals=uptime", Some("minSignals"));
        check("minSignals=uptime:high", Some("minSignals"));
        check("minSignals=uptime:90,feedback:50", None);
        check("verificationStatus=verified", Some("verificationStatus"));
        check("type=bots", Some("type"));
        check("verified=yes", Some("verified"));
        check("online=1", Some("online"));
        check("includeAggregations=TRUE", Some("includeAggregations"));
        check("sortBy=popular", Some("sortBy"));
        check("sortOrder=up", Some("sortOrder"));
        check("metadata..x=1", Some("metadata"));
        check("unknown=whatever", None);
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

    /// Who a filter should keep, stated independently of `keeps`.
    type Oracle = Box<dyn Fn(&Agent) -> bool>;

    #[test]
    fn every_filter_keeps_exactly_the_matching_agents() {
        let set = agents(400, 5);
        // Each case: the query, and an independent statement of who matches.
        let cases: Vec<(&str, Oracle)> = vec![
            ("registries=olas,nanda", Box::new(|a| a.registry == "olas" || a.registry == "nanda")),
            ("adapters=mcp-adapter", Box::new(|a| a.adapter == "mcp-adapter")),
            ("adapter=hcs10-adapter", Box::new(|a| a.adapter == "hcs10-adapter")),
            ("protocols=a2a", Box::new(|a| a.protocols.contains(&"a2a".into()))),
            (
                "capabilities=0,Knowledge%20Retrieval",
                Box::new(|a| a.capabilities.contains(&0) && a.capabilities.contains(&7)),
            ),
            ("capabilities=code-generation", Box::new(|a| a.capabilities.contains(&4))),
            ("minTrust=70", Box::new(|a| a.trust_score >= 70.0)),
            (
                "minSignals=uptime:95,verifiedOwner:100",
                Box::new(|a| a.trust_signals["uptime"] >= 95.0 && a.trust_signals["verifiedOwner"] >= 100.0),
            ),
            ("verificationStatus=pending", Box::new(|a| a.verification_status == "pending")),
            ("type=mcp-servers", Box::new(|a| a.kind == "mcp-servers")),
            ("verified=true", Box::new(|a| a.verification_status == "registered")),
            ("verified=false", Box::new(|_| true)),
            ("online=true", Box::new(|a| a.available)),
            ("metadata.isFree=true", Box::new(|a| a.metadata["isFree"] == true)),
            ("metadata.isFree=false", Box::new(|a| a.metadata["isFree"] == false)),
            ("metadata.deployment.region=eu-*", Box::new(|a| a.metadata["deployment"]["region"] == "eu-west")),
            (
                "metadata.category=finance&metadata.category=security",
                Box::new(|a| a.metadata["category"] == "finance" || a.metadata["category"] == "security"),
            ),
            (
                "metadata.languages=de&metadata.pricing.model=free",
                Box::new(|a| {
                    a.metadata["languages"].as_array().unwrap().contains(&"de".into())
                        && a.metadata["pricing"]["model"] == "free"
                }),
            ),
            ("metadata.nothing=*", Box::new(|_| false)),
        ];
        for (raw, matches) in cases {
            let page = run(&set, &format!("{raw}&limit=500"));
            let expected = set.iter().filter(|a| matches(a)).count();
            assert_eq!(page.total, expected, "{raw}");
            assert!(expected == 0 || expected < set.len() || raw.contains("false"), "{raw} filters nothing");
            assert!(page.hits.iter().all(|i| matches(&set[*i])), "{raw}");
            assert_eq!(page.hits.len(), expected.min(500), "{raw}");
        }
    }

    #[test]
    fn sorts_pages_and_aggregations() {
        let set = agents(300, 9);
        let ids = |raw: &str| run(&set, raw).hits.iter().map(|i| set[*i].id.clone()).collect::<Vec<_>>();
        let mut by_updated: Vec<&Agent> = set.iter().collect();
        by_updated.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.id.cmp(&b.id)));
        let expected: Vec<String> = by_updated.iter().take(20).map(|a| a.id.clone()).collect();
        assert_eq!(ids(""), expected, "most-recent is the default");
        let check_sorted = |raw: &str, key: &dyn Fn(&Agent) -> f64, ascending: bool| {
            let page = run(&set, &format!("{raw}&limit=300"));
            let values: Vec<f64> = page.hits.iter().map(|i| key(&set[*i])).collect();
            let ok = values.windows(2).all(|w| if ascending { w[0] <= w[1] } else { w[0] >= w[1] });
            assert!(ok, "{raw}");
        };
        check_sorted("sortBy=trust-score", &|a| a.trust_score, false);
        check_sorted("sortBy=trust-score&sortOrder=asc", &|a| a.trust_score, true);
        let names = ids("sortBy=name&limit=300");
        let mut sorted: Vec<(String, String)> = set.iter().map(|a| (a.name.to_lowercase(), a.id.clone())).collect();
        sorted.sort();
        assert_eq!(names, sorted.into_iter().map(|(_, id)| id).collect::<Vec<_>>());
        let oldest = run(&set, "sortBy=oldest&limit=1").hits[0];
        assert_eq!(set[oldest].created_at, set.iter().map(|a| a.created_at.clone()).min().unwrap());
        let available = run(&set, "sortBy=most-available&limit=300");
        let first_offline = available.hits.iter().position(|i| !set[*i].available).unwrap();
        assert!(available.hits[first_offline..].iter().all(|i| !set[*i].available));

        // Pages tile the ordered result; past the end is empty.
        let all = ids("limit=300");
        let pages: Vec<String> = (1..=15).flat_map(|p| ids(&format!("limit=20&page={p}"))).collect();
        assert_eq!(pages, all);
        assert!(ids("page=16&limit=20").is_empty());
        assert_eq!(run(&set, "page=99").total, 300);

        // Relevance: the top hit of a query has the query's term.
        let top = run(&set, "q=translator").hits[0];
        assert!(set[top].name.to_lowercase().contains("translator"));
        // An explicit sortBy orders the matching set instead.
        let relevant = run(&set, "q=translator&sortBy=trust-score&limit=300");
        let scores: Vec<f64> = relevant.hits.iter().map(|i| set[*i].trust_score).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]));

        // Aggregations count the whole filtered set, and can be left out.
        let page = run(&set, "registries=hashgraph-online");
        let aggregations = page.aggregations.unwrap();
        assert_eq!(aggregations.registries.get("hashgraph-online"), Some(&page.total));
        assert_eq!(aggregations.kinds.values().sum::<usize>(), page.total);
        assert!(run(&set, "includeAggregations=false").aggregations.is_none());
    }
}
