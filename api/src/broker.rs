//! Section A's live routes, answered from the agent index the api loads from
//! a build's snapshot (never DuckDB on a request): search, per-registry and
//! capability search, badges, and the parameter sets no file covers. Static
//! routes (catalogs, agent detail, similar, resolve, feedback) are files of
//! the build; this module only finds the right one for a request.
//!
//! **Live overlay.** Every lookup of an agent by UAID goes through
//! [`Broker::agent`], and every search through [`Broker::search`]: the
//! place where agents registered since the build (a later issue) will be
//! consulted before the snapshot's index.

use std::collections::HashMap;

use almanac::broker::catalog::{Catalog, FEEDBACK_REGISTRY};
use almanac::broker::query::{search, AgentIndex, Page, SearchQuery};
use almanac::broker::render::{self, EntryQuery};
use almanac::broker::store::{Embeddings, Stored};
use almanac::broker::Agent;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};
use warp::http::{HeaderMap, Method, StatusCode};
use warp::reply::Response as Reply;

use crate::error::{json_error, method_not_allowed};
use crate::router::{live_bytes, live_json, serve};
use crate::state::Build;

/// Live search answers may be cached briefly: they change with builds.
const SEARCH_CACHE: &str = "public, max-age=30";

/// The broker side of one build.
pub struct Broker {
    pub index: AgentIndex,
    pub catalog: Catalog,
    by_uaid: HashMap<String, u32>,
    /// Each agent's search hit, serialised once.
    hits: Vec<Box<str>>,
    pub embeddings: Option<Embeddings>,
    has_feedback: Vec<bool>,
}

impl Broker {
    pub fn new(stored: Stored) -> Broker {
        let Stored { sources, embeddings } = stored;
        let hits = sources.agents.iter().map(|a| serde_json::to_string(a).expect("agents serialise").into()).collect();
        let by_uaid = sources.agents.iter().enumerate().map(|(i, a)| (a.uaid.clone(), i as u32)).collect();
        let has_feedback = sources.agents.iter().map(|a| a.registry == FEEDBACK_REGISTRY).collect();
        Broker {
            index: AgentIndex::build(sources.agents),
            catalog: sources.catalog,
            by_uaid,
            hits,
            embeddings,
            has_feedback,
        }
    }

    /// The agent with this UAID, if indexed.
    pub fn agent(&self, uaid: &str) -> Option<(usize, &Agent)> {
        let i = *self.by_uaid.get(uaid)? as usize;
        Some((i, &self.index.agents[i]))
    }

    pub fn search(&self, query: &SearchQuery) -> Page {
        search(&self.index, query)
    }

    /// `{hits, total, page, limit}` (and `aggregations` when asked), the
    /// hits spliced from their serialised form.
    fn page_body(&self, page: &Page) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + page.hits.iter().map(|i| self.hits[*i].len() + 1).sum::<usize>());
        out.extend_from_slice(b"{\"hits\":[");
        for (n, i) in page.hits.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(self.hits[*i].as_bytes());
        }
        out.extend_from_slice(
            format!("],\"total\":{},\"page\":{},\"limit\":{}", page.total, page.page, page.limit).as_bytes(),
        );
        if let Some(aggregations) = &page.aggregations {
            out.extend_from_slice(b",\"aggregations\":");
            serde_json::to_writer(&mut out, aggregations).expect("aggregations serialise");
        }
        out.push(b'}');
        out
    }
}

fn bad_parameter(bad: almanac::routes::BadParameter) -> Reply {
    json_error(StatusCode::BAD_REQUEST, "invalid_parameter", &bad.message, Some(bad.parameter))
}

