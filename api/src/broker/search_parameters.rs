//! The search parameters of `GET /search`, `GET /registries/{registry}/search`
//! and `POST /search/capabilities`: a query string read into the search
//! crate's [`SearchQuery`], each parameter within its bounds, a bad one a
//! 400 naming it. Lists may be given comma-separated or as repeated keys (as
//! the reference client sends them); every other parameter once.

use broker_model::{KINDS, VERIFICATION};
use search::query::{slug, SearchQuery, SortBy, MAX_LIMIT};
use shared::http::BadParameter;

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

/// Parameters of one value.
const SINGLE: [&str; 11] = [
    "q",
    "page",
    "limit",
    "minTrust",
    "includeAggregations",
    "verificationStatus",
    "type",
    "verified",
    "online",
    "sortBy",
    "sortOrder",
];

/// Reads a raw query string. Unknown parameters are ignored; one of a
/// single value given twice is refused.
pub fn parse(raw: &str) -> Result<SearchQuery, BadParameter> {
    let mut out = SearchQuery::default();
    let mut seen = Vec::new();
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        // Lists (and metadata paths) may be given as repeated keys, as
        // the reference client sends them; every other parameter once.
        if let Some(single) = SINGLE.iter().find(|s| **s == key) {
            if seen.contains(single) {
                return Err(BadParameter::repeated(single));
            }
            seen.push(single);
        }
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
                out.min_trust = Some(
                    value
                        .parse::<f64>()
                        .ok()
                        .filter(|t| (0.0..=100.0).contains(t))
                        .ok_or_else(|| BadParameter::new("minTrust", "minTrust must be a number from 0 to 100"))?,
                )
            }
            "minSignals" => {
                for part in list(value) {
                    let parsed = part
                        .split_once(':')
                        .and_then(|(k, v)| Some((k.trim().to_string(), v.trim().parse::<f64>().ok()?)))
                        .filter(|(k, v)| !k.is_empty() && v.is_finite());
                    let pair = parsed
                        .ok_or_else(|| BadParameter::new("minSignals", "minSignals is a list of <signalKey>:<min>"))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use broker_model::generate::agents;
    use broker_model::Agent;
    use search::columns::TRUST_STEPS;
    use search::query::{search, AgentIndex, Page};

    fn run(agents: &[Agent], raw: &str) -> Page {
        let index = AgentIndex::build(agents.to_vec());
        search(&index, &parse(raw).unwrap())
    }

    #[test]
    fn parameters_outside_their_bounds_name_themselves() {
        let check = |raw: &str, parameter: Option<&str>| {
            let got = parse(raw).err().map(|e| e.parameter);
            assert_eq!(got, parameter, "{raw}");
        };
        check("", None);
        check("page=1&limit=500&minTrust=0", None);
        check("minTrust=100", None);
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
        // One value each, unless a list: repeated lists add up.
        check("limit=5&limit=5", Some("limit"));
        check("q=a&q=b", Some("q"));
        check("sortBy=name&sortBy=name", Some("sortBy"));
        check("registries=a&registries=b&capabilities=x&capabilities=y&protocols=p&protocols=q", None);
        check("metadata.region=eu&metadata.region=us&minSignals=a:1&minSignals=b:2", None);
        let lists = parse("registries=a&registries=b,c").unwrap();
        assert_eq!(lists.registries, ["a", "b", "c"]);
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
            // Fewer kept than trusted enough: tested one by one.
            ("registries=olas&minTrust=20", Box::new(|a| a.registry == "olas" && a.trust_score >= 20.0)),
            ("minTrust=100", Box::new(|a| a.trust_score >= 100.0)),
            (
                "minSignals=uptime:95,verifiedOwner:100",
                Box::new(|a| a.trust_signals["uptime"] >= 95.0 && a.trust_signals["verifiedOwner"] >= 100.0),
            ),
            ("verificationStatus=pending", Box::new(|a| a.verification_status == broker_model::Verification::Pending)),
            ("type=mcp-servers", Box::new(|a| a.kind == broker_model::AgentKind::McpServers)),
            ("verified=true", Box::new(|a| a.verification_status == broker_model::Verification::Registered)),
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
        // Trust thresholds at and between the steps of the trust order,
        // alone (made from a step) and within a narrow filter (tested
        // agent by agent).
        let mut trusts: Vec<f64> = set.iter().map(|a| a.trust_score).collect();
        trusts.sort_by(f64::total_cmp);
        let between = trusts.windows(2).step_by(37).map(|w| (w[0] + w[1]) / 2.0);
        let narrow = |a: &Agent| a.registry == "olas" && a.verification_status == broker_model::Verification::Pending;
        let narrowed: Vec<f64> = set.iter().filter(|a| narrow(a)).map(|a| a.trust_score).collect();
        assert!(!narrowed.is_empty() && narrowed.len() <= set.len() / (2 * TRUST_STEPS));
        let thresholds = [0.0, 100.0].into_iter().chain(trusts.iter().step_by(23).copied()).chain(between);
        for t in thresholds.chain(narrowed) {
            let filters: [(&str, Oracle); 2] =
                [("", Box::new(|_| true)), ("&registries=olas&verificationStatus=pending", Box::new(narrow))];
            for (filter, keeps) in filters {
                let raw = format!("minTrust={t}{filter}&limit=500");
                let expected: Vec<usize> =
                    (0..set.len()).filter(|i| keeps(&set[*i]) && set[*i].trust_score >= t).collect();
                let mut hits = run(&set, &raw).hits;
                hits.sort();
                assert_eq!(hits, expected, "{raw}");
            }
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
