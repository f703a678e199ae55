//! Section A's static routes: catalogs, statistics, facets and one set of
//! files per agent (detail, resolve, ERC-8004 feedback), and the bodies the
//! api makes of agents (similar agents, an agent changed since the build).
//! Pure: sources in, files out. The api answers the parameter sets no file
//! covers (another adapter registry query, a facet list for an unknown
//! adapter) through the same functions.
//!
//! **Routes and file names.** A route is the path as a client sends it:
//! every segment percent-encoded as `encodeURIComponent` does (the
//! reference client's encoding), so a UAID is one segment even when its
//! `nativeId` holds a `/` (the api decodes a path parameter and spells the
//! route again with [`segment`]). A file is named by [`shared::http::file_name`]:
//! `a-z A-Z 0-9 - _` kept, every other byte percent-encoded (no `.`, `/` or
//! `:`, so the name is valid on every file system and object store), and a
//! value whose name would pass 120 bytes is named `~` and 32 hex digits of
//! its SHA-256. `_manifest.json` maps each route to its file.

use std::collections::{BTreeMap, BTreeSet};

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::Serialize;
use serde_json::{json, Value};

use broker_model::catalog::{
    metadata_at, Catalog, Facet, FacetOption, FeedbackEntry, RegistryEntry, FEEDBACK_REGISTRY,
};
use broker_model::Agent;
use search::query::slug;
use shared::http::{file_name, BadParameter, Cache, Representation};
use shared::site::File;
use shared::timestamp::Timestamp;

pub use search::query::SIMILAR_LIMIT;
/// `GET /adapters/registry/adapters` paging.
pub const ENTRIES_DEFAULT_LIMIT: usize = 50;
pub const ENTRIES_MAX_LIMIT: usize = 200;

/// What every route of section A begins with.
pub const API: &str = "/api/v1/";
pub const STATS: &str = "/api/v1/stats";
pub const REGISTRIES: &str = "/api/v1/registries";
pub const ADAPTERS: &str = "/api/v1/adapters";
/// The Programmable Secrets policies the journal described, newest on
/// chain first.
pub const SECRET_POLICIES: &str = "/api/v1/programmable-secrets/catalog";
pub const ADAPTER_DETAILS: &str = "/api/v1/adapters/details";
pub const CATEGORIES: &str = "/api/v1/adapters/registry/categories";
pub const REGISTRY_ADAPTERS: &str = "/api/v1/adapters/registry/adapters";
pub const PROVIDERS: &str = "/api/v1/providers";
pub const POPULAR: &str = "/api/v1/popular";
pub const PROTOCOLS: &str = "/api/v1/protocols";
pub const FACETS: &str = "/api/v1/search/facets";
pub const ADDITIONAL_REGISTRIES: &str = "/api/v1/register/additional-registries";
pub const FEDERATION: &str = "/api/v1/bridge/federation/registries";

/// What `encodeURIComponent` leaves as it is.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// One path segment, encoded as the reference client encodes it.
pub fn segment(value: &str) -> String {
    utf8_percent_encode(value, COMPONENT).to_string()
}

pub fn agent_route(uaid: &str) -> String {
    format!("/api/v1/agents/{}", segment(uaid))
}

pub fn resolve_route(uaid: &str) -> String {
    format!("/api/v1/resolve/{}", segment(uaid))
}

pub fn feedback_route(uaid: &str, include_revoked: bool) -> String {
    let plain = format!("{}/feedback", agent_route(uaid));
    match include_revoked {
        true => format!("{plain}?includeRevoked=true"),
        false => plain,
    }
}

pub fn facets_route(adapter: Option<&str>) -> String {
    match adapter {
        Some(a) => format!("{FACETS}?adapter={}", segment(a)),
        None => FACETS.to_string(),
    }
}

/// RFC 3339 text (validated with the sources) to a timestamp.
pub fn time(text: &str) -> Timestamp {
    let at = chrono::DateTime::parse_from_rfc3339(text).expect("times are validated with the sources");
    Timestamp(at.timestamp().max(0) as u64 * 1_000_000_000)
}

fn file(route: String, path: String, value: &impl Serialize, last_modified: Timestamp, cache: Cache) -> File {
    File { route, path, representation: Representation::json(value, last_modified, cache) }
}