fn readable(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

/// Answers a request under `/api/v1/` (its path in canonical spelling), or
/// `None` when no broker route has that path.
pub fn respond(
    build: &Build,
    method: &Method,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Option<Reply> {
    let broker = build.broker.as_ref()?;
    let file = |route: &str| build.routes.get(route).map(|r| serve(method, headers, r));
    let get_only =
        |answer: &dyn Fn() -> Reply| if readable(method) { answer() } else { method_not_allowed("GET, HEAD, OPTIONS") };
    let reply = match path {
        "/api/v1/search" if method == Method::POST => vector_search(broker, body),
        "/api/v1/search" => get_only(&|| match SearchQuery::parse(query) {
            Ok(q) => live_bytes(broker.page_body(&broker.search(&q)), SEARCH_CACHE),
            Err(bad) => bad_parameter(bad),
        }),
        "/api/v1/search/capabilities" if method == Method::POST => capability_search(broker, body),
        "/api/v1/search/capabilities" => method_not_allowed("POST"),
        "/api/v1/search/status" => get_only(&|| live_json(&search_status(broker), "no-store")),
        "/api/v1/search/facets" => get_only(&|| {
            let adapter = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "adapter").map(|(_, v)| v);
            let adapter = adapter.as_deref().map(str::trim).filter(|a| !a.is_empty());
            file(&render::facets_route(adapter)).unwrap_or_else(|| {
                // An adapter nobody knows has no facets.
                live_json(&json!({"facets": []}), render::CATALOG_CACHE)
            })
        }),
        "/api/v1/agents/badge" => get_only(&|| badge(broker, query)),
        render::REGISTRY_ADAPTERS if !query.is_empty() => get_only(&|| match EntryQuery::parse(query) {
            Ok(q) if q == EntryQuery::default() => {
                file(render::REGISTRY_ADAPTERS).expect("the default query is a file")
            }
            Ok(q) => live_json(&render::registry_adapters(&broker.catalog, &q), render::CATALOG_CACHE),
            Err(bad) => bad_parameter(bad),
        }),
        _ => return agent_route(broker, build, method, path, query, headers),
    };
    Some(reply)
}

/// `/agents/{uaid}[/similar|/feedback]`, `/resolve/{uaid}` and
/// `/registries/{registry}/search`.
fn agent_route(
    broker: &Broker,
    build: &Build,
    method: &Method,
    path: &str,
    query: &str,
    headers: &HeaderMap,
) -> Option<Reply> {
    let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8().ok().map(|d| d.into_owned());
    let parts: Vec<&str> = path.trim_start_matches("/api/v1/").split('/').collect();
    let (kind, uaid) = match parts.as_slice() {
        ["registries", registry, "search"] => {
            let registry = decode(registry)?;
            return Some(match readable(method) {
                true => registry_search(broker, &registry, query),
                false => method_not_allowed("GET, HEAD, OPTIONS"),
            });
        }
        ["agents", uaid] => ("detail", *uaid),
        ["agents", uaid, "similar"] => ("similar", *uaid),
        ["agents", uaid, "feedback"] => ("feedback", *uaid),
        ["resolve", uaid] => ("resolve", *uaid),
        _ => return None,
    };
    if !readable(method) {
        return Some(method_not_allowed("GET, HEAD, OPTIONS"));
    }
    let uaid = decode(uaid)?;
    let Some((i, _)) = broker.agent(&uaid) else {
        return Some(json_error(StatusCode::NOT_FOUND, "agent_not_found", &format!("no indexed agent {uaid}"), None));
    };
    let route = match kind {
        "feedback" => {
            if !broker.has_feedback[i] {
                return Some(json_error(
                    StatusCode::BAD_REQUEST,
                    "feedback_unsupported",
                    &format!("agent {uaid} is not in the {FEEDBACK_REGISTRY} registry and has no ERC-8004 feedback"),
                    None,
                ));
            }
            let include = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "includeRevoked").map(|(_, v)| v);
            let include = match include.as_deref() {
                None | Some("false") => false,
                Some("true") => true,
                Some(_) => {
                    return Some(json_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_parameter",
                        "includeRevoked must be true or false",
                        Some("includeRevoked"),
                    ))
                }
            };
            render::feedback_route(&uaid, include)
        }
        _ => path.to_string(),
    };
    Some(build.routes.get(&route).map(|r| serve(method, headers, r)).unwrap_or_else(|| {
        json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "missing_file",
            &format!("the build has no file for {route}"),
            None,
        )
    }))
}

