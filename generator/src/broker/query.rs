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

fn bad(parameter: &'static str, message: impl Into<String>) -> BadParameter {
    BadParameter { parameter, message: message.into() }
}

fn list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

fn boolean(parameter: &'static str, value: &str) -> Result<bool, BadParameter> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(parameter, format!("{parameter} must be true or false"))),
    }
}

/// Lower-case words joined by hyphens: `Code Generation` is `code-generation`.
pub fn slug(label: &str) -> String {
    label
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join("-")
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
                        .ok_or_else(|| bad("page", "page must be an integer of at least 1"))?
                }
                "limit" => {
                    out.limit = value
                        .parse()
                        .ok()
                        .filter(|l| (1..=MAX_LIMIT).contains(l))
                        .ok_or_else(|| bad("limit", format!("limit must be an integer from 1 to {MAX_LIMIT}")))?
                }
                "registries" => out.registries.extend(list(value)),
                "adapters" | "adapter" => out.adapters.extend(list(value)),
                "capabilities" => out.capabilities.extend(list(value).iter().map(|c| slug(c))),
                "protocols" => out.protocols.extend(list(value)),
                "minTrust" => {
                    out.min_trust = Some(
                        value
                            .parse::<f64>()
                            .ok()
                            .filter(|t| (0.0..=100.0).contains(t))
                            .ok_or_else(|| bad("minTrust", "minTrust must be a number from 0 to 100"))?,
                    )
                }
                "minSignals" => {
                    for part in list(value) {
                        let parsed = part
                            .split_once(':')
                            .and_then(|(k, v)| Some((k.trim().to_string(), v.trim().parse::<f64>().ok()?)))
                            .filter(|(k, v)| !k.is_empty() && v.is_finite());
                        let pair =
                            parsed.ok_or_else(|| bad("minSignals", "minSignals is a list of <signalKey>:<min>"))?;
                        out.min_signals.push(pair);
                    }
                }
                "includeAggregations" => out.include_aggregations = boolean("includeAggregations", value)?,
                "verificationStatus" => {
                    if !VERIFICATION.contains(&value) {
                        return Err(bad(
                            "verificationStatus",
                            format!("verificationStatus is one of {}", VERIFICATION.join(", ")),
                        ));
                    }
                    out.verification_status = Some(value.to_string());
                }
                "type" => {
                    if !KINDS.contains(&value) {
                        return Err(bad("type", format!("type is one of {}", KINDS.join(", "))));
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
                            return Err(bad(
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
                        _ => return Err(bad("sortOrder", "sortOrder is asc or desc")),
                    })
                }
                other => {
                    if let Some(path) = other.strip_prefix("metadata.") {
                        let path: Vec<String> = path.split('.').map(str::to_string).collect();
                        if path.iter().any(String::is_empty) {
                            return Err(bad("metadata", format!("{other} is not a metadata path")));
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

fn metadata_matches(value: &Value, patterns: &[String]) -> bool {
    match value {
        Value::Array(items) => items.iter().any(|v| metadata_matches(v, patterns)),
        Value::String(s) => patterns.iter().any(|p| glob(p, s)),
        Value::Null | Value::Object(_) => false,
        other => {
            let text = other.to_string();
            patterns.iter().any(|p| glob(p, &text))
        }
    }
}

impl SearchQuery {
    /// Whether `agent` passes every filter.
    pub fn keeps(&self, agent: &Agent) -> bool {
        let any =
            |wanted: &[String], have: &str| wanted.is_empty() || wanted.iter().any(|w| w.eq_ignore_ascii_case(have));
        any(&self.registries, &agent.registry)
            && any(&self.adapters, &agent.adapter)
            && (self.protocols.is_empty() || agent.protocols.iter().any(|p| any(&self.protocols, p)))
            && self.capabilities.iter().all(|wanted| {
                agent
                    .capabilities
                    .iter()
                    .zip(&agent.capability_labels)
                    .any(|(code, label)| *wanted == code.to_string() || *wanted == slug(label))
            })
            && self.min_trust.is_none_or(|t| agent.trust_score >= t)
            && self.min_signals.iter().all(|(k, min)| agent.trust_signals.get(k).is_some_and(|v| v >= min))
            && self.verification_status.as_ref().is_none_or(|v| *v == agent.verification_status)
            && self.kind.as_ref().is_none_or(|k| *k == agent.kind)
            && (!self.verified || agent.verification_status == "registered")
            && (!self.online || agent.available)
            && self.metadata.iter().all(|(path, patterns)| {
                let mut at = Some(&agent.metadata);
                let mut value = None;
                for (i, key) in path.iter().enumerate() {
                    let next = at.and_then(|m| m.get(key));
                    if i + 1 == path.len() {
                        value = next;
                    } else {
                        at = next.and_then(Value::as_object);
                    }
                }
                value.is_some_and(|v| metadata_matches(v, patterns))
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

/// Runs `query` over `agents` (with their text index).
pub fn search(agents: &[Agent], text: &TextIndex, query: &SearchQuery) -> Page {
    let mut scored: Vec<(usize, f32)> = match &query.q {
        Some(q) => text
            .search(q)
            .into_iter()
            .map(|(doc, score)| (doc as usize, score))
            .filter(|(doc, _)| query.keeps(&agents[*doc]))
            .collect(),
        None => (0..agents.len()).filter(|i| query.keeps(&agents[*i])).map(|i| (i, 0.0)).collect(),
    };
    let aggregations = query.include_aggregations.then(|| {
        // Counted on borrowed keys; owned once per distinct key at the end.
        let mut counts: [BTreeMap<&str, usize>; 6] = Default::default();
        for (i, _) in &scored {
            let agent = &agents[*i];
            *counts[0].entry(&agent.registry).or_default() += 1;
            *counts[1].entry(&agent.adapter).or_default() += 1;
            for p in &agent.protocols {
                *counts[2].entry(p).or_default() += 1;
            }
            for label in &agent.capability_labels {
                *counts[3].entry(label).or_default() += 1;
            }
            *counts[4].entry(&agent.kind).or_default() += 1;
            *counts[5].entry(&agent.verification_status).or_default() += 1;
        }
        let [registries, adapters, protocols, capabilities, kinds, verification] =
            counts.map(|m| m.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<BTreeMap<_, _>>());
        Aggregations { registries, adapters, protocols, capabilities, kinds, verification }
    });
    let total = scored.len();
    let by_relevance = query.q.is_some() && query.sort_by.is_none();
    let sort_by = query.sort_by.unwrap_or(SortBy::MostRecent);
    // Natural directions; `sortOrder` overrides.
    let natural_ascending = matches!(sort_by, SortBy::Oldest | SortBy::Name);
    let ascending = query.ascending.unwrap_or(natural_ascending);
    // Sorting by name compares lower-cased names: computed once per agent.
    let lower: BTreeMap<usize, String> = match (by_relevance, sort_by) {
        (false, SortBy::Name) => scored.iter().map(|(i, _)| (*i, agents[*i].name.to_lowercase())).collect(),
        _ => BTreeMap::new(),
    };
    let order = |a: &(usize, f32), b: &(usize, f32)| {
        let (x, y) = (&agents[a.0], &agents[b.0]);
        let primary = if by_relevance {
            b.1.total_cmp(&a.1)
        } else {
            let forward = match sort_by {
                SortBy::MostRecent => x.updated_at.cmp(&y.updated_at),
                SortBy::Oldest => x.created_at.cmp(&y.created_at),
                SortBy::Name => lower[&a.0].cmp(&lower[&b.0]),
                SortBy::MostAvailable => (x.available, x.trust_signals.get("uptime").copied().unwrap_or(0.0))
                    .partial_cmp(&(y.available, y.trust_signals.get("uptime").copied().unwrap_or(0.0)))
                    .unwrap_or(std::cmp::Ordering::Equal),
                SortBy::TrustScore => x.trust_score.total_cmp(&y.trust_score),
            };
            if ascending {
                forward
            } else {
                forward.reverse()
            }
        };
        primary.then_with(|| x.id.cmp(&y.id))
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
        let text = TextIndex::build(agents);
        search(agents, &text, &SearchQuery::parse(raw).unwrap())
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