/// `GET /programmable-secrets/catalog`'s body: every policy's view, in the
/// catalog's order.
pub fn secret_policies(policies: &[broker_model::catalog::SecretPolicy]) -> Value {
    let views: Vec<&Value> = policies.iter().map(|p| &p.view).collect();
    json!({"policies": views, "total": views.len()})
}

/// The catalog's time, or the newest change of a policy when later: the
/// Last-Modified of the policies' catalog and of their list's pages.
pub fn secret_policies_time(catalog: &Catalog) -> Timestamp {
    let newest = catalog.secret_policies.iter().map(|p| p.last_modified()).max().unwrap_or_default();
    time(&catalog.updated_at).max(newest)
}

/// Section A's files that are not one agent's (catalogs, statistics,
/// facets), from the tally of every agent.
#[tracing::instrument(level = "debug", skip_all)]
pub fn catalog_files(tally: &Tally, catalog: &Catalog) -> Vec<File> {
    let catalog_time = time(&catalog.updated_at);
    let index_time = tally.newest.unwrap_or(catalog_time);
    let both = catalog_time.max(index_time);
    let adapters = tally.adapter_ids(catalog);
    let fixed = |route: &str, value: Value, at: Timestamp| {
        let path = format!("{}.json", route.trim_start_matches('/'));
        file(route.to_string(), path, &value, at, Cache::Catalog)
    };
    let mut files = vec![
        fixed(STATS, tally.stats(), index_time),
        fixed(REGISTRIES, json!({"registries": tally.registries.keys().collect::<Vec<_>>()}), index_time),
        fixed(ADAPTERS, json!({"adapters": adapters}), both),
        fixed(ADAPTER_DETAILS, json!({"adapters": broker_model::chat::describe(&catalog.adapters)}), catalog_time),
        fixed(CATEGORIES, json!({"categories": catalog.adapter_registry.categories}), catalog_time),
        fixed(REGISTRY_ADAPTERS, registry_adapters(catalog, &EntryQuery::default()), catalog_time),
        fixed(PROVIDERS, providers(catalog), catalog_time),
        fixed(POPULAR, json!({"searches": catalog.popular_searches}), catalog_time),
        fixed(
            PROTOCOLS,
            json!({"protocols": catalog.protocols.iter().map(|p| &p.id).collect::<Vec<_>>()}),
            catalog_time,
        ),
        fixed(ADDITIONAL_REGISTRIES, json!({"registries": catalog.additional_registries}), catalog_time),
        fixed(FEDERATION, serde_json::to_value(&catalog.federation).expect("serialises"), catalog_time),
        fixed(SECRET_POLICIES, secret_policies(&catalog.secret_policies), secret_policies_time(catalog)),
    ];
    for (adapter, body) in tally.facets(catalog, &adapters) {
        let path = match &adapter {
            Some(a) => format!("api/v1/search/facets/adapter/{}.json", file_name(a)),
            None => "api/v1/search/facets.json".to_string(),
        };
        files.push(file(facets_route(adapter.as_deref()), path, &body, both, Cache::Catalog));
    }
    files
}

/// What the files of the whole index count, gathered one agent at a time
/// ([`Tally::add`]): a build never holds every agent to make them. Every
/// set is counted, so an agent can be taken out again ([`Tally::remove`]):
/// a layer over a build whose agents changed updates the build's tally
/// (kept in its warehouse) by the agents that changed.
#[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    pub total: usize,
    /// Agents per registry namespace.
    pub registries: BTreeMap<String, usize>,
    capabilities: BTreeMap<String, usize>,
    kinds: BTreeMap<String, usize>,
    /// Agents per adapter.
    adapters: BTreeMap<String, usize>,
    /// The newest `updatedAt` (text, and as a time): a maximum, so not
    /// kept through [`Tally::remove`] (see [`Tally::dated`]).
    last_update: Option<String>,
    pub newest: Option<Timestamp>,
    /// Per facet of the catalog: agents per adapter it applies to, and per
    /// adapter the options its agents have, with how many have each.
    applies: Vec<BTreeMap<String, usize>>,
    #[serde(with = "options")]
    options: Vec<options::ByAdapter>,
}