/// `GET /registries/{registry}/search`: `GET /search`'s parameters within
/// one registry (404 for a registry with no agents).
fn registry_search(broker: &Broker, registry: &str, query: &str) -> Reply {
    if !broker.index.agents.iter().any(|a| a.registry == registry) {
        return json_error(
            StatusCode::NOT_FOUND,
            "registry_not_found",
            &format!("no agents in registry {registry}"),
            None,
        );
    }
    match SearchQuery::parse(query) {
        Ok(mut q) => {
            q.registries = vec![registry.to_string()];
            live_bytes(broker.page_body(&broker.search(&q)), SEARCH_CACHE)
        }
        Err(bad) => bad_parameter(bad),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CapabilityRequest {
    capabilities: Vec<Value>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    page: Option<usize>,
    #[serde(default)]
    registries: Option<Vec<String>>,
    #[serde(default)]
    protocols: Option<Vec<String>>,
    #[serde(default)]
    min_trust: Option<f64>,
}

fn parse_body<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, Reply> {
    serde_json::from_slice(body).map_err(|e| {
        json_error(StatusCode::BAD_REQUEST, "invalid_body", &format!("the request body is not valid: {e}"), None)
    })
}

/// `POST /search/capabilities`: agents advertising every capability named
/// (codes or labels), in `GET /search`'s order and page shape.
fn capability_search(broker: &Broker, body: &Bytes) -> Reply {
    let request: CapabilityRequest = match parse_body(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut raw = form_urlencoded::Serializer::new(String::new());
    let mut names = Vec::new();
    for c in &request.capabilities {
        match c {
            Value::String(s) if !s.trim().is_empty() => names.push(s.trim().to_string()),
            Value::Number(n) if n.as_u64().is_some_and(|n| n <= 18) => names.push(n.to_string()),
            _ => {
                return json_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_body",
                    &format!("capability {c} is neither a label nor a code from 0 to 18"),
                    Some("capabilities"),
                )
            }
        }
    }
    if names.is_empty() {
        return json_error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "capabilities must name at least one",
            Some("capabilities"),
        );
    }
    raw.append_pair("capabilities", &names.join(","));
    for (key, value) in [
        ("limit", request.limit.map(|l| l.to_string())),
        ("page", request.page.map(|p| p.to_string())),
        ("registries", request.registries.map(|r| r.join(","))),
        ("protocols", request.protocols.map(|p| p.join(","))),
        ("minTrust", request.min_trust.map(|m| m.to_string())),
    ] {
        if let Some(value) = value {
            raw.append_pair(key, &value);
        }
    }
    match SearchQuery::parse(&raw.finish()) {
        Ok(mut q) => {
            q.include_aggregations = false;
            live_bytes(broker.page_body(&broker.search(&q)), SEARCH_CACHE)
        }
        Err(bad) => bad_parameter(bad),
    }
}

/// `GET /search/status`.
fn search_status(broker: &Broker) -> Value {
    let _ = broker;
    json!({
        "storageMode": "memory",
        "vectorStatus": {"enabled": false, "healthy": false, "mode": "disabled", "lastUpdated": "1970-01-01T00:00:00Z"},
    })
}

/// `POST /search`: 501 until the deployment has an embedding provider.
fn vector_search(broker: &Broker, body: &Bytes) -> Reply {
    let _ = (broker, body);
    json_error(StatusCode::NOT_IMPLEMENTED, "vector_search_unavailable", "this deployment has no vector search", None)
}

pub const BADGE_STYLES: [&str; 5] = ["flat", "flat-square", "for-the-badge", "plastic", "social"];
pub const BADGE_METRICS: [&str; 5] = ["status", "trust", "registry", "protocol", "availability"];
const BADGE_CACHE_SECONDS: u64 = 300;

/// `GET /agents/badge`: a shields.io endpoint badge for one agent.
fn badge(broker: &Broker, query: &str) -> Reply {
    let params: HashMap<String, String> =
        form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.trim().to_string())).collect();
    let Some(uaid) = params.get("uaid").filter(|u| !u.is_empty()) else {
        return json_error(StatusCode::BAD_REQUEST, "invalid_parameter", "uaid is required", Some("uaid"));
    };
    let metric = params.get("metric").map_or("status", String::as_str);
    if !BADGE_METRICS.contains(&metric) {
        let message = format!("metric must be one of {}", BADGE_METRICS.join(", "));
        return json_error(StatusCode::BAD_REQUEST, "invalid_parameter", &message, Some("metric"));
    }
    let style = params.get("style").map(String::as_str);
    if style.is_some_and(|s| !BADGE_STYLES.contains(&s)) {
        let message = format!("style must be one of {}", BADGE_STYLES.join(", "));
        return json_error(StatusCode::BAD_REQUEST, "invalid_parameter", &message, Some("style"));
    }
    let (default_label, message, color, is_error) = match broker.agent(uaid) {
        None => (metric.to_string(), "not found".to_string(), "lightgrey", true),
        Some((_, a)) => match metric {
            "trust" => (
                "trust".into(),
                format!("{}", a.trust_score),
                match a.trust_score {
                    s if s >= 80.0 => "brightgreen",
                    s if s >= 60.0 => "green",
                    s if s >= 40.0 => "yellow",
                    s if s >= 20.0 => "orange",
                    _ => "red",
                },
                false,
            ),
            "registry" => ("registry".into(), a.registry.clone(), "blue", false),
            "protocol" => ("protocol".into(), a.protocols.join(" | "), "informational", false),
            "availability" => (
                "availability".into(),
                a.availability_status.clone(),
                if a.available { "brightgreen" } else { "lightgrey" },
                false,
            ),
            _ => (
                "status".into(),
                a.verification_status.clone(),
                match a.verification_status.as_str() {
                    "registered" => "brightgreen",
                    "indexed" => "blue",
                    _ => "yellow",
                },
                false,
            ),
        },
    };
    let label = params.get("label").filter(|l| !l.is_empty()).cloned().unwrap_or(default_label);
    let mut body = json!({"schemaVersion": 1, "label": label, "message": message, "color": color,
        "cacheSeconds": BADGE_CACHE_SECONDS});
    if let Some(style) = style {
        body["style"] = json!(style);
    }
    if is_error {
        body["isError"] = json!(true);
    }
    live_json(&body, &format!("public, max-age={BADGE_CACHE_SECONDS}"))
}