/// [`Tally`]'s options in JSON, whose keys are only text: each option as
/// `[value, label, count]`.
mod options {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Per adapter, each (value, label) and how many agents have it.
    pub type ByAdapter = BTreeMap<String, BTreeMap<(String, String), usize>>;
    type Options = Vec<ByAdapter>;
    type Listed = Vec<BTreeMap<String, Vec<(String, String, usize)>>>;

    pub fn serialize<S: Serializer>(options: &Options, serializer: S) -> Result<S::Ok, S::Error> {
        let listed: Listed = options
            .iter()
            .map(|facet| {
                let each = |m: &BTreeMap<(String, String), usize>| {
                    m.iter().map(|((value, label), n)| (value.clone(), label.clone(), *n)).collect()
                };
                facet.iter().map(|(adapter, m)| (adapter.clone(), each(m))).collect()
            })
            .collect();
        listed.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Options, D::Error> {
        let listed = Listed::deserialize(deserializer)?;
        Ok(listed
            .into_iter()
            .map(|facet| {
                let each = |list: Vec<(String, String, usize)>| list.into_iter().map(|(v, l, n)| ((v, l), n)).collect();
                facet.into_iter().map(|(adapter, list)| (adapter, each(list))).collect()
            })
            .collect())
    }
}

/// Adds one to `key`'s count (`+1`) or takes one away (`-1`), dropping a
/// key that reaches zero.
fn count<K, Q>(map: &mut BTreeMap<K, usize>, key: &Q, by: isize)
where
    K: Ord + Clone + std::borrow::Borrow<Q>,
    Q: Ord + ?Sized + ToOwned<Owned = K>,
{
    if by > 0 {
        match map.get_mut(key) {
            Some(n) => *n += 1,
            None => {
                map.insert(key.to_owned(), 1);
            }
        }
    } else if let Some(n) = map.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            map.remove(key);
        }
    }
}

impl Tally {
    pub fn new(catalog: &Catalog) -> Tally {
        Tally {
            applies: vec![BTreeMap::new(); catalog.facets.len()],
            options: vec![BTreeMap::new(); catalog.facets.len()],
            ..Tally::default()
        }
    }

    /// Counts one agent.
    pub fn add(&mut self, catalog: &Catalog, agent: &Agent) {
        self.total += 1;
        self.count(catalog, agent, 1);
        if self.last_update.as_ref().is_none_or(|l| *l < agent.updated_at) {
            self.last_update = Some(agent.updated_at.clone());
        }
        self.newest = self.newest.max(Some(time(&agent.updated_at)));
    }

    /// Takes out one agent counted before. The newest update is then
    /// unknown until [`Tally::dated`] gives it.
    pub fn remove(&mut self, catalog: &Catalog, agent: &Agent) {
        self.total -= 1;
        self.count(catalog, agent, -1);
        (self.last_update, self.newest) = (None, None);
    }

    /// Sets the newest update of the agents counted: the greatest
    /// `updatedAt` text, and the latest of their times (which may be
    /// another's: the texts carry offsets).
    pub fn dated(&mut self, last_update: Option<String>, newest: Option<Timestamp>) {
        (self.last_update, self.newest) = (last_update, newest);
    }

    fn count(&mut self, catalog: &Catalog, agent: &Agent, by: isize) {
        count(&mut self.registries, agent.registry.as_str(), by);
        count(&mut self.kinds, agent.kind.as_str(), by);
        for label in &agent.capability_labels {
            count(&mut self.capabilities, label.as_str(), by);
        }
        count(&mut self.adapters, agent.adapter.as_str(), by);
        self.count_facets(catalog, agent, by);
    }

    /// The newest `updatedAt` of any agent.
    pub fn last_update(&self) -> Option<&str> {
        self.last_update.as_deref()
    }

    /// Adapters found on agents and in the catalog, sorted.
    pub fn adapter_ids(&self, catalog: &Catalog) -> Vec<String> {
        let mut ids: BTreeSet<String> = self.adapters.keys().cloned().collect();
        ids.extend(catalog.adapters.iter().map(|a| a.id.clone()));
        ids.into_iter().collect()
    }

    /// `GET /stats`. `lastUpdate` is the newest agent update, not a clock.
    pub fn stats(&self) -> Value {
        json!({
            "totalAgents": self.total,
            "registries": self.registries,
            "capabilities": self.capabilities,
            "types": self.kinds,
            "lastUpdate": self.last_update.as_deref().unwrap_or("1970-01-01T00:00:00Z"),
            "status": "operational",
        })
    }

    /// One agent's facet values, counted in (`by` 1) or out (-1). Options
    /// are the values agents actually have (capabilities by slug); a facet
    /// applies to the adapters whose agents carry it.
    fn count_facets(&mut self, catalog: &Catalog, agent: &Agent, by: isize) {
        /// A value and its name, where `names` has one.
        fn named<'a>(mut names: impl Iterator<Item = (&'a str, &'a str)>, v: &str) -> (String, String) {
            let name = names.find(|(id, _)| *id == v).map_or(v, |(_, n)| n);
            (v.to_string(), name.to_string())
        }
        for (f, facet) in catalog.facets.iter().enumerate() {
            let values: Vec<(String, String)> = match facet.key.as_str() {
                "registries" => {
                    vec![named(catalog.registries.iter().map(|r| (r.id.as_str(), r.name.as_str())), &agent.registry)]
                }
                "adapters" => {
                    vec![named(catalog.adapters.iter().map(|a| (a.id.as_str(), a.name.as_str())), &agent.adapter)]
                }
                "protocols" => agent
                    .protocols
                    .iter()
                    .map(|p| named(catalog.protocols.iter().map(|c| (c.id.as_str(), c.name.as_str())), p))
                    .collect(),
                "capabilities" => agent.capability_labels.iter().map(|l| (slug(l), l.clone())).collect(),
                "type" => vec![(agent.kind.as_str().to_string(), agent.kind.as_str().to_string())],
                "verificationStatus" => {
                    let status = agent.verification_status.as_str().to_string();
                    vec![(status.clone(), status)]
                }
                key => match key.strip_prefix("metadata.") {
                    Some(path) => scalars(metadata_at(&agent.metadata, path)),
                    None => vec![(String::new(), String::new())],
                },
            };
            if values.is_empty() {
                continue;
            }
            count(&mut self.applies[f], agent.adapter.as_str(), by);
            if facet.kind == "string" {
                let options = match self.options[f].get_mut(&agent.adapter) {
                    Some(options) => options,
                    None => self.options[f].entry(agent.adapter.clone()).or_default(),
                };
                // An agent's values are counted once each, as a set.
                let values: BTreeSet<(String, String)> = values.into_iter().collect();
                for value in &values {
                    count(options, value, by);
                }
                if options.is_empty() {
                    self.options[f].remove(&agent.adapter);
                }
            }
        }
    }

    /// `GET /search/facets` for every adapter (`None`) and for each of
    /// `adapters`. A per-adapter list holds only the facets that apply to
    /// that adapter, with its agents' options.
    pub fn facets(&self, catalog: &Catalog, adapters: &[String]) -> Vec<(Option<String>, Value)> {
        let list = |adapter: Option<&str>| -> Value {
            let mut out = Vec::new();
            for (f, facet) in catalog.facets.iter().enumerate() {
                if self.applies[f].is_empty() || adapter.is_some_and(|a| !self.applies[f].contains_key(a)) {
                    continue;
                }
                let chosen: BTreeSet<&(String, String)> = self.options[f]
                    .iter()
                    .filter(|(a, _)| adapter.is_none_or(|wanted| wanted == a.as_str()))
                    .flat_map(|(_, values)| values.keys())
                    .collect();
                out.push(Facet {
                    adapters: Some(self.applies[f].keys().cloned().collect()),
                    options: (facet.kind == "string").then(|| {
                        chosen
                            .into_iter()
                            .map(|(value, label)| FacetOption { value: value.clone(), label: label.clone() })
                            .collect()
                    }),
                    ..facet.clone()
                });
            }
            json!({"facets": out})
        };
        std::iter::once((None, list(None))).chain(adapters.iter().map(|a| (Some(a.clone()), list(Some(a))))).collect()
    }
}

/// `GET /providers`: adapters, then the protocols messages can be routed over.
pub fn providers(catalog: &Catalog) -> Value {
    let adapters: Vec<Value> = catalog
        .adapters
        .iter()
        .map(|a| {
            json!({"id": a.id, "name": a.name, "protocols": a.supported_protocols,
                "enabled": a.enabled, "status": a.status})
        })
        .collect();
    let protocols: Vec<_> = catalog.protocols.iter().filter(|p| p.routable).collect();
    json!({"providers": adapters, "protocols": protocols})
}

/// A metadata value as facet options: a scalar, or each scalar of an array.
fn scalars(value: Option<&Value>) -> Vec<(String, String)> {
    let one = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(_) | Value::Bool(_) => Some(v.to_string()),
        _ => None,
    };
    match value {
        Some(Value::Array(items)) => items.iter().filter_map(one).map(|s| (s.clone(), s)).collect(),
        Some(v) => one(v).map(|s| (s.clone(), s)).into_iter().collect(),
        None => Vec::new(),
    }
}

/// The query of `GET /adapters/registry/adapters`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryQuery {
    pub category: Option<String>,
    pub entity: Option<String>,
    /// Every keyword must be on the entry.
    pub keywords: Vec<String>,
    /// Free text over id, name, description and keywords.
    pub query: Option<String>,
    pub limit: usize,
    pub offset: usize,
}

impl Default for EntryQuery {
    fn default() -> EntryQuery {
        EntryQuery {
            category: None,
            entity: None,
            keywords: Vec::new(),
            query: None,
            limit: ENTRIES_DEFAULT_LIMIT,
            offset: 0,
        }
    }
}

impl EntryQuery {
    pub fn parse(raw: &str) -> Result<EntryQuery, BadParameter> {
        let mut out = EntryQuery::default();
        for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
            let value = value.trim();
            let text = Some(value.to_string()).filter(|v| !v.is_empty());
            match key.as_ref() {
                "category" => out.category = text,
                "entity" => out.entity = text,
                "keywords" => {
                    out.keywords = value.split(',').map(|k| k.trim().to_lowercase()).filter(|k| !k.is_empty()).collect()
                }
                "query" => out.query = text.map(|q| q.to_lowercase()),
                "limit" => {
                    out.limit = value.parse().ok().filter(|l| (1..=ENTRIES_MAX_LIMIT).contains(l)).ok_or_else(|| {
                        BadParameter::new("limit", format!("limit must be an integer from 1 to {ENTRIES_MAX_LIMIT}"))
                    })?
                }
                "offset" => {
                    out.offset = value
                        .parse()
                        .map_err(|_| BadParameter::new("offset", "offset must be an integer of at least 0"))?
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// `category` names a category by slug or id.
    fn keeps(&self, catalog: &Catalog, e: &RegistryEntry) -> bool {
        let text = |t: &str| t.to_lowercase();
        let category = catalog.adapter_registry.categories.iter().find(|c| c.id == e.category_id);
        self.category.as_ref().is_none_or(|c| category.is_some_and(|x| x.slug == *c || x.id.to_string() == *c))
            && self.entity.as_ref().is_none_or(|x| text(x) == text(&e.entity))
            && self.keywords.iter().all(|k| e.keywords.iter().any(|have| text(have) == *k))
            && self.query.as_ref().is_none_or(|q| {
                [&e.adapter_id, &e.adapter_name, &e.description].iter().any(|f| text(f).contains(q.as_str()))
                    || e.keywords.iter().any(|k| text(k).contains(q.as_str()))
            })
    }
}

/// `GET /adapters/registry/adapters`: matching entries in catalog order.
pub fn registry_adapters(catalog: &Catalog, query: &EntryQuery) -> Value {
    let matching: Vec<&RegistryEntry> =
        catalog.adapter_registry.adapters.iter().filter(|e| query.keeps(catalog, e)).collect();
    let page = published_entries(catalog, matching.iter().skip(query.offset).take(query.limit).copied());
    json!({
        "network": catalog.adapter_registry.network,
        "adapters": page,
        "total": matching.len(),
        "limit": query.limit,
        "offset": query.offset,
    })
}

/// A similar agent: the search hit's main fields and what it shares.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SimilarHit<'a> {
    id: &'a str,
    uaid: &'a str,
    registry: &'a str,
    name: &'a str,
    description: &'a str,
    capabilities: &'a [u8],
    capability_labels: &'a [String],
    protocols: &'a [String],
    adapter: &'a str,
    trust_score: f64,
    available: bool,
    verification_status: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    shared_capabilities: Vec<u8>,
}

/// `GET /agents/{uaid}`: the agent and its trust metadata. Typed and
/// borrowed, so 100k agents serialise without building JSON trees.
#[derive(Serialize)]
struct Detail<'a> {
    agent: &'a Agent,
    trust: Trust<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Trust<'a> {
    score: f64,
    signals: &'a BTreeMap<String, f64>,
    verification_status: &'a str,
    /// The ERC-8004 feedback summary, for ERC-8004 agents.
    feedback: Option<Value>,
}

#[derive(Serialize)]
struct SimilarBody<'a> {
    uaid: &'a str,
    hits: Vec<SimilarHit<'a>>,
    total: usize,
}

/// `GET /resolve/{uaid}`.
#[derive(Serialize)]
struct Resolved<'a> {
    agent: &'a Agent,
}

/// `GET /agents/{uaid}` of one agent, for an answer made live (an agent
/// changed since the build): the same body its file would have.
pub fn detail(agent: &Agent, feedback: &[&FeedbackEntry]) -> Value {
    let summary = (agent.registry == FEEDBACK_REGISTRY).then(|| feedback_summary(feedback));
    let trust = Trust {
        score: agent.trust_score,
        signals: &agent.trust_signals,
        verification_status: agent.verification_status.as_str(),
        feedback: summary,
    };
    serde_json::to_value(Detail { agent, trust }).expect("agents serialise")
}

/// `GET /resolve/{uaid}` of one agent, made live.
pub fn resolved(agent: &Agent) -> Value {
    serde_json::to_value(Resolved { agent }).expect("agents serialise")
}

/// `GET /agents/{uaid}/similar` of `agent`: up to [`SIMILAR_LIMIT`] of
/// `others` ranked by capabilities shared (at least one), then trust
/// score, then id, never the agent itself; dated by the newest `updatedAt`
/// of the agent and those listed. The api answers it from the build's
/// search index and the live agents (`query::similar` finds the
/// candidates): a build writes no list per agent, since one agent joining
/// a capability set's best changes the list of every agent sharing any of
/// it.
pub fn similar<'a>(agent: &Agent, others: impl Iterator<Item = &'a Agent>) -> Representation {
    let mine = mask(agent);
    let rank = |x: &(u32, &Agent), y: &(u32, &Agent)| {
        y.0.cmp(&x.0).then_with(|| y.1.trust_score.total_cmp(&x.1.trust_score)).then_with(|| x.1.id.cmp(&y.1.id))
    };
    let mut top: Vec<(u32, &Agent)> = Vec::with_capacity(SIMILAR_LIMIT + 1);
    for other in others.filter(|o| o.uaid != agent.uaid) {
        let candidate = ((mask(other) & mine).count_ones(), other);
        if candidate.0 == 0 || (top.len() == SIMILAR_LIMIT && rank(&candidate, &top[SIMILAR_LIMIT - 1]).is_ge()) {
            continue;
        }
        let at = top.partition_point(|t| rank(t, &candidate).is_lt());
        top.insert(at, candidate);
        top.truncate(SIMILAR_LIMIT);
    }
    let hits: Vec<SimilarHit> = top.iter().map(|(_, other)| similar_hit(mine, other)).collect();
    let updated = top.iter().map(|(_, other)| time(&other.updated_at)).fold(time(&agent.updated_at), Timestamp::max);
    Representation::json(&SimilarBody { uaid: &agent.uaid, total: hits.len(), hits }, updated, Cache::Agent)
}

/// `other` as a similar agent of one whose capability set is `mine`.
fn similar_hit(mine: u32, other: &Agent) -> SimilarHit<'_> {
    SimilarHit {
        id: &other.id,
        uaid: &other.uaid,
        registry: &other.registry,
        name: &other.name,
        description: &other.description,
        capabilities: &other.capabilities,
        capability_labels: &other.capability_labels,
        protocols: &other.protocols,
        adapter: &other.adapter,
        trust_score: other.trust_score,
        available: other.available,
        verification_status: other.verification_status.as_str(),
        kind: other.kind.as_str(),
        shared_capabilities: other.capabilities.iter().copied().filter(|c| mine & 1 << c != 0).collect(),
    }
}

/// The capability codes of an agent, as bits.
pub fn mask(agent: &Agent) -> u32 {
    agent.capabilities.iter().fold(0, |m, c| m | 1 << c)
}

/// A feedback entry as published: the source record and its registry.
#[derive(Serialize)]
struct PublishedEntry<'a> {
    registry: &'static str,
    #[serde(flatten)]
    entry: &'a FeedbackEntry,
}

/// The newest time an entry was given or revoked.
fn newest_feedback<'a>(entries: &[&'a FeedbackEntry]) -> Option<&'a String> {
    entries.iter().flat_map(|e| std::iter::once(&e.created_at).chain(e.revoked_at.as_ref())).max()
}

/// The summary of an agent's ERC-8004 feedback, over the entries that
/// stand: revoked feedback counts for nothing.
fn feedback_summary(entries: &[&FeedbackEntry]) -> Value {
    let standing: Vec<&&FeedbackEntry> = entries.iter().filter(|e| !e.revoked).collect();
    let average = match standing.is_empty() {
        true => 0.0,
        false => (standing.iter().map(|e| e.score as f64).sum::<f64>() / standing.len() as f64 * 10.0).round() / 10.0,
    };
    let mut summary = json!({
        "averageScore": average,
        "totalFeedbacks": standing.len(),
        "revokedFeedbacks": entries.len() - standing.len(),
        "registry": FEEDBACK_REGISTRY,
    });
    if let Some(network) = entries.first().map(|e| &e.network) {
        summary["network"] = json!(network);
    }
    if let Some(updated) = newest_feedback(entries) {
        summary["updatedAt"] = json!(updated);
    }
    summary
}

/// ERC-8004 feedback of one agent (the reference client's
/// `agentFeedbackResponseSchema`).
fn feedback_body(agent: &Agent, entries: &[&FeedbackEntry], summary: &Value, include_revoked: bool) -> Value {
    let listed: Vec<PublishedEntry> = entries
        .iter()
        .filter(|e| include_revoked || !e.revoked)
        .map(|entry| PublishedEntry { registry: FEEDBACK_REGISTRY, entry })
        .collect();
    json!({
        "uaid": agent.uaid,
        "agentId": agent.original_id.parse::<u64>().ok(),
        "includeRevoked": include_revoked,
        "summary": summary,
        "entries": listed,
    })
}

/// `GET /agents/{uaid}/feedback` of one agent, made live (feedback given
/// since the build): the same body its file would have.
pub fn feedback_live(agent: &Agent, entries: &[&FeedbackEntry], include_revoked: bool) -> Value {
    feedback_body(agent, entries, &feedback_summary(entries), include_revoked)
}

/// The adapter registry entries with their category objects, as the
/// reference client reads them.
fn published_entries<'a>(catalog: &'a Catalog, entries: impl Iterator<Item = &'a RegistryEntry>) -> Vec<Value> {
    entries
        .map(|e| {
            let mut value = serde_json::to_value(e).expect("entries serialise");
            let category = catalog.adapter_registry.categories.iter().find(|c| c.id == e.category_id);
            value["category"] = serde_json::to_value(category).expect("categories serialise");
            value
        })
        .collect()
}

/// The detail, resolve and (for ERC-8004 agents) feedback files of one
/// agent: `entries` are its feedback.
pub fn agent_files(agent: &Agent, entries: &[&FeedbackEntry]) -> Vec<File> {
    let name = file_name(&agent.uaid);
    let updated = time(&agent.updated_at);
    let feedback_time = time(newest_feedback(entries).unwrap_or(&agent.created_at));
    let feedback_summary = (agent.registry == FEEDBACK_REGISTRY).then(|| feedback_summary(entries));
    let detail = Detail {
        agent,
        trust: Trust {
            score: agent.trust_score,
            signals: &agent.trust_signals,
            verification_status: agent.verification_status.as_str(),
            feedback: feedback_summary.clone(),
        },
    };
    let detail_time = match agent.registry == FEEDBACK_REGISTRY {
        true => updated.max(feedback_time),
        false => updated,
    };
    let route = agent_route(&agent.uaid);
    let mut out = vec![
        file(route, format!("api/v1/agents/{name}.json"), &detail, detail_time, Cache::Agent),
        file(
            resolve_route(&agent.uaid),
            format!("api/v1/resolve/{name}.json"),
            &Resolved { agent },
            updated,
            Cache::Agent,
        ),
    ];
    if let Some(summary) = &feedback_summary {
        for (include_revoked, file_path) in [(false, "feedback"), (true, "feedback/revoked")] {
            out.push(file(
                feedback_route(&agent.uaid, include_revoked),
                format!("api/v1/agents/{name}/{file_path}.json"),
                &feedback_body(agent, entries, summary, include_revoked),
                feedback_time,
                Cache::Agent,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Agents taken out of a tally leave it as if they had never been
    /// counted, and a tally reads back as it was written (a layer keeps
    /// its build's in the warehouse).
    #[test]
    fn a_tally_takes_agents_out_again() {
        let catalog = broker_model::generate::checked_in_catalog();
        let agents = broker_model::generate::agents(800, 11);
        let (kept, changed) = agents.split_at(650);
        let tally = |agents: &[Agent]| {
            let mut tally = Tally::new(&catalog);
            agents.iter().for_each(|a| tally.add(&catalog, a));
            tally
        };
        let files = |tally: &Tally| -> Vec<(String, Vec<u8>)> {
            catalog_files(tally, &catalog).into_iter().map(|f| (f.route, f.representation.body)).collect()
        };
        let mut updated = tally(&agents);
        changed.iter().for_each(|a| updated.remove(&catalog, a));
        let last_update = kept.iter().map(|a| a.updated_at.clone()).max();
        updated.dated(last_update, kept.iter().map(|a| time(&a.updated_at)).max());
        assert_eq!(updated, tally(kept));
        assert_eq!(files(&updated), files(&tally(kept)));
        assert_ne!(files(&updated), files(&tally(&agents)), "the agents taken out showed in the files");

        let text = serde_json::to_string(&updated).unwrap();
        assert_eq!(serde_json::from_str::<Tally>(&text).unwrap(), updated);
    }

    /// The similar agents found from the capability sets' best (or, when
    /// too many of those are left out, over every agent's columns) are
    /// those the agents' own ranking picks ([`similar`]), for a
    /// set agents have or not, whatever is left out.
    #[test]
    fn similar_agents_from_the_sets_are_the_agents_own_ranking() {
        use broker_model::generate::agents;
        use search::query::{self, AgentIndex};
        let set = agents(500, 31);
        let index = AgentIndex::build(set.clone());
        let check = |agent: &Agent, skipped: &dyn Fn(usize) -> bool, case: &str| {
            let got: Vec<&str> = query::similar(&index, mask(agent), skipped, SIMILAR_LIMIT)
                .into_iter()
                .map(|i| set[i].id.as_str())
                .collect();
            let kept = set.iter().enumerate().filter(|(i, _)| !skipped(*i)).map(|(_, a)| a);
            let expected: serde_json::Value = serde_json::from_slice(&similar(agent, kept).body).unwrap();
            let expected: Vec<&str> =
                expected["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap()).collect();
            assert_eq!(got, expected, "{case}: {}", agent.id);
            assert_eq!(got.len(), SIMILAR_LIMIT, "{case}: {}", agent.id);
        };
        for (n, agent) in set.iter().enumerate().step_by(37) {
            check(agent, &|i| i == n, "the agent itself");
            // A set's best all left out: found over the columns.
            let best = index.similar_sets().best(&index.columns, mask(agent)).into_owned();
            check(agent, &|i| i == n || best.contains(&(i as u32)), "its set's best");
            check(agent, &|i| i == n || i % 7 == 0, "every seventh");
        }
        // A capability set no agent has (a live agent's) is ranked from the
        // sets agents have.
        let held: std::collections::HashSet<u32> = set.iter().map(mask).collect();
        let mut fresh = agents(1, 99).remove(0);
        assert!(set.iter().all(|a| a.uaid != fresh.uaid));
        fresh.capabilities = (0..19u8).filter(|c| c % 3 == 0).collect();
        assert!(!held.contains(&mask(&fresh)));
        check(&fresh, &|_| false, "a new set");
        assert_eq!(index.similar_sets().len(), held.iter().filter(|m| **m != 0).count());
    }
}
