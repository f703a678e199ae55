//! Section A's live routes, answered from the agent index the api loads from
//! a build's snapshot (never DuckDB on a request): search, per-registry and
//! capability search, badges, and the parameter sets no file covers. Static
//! routes (catalogs, agent detail, similar, resolve, feedback) are files of
//! the build; this module only finds the right one for a request.

use std::collections::HashMap;

use almanac::broker::catalog::FEEDBACK_REGISTRY;
use almanac::broker::embed::Provider;
use almanac::broker::query::SearchQuery;
use almanac::broker::render::{self, EntryQuery};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};
use warp::http::{HeaderMap, Method, StatusCode};

use crate::agents::Agents;
use crate::published::Build;
use crate::reply::{self, method_not_allowed, Reply};

/// Live search answers may be cached briefly: they change with builds.
const SEARCH_CACHE: &str = "public, max-age=30";

fn bad_parameter(bad: almanac::routes::BadParameter) -> Reply {
    reply::error(StatusCode::BAD_REQUEST, "invalid_parameter", &bad.message, Some(bad.parameter))
}

fn readable(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

/// Answers a request under `/api/v1/` (its path in canonical spelling), or
/// `None` when no broker route has that path.
pub fn respond(
    build: &Build,
    vectors: Option<&Vectors>,
    method: &Method,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Option<Reply> {
    let broker = build.broker.as_ref()?;
    let file = |route: &str| build.routes.get(route).map(|r| reply::representation(method, headers, r));
    let get_only =
        |answer: &dyn Fn() -> Reply| if readable(method) { answer() } else { method_not_allowed("GET, HEAD, OPTIONS") };
    let reply = match path {
        "/api/v1/search" => get_only(&|| match SearchQuery::parse(query) {
            Ok(q) => reply::bytes(broker.page_body(&broker.search(&q)), SEARCH_CACHE),
            Err(bad) => bad_parameter(bad),
        }),
        "/api/v1/search/capabilities" if method == Method::POST => capability_search(broker, body),
        "/api/v1/search/capabilities" => method_not_allowed("POST"),
        "/api/v1/search/status" => get_only(&|| reply::json(&search_status(broker, vectors), "no-store")),
        "/api/v1/search/facets" => get_only(&|| {
            let adapter = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "adapter").map(|(_, v)| v);
            let adapter = adapter.as_deref().map(str::trim).filter(|a| !a.is_empty());
            file(&render::facets_route(adapter)).unwrap_or_else(|| {
                // An adapter nobody knows has no facets.
                reply::json(&json!({"facets": []}), render::CATALOG_CACHE)
            })
        }),
        "/api/v1/agents/badge" => get_only(&|| badge(broker, query)),
        render::REGISTRY_ADAPTERS if !query.is_empty() => get_only(&|| match EntryQuery::parse(query) {
            Ok(q) if q == EntryQuery::default() => {
                file(render::REGISTRY_ADAPTERS).expect("the default query is a file")
            }
            Ok(q) => reply::json(&render::registry_adapters(&broker.catalog, &q), render::CATALOG_CACHE),
            Err(bad) => bad_parameter(bad),
        }),
        _ => return agent_route(broker, build, method, path, query, headers),
    };
    Some(reply)
}

/// `/agents/{uaid}[/similar|/feedback]`, `/resolve/{uaid}` and
/// `/registries/{registry}/search`.
fn agent_route(
    broker: &Agents,
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
    let Some((_, agent)) = broker.agent(&uaid) else {
        return Some(reply::error(StatusCode::NOT_FOUND, "agent_not_found", &format!("no indexed agent {uaid}"), None));
    };
    let route = match kind {
        "feedback" => {
            if agent.registry != FEEDBACK_REGISTRY {
                return Some(reply::error(
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
                    return Some(reply::error(
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
    Some(build.routes.get(&route).map(|r| reply::representation(method, headers, r)).unwrap_or_else(|| {
        reply::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "missing_file",
            &format!("the build has no file for {route}"),
            None,
        )
    }))
}

/// `GET /registries/{registry}/search`: `GET /search`'s parameters within
/// one registry (404 for a registry with no agents).
fn registry_search(broker: &Agents, registry: &str, query: &str) -> Reply {
    if !broker.index.has_registry(registry) {
        return reply::error(
            StatusCode::NOT_FOUND,
            "registry_not_found",
            &format!("no agents in registry {registry}"),
            None,
        );
    }
    match SearchQuery::parse(query) {
        Ok(mut q) => {
            q.registries = vec![registry.to_string()];
            reply::bytes(broker.page_body(&broker.search(&q)), SEARCH_CACHE)
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

/// A request body refused with 400 `invalid_body`, made a reply at the edge.
struct InvalidBody {
    message: String,
    parameter: Option<&'static str>,
}

impl InvalidBody {
    fn new(message: impl Into<String>, parameter: Option<&'static str>) -> InvalidBody {
        InvalidBody { message: message.into(), parameter }
    }

    fn reply(self) -> Reply {
        reply::error(StatusCode::BAD_REQUEST, "invalid_body", &self.message, self.parameter)
    }
}

fn parse_body<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, InvalidBody> {
    serde_json::from_slice(body).map_err(|e| InvalidBody::new(format!("the request body is not valid: {e}"), None))
}

/// `POST /search/capabilities`: agents advertising every capability named
/// (codes or labels), in `GET /search`'s order and page shape.
fn capability_search(broker: &Agents, body: &Bytes) -> Reply {
    let request: CapabilityRequest = match parse_body(body) {
        Ok(r) => r,
        Err(invalid) => return invalid.reply(),
    };
    let mut raw = form_urlencoded::Serializer::new(String::new());
    let mut names = Vec::new();
    for c in &request.capabilities {
        match c {
            Value::String(s) if !s.trim().is_empty() => names.push(s.trim().to_string()),
            Value::Number(n) if n.as_u64().is_some_and(|n| n <= 18) => names.push(n.to_string()),
            _ => {
                let message = format!("capability {c} is neither a label nor a code from 0 to 18");
                return InvalidBody::new(message, Some("capabilities")).reply();
            }
        }
    }
    if names.is_empty() {
        return InvalidBody::new("capabilities must name at least one", Some("capabilities")).reply();
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
            reply::bytes(broker.page_body(&broker.search(&q)), SEARCH_CACHE)
        }
        Err(bad) => bad_parameter(bad),
    }
}

/// The api's embedding provider, and how its last call went.
pub struct Vectors {
    pub provider: Provider,
    last_error: std::sync::Mutex<Option<String>>,
}

impl Vectors {
    pub fn new(provider: Provider) -> Vectors {
        Vectors { provider, last_error: Default::default() }
    }
}

/// Why vector search is off for this build, if it is.
fn vector_unavailable(broker: &Agents, vectors: Option<&Vectors>) -> Option<String> {
    let Some(vectors) = vectors else { return Some("the deployment has no embedding provider".into()) };
    match &broker.embeddings {
        None => Some("the build has no agent embeddings".into()),
        Some(e) if e.model != vectors.provider.model() => Some(format!(
            "the build's embeddings are from model {}, queries would be embedded by {}",
            e.model,
            vectors.provider.model()
        )),
        Some(_) => None,
    }
}

/// `GET /search/status`: whether hybrid search is on, and its health.
fn search_status(broker: &Agents, vectors: Option<&Vectors>) -> Value {
    let reason = vector_unavailable(broker, vectors);
    let (mode, enabled, healthy, error) = match vectors {
        None => ("disabled", false, false, None),
        Some(_) if broker.embeddings.is_none() => ("disabled", false, false, None),
        // Embeddings of another model: configured, but unusable.
        Some(_) if reason.is_some() => ("error", true, false, reason.clone()),
        Some(v) => match v.last_error.lock().expect("lock").clone() {
            Some(e) => ("degraded", true, false, Some(e)),
            None => ("healthy", true, true, None),
        },
    };
    let mut status = json!({"enabled": enabled, "healthy": healthy, "mode": mode, "lastUpdated": broker.loaded_at,
    "details": {
        "agents": broker.index.agents.len(),
        "embeddedAgents": broker.embeddings.as_ref().map_or(0, |e| e.vectors.len()),
        "model": broker.embeddings.as_ref().map(|e| e.model.clone()),
        "reason": reason,
    }});
    if let Some(error) = error {
        status["lastError"] = json!(error);
    }
    json!({"storageMode": "memory", "vectorStatus": status})
}

/// Reciprocal rank fusion's constant: how much the top ranks dominate.
const FUSION_K: f64 = 60.0;
pub const VECTOR_DEFAULT_LIMIT: usize = 10;
pub const VECTOR_MAX_LIMIT: usize = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VectorRequest {
    query: String,
    #[serde(default)]
    filter: Option<VectorFilter>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
}

/// Each field a string or a list of strings.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct VectorFilter {
    #[serde(default)]
    capabilities: Option<Value>,
    #[serde(default, rename = "type")]
    kind: Option<Value>,
    #[serde(default)]
    registry: Option<Value>,
    #[serde(default)]
    protocols: Option<Value>,
    #[serde(default)]
    adapter: Option<Value>,
}

fn strings(field: &'static str, value: &Option<Value>) -> Result<Vec<String>, InvalidBody> {
    let invalid = || InvalidBody::new(format!("filter.{field} must be a string or a list of strings"), Some(field));
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Number(n)) => Ok(vec![n.to_string()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                _ => Err(invalid()),
            })
            .collect(),
        Some(_) => Err(invalid()),
    }
}

/// `POST /search`: hybrid search. The query is embedded by the provider;
/// agents passing the filters are ranked by cosine similarity and by BM25F
/// relevance, and the two rankings are fused (reciprocal rank fusion).
/// 501 when the deployment or the build has no vectors (the client then
/// falls back to `GET /search`).
pub async fn vector_search(broker: &Agents, vectors: Option<&Vectors>, body: &Bytes) -> Reply {
    let started = std::time::Instant::now();
    let request: VectorRequest = match parse_body(body) {
        Ok(r) => r,
        Err(invalid) => return invalid.reply(),
    };
    let query = request.query.trim();
    if query.is_empty() {
        return reply::error(StatusCode::BAD_REQUEST, "invalid_body", "query must not be empty", Some("query"));
    }
    let limit = request.limit.unwrap_or(VECTOR_DEFAULT_LIMIT);
    if !(1..=VECTOR_MAX_LIMIT).contains(&limit) {
        let message = format!("limit must be an integer from 1 to {VECTOR_MAX_LIMIT}");
        return reply::error(StatusCode::BAD_REQUEST, "invalid_body", &message, Some("limit"));
    }
    let offset = request.offset.unwrap_or(0);
    let filter = request.filter.unwrap_or_default();
    let mut q = SearchQuery { page: 1, limit: 1, ..Default::default() };
    let lists = (|| -> Result<(), InvalidBody> {
        q.capabilities =
            strings("capabilities", &filter.capabilities)?.iter().map(|c| almanac::broker::query::slug(c)).collect();
        q.registries = strings("registry", &filter.registry)?;
        q.protocols = strings("protocols", &filter.protocols)?;
        q.adapters = strings("adapter", &filter.adapter)?;
        let kinds = strings("type", &filter.kind)?;
        if let Some(kind) = kinds.iter().find(|k| !almanac::broker::KINDS.contains(&k.as_str())) {
            let message = format!("filter.type {kind:?} is not one of {}", almanac::broker::KINDS.join(", "));
            return Err(InvalidBody::new(message, Some("type")));
        }
        q.kind = (kinds.len() == 1).then(|| kinds[0].clone());
        Ok(())
    })();
    if let Err(invalid) = lists {
        return invalid.reply();
    }
    let (Some(vectors), None) = (vectors, vector_unavailable(broker, vectors)) else {
        let reason = vector_unavailable(broker, vectors).unwrap_or_default();
        return reply::error(
            StatusCode::NOT_IMPLEMENTED,
            "vector_search_unavailable",
            &format!("vector search is off: {reason}"),
            None,
        );
    };
    let embedded = match vectors.provider.embed(&[query.to_string()]).await {
        Ok(mut v) => {
            *vectors.last_error.lock().expect("lock") = None;
            v.remove(0)
        }
        Err(e) => {
            let message = format!("embedding the query failed: {e:#}");
            *vectors.last_error.lock().expect("lock") = Some(message.clone());
            return reply::error(StatusCode::INTERNAL_SERVER_ERROR, "embedding_failed", &message, None);
        }
    };
    let embeddings = broker.embeddings.as_ref().expect("checked above");
    if embeddings.vectors.first().is_some_and(|v| v.len() != embedded.len()) {
        let message = "the query embedding's length differs from the agents'";
        return reply::error(StatusCode::INTERNAL_SERVER_ERROR, "embedding_failed", message, None);
    }
    let candidates = almanac::broker::query::filtered(&broker.index, &q);
    let total = candidates.len();
    let fused = fuse(broker, &embeddings.vectors, &embedded, query, candidates);
    let hits: Vec<Value> = fused
        .iter()
        .skip(offset)
        .take(limit)
        .map(|(i, score)| {
            let agent: Value = serde_json::from_str(broker.hit(*i)).expect("hits are JSON");
            json!({"agent": agent, "score": score})
        })
        .collect();
    let body = json!({"hits": hits, "total": total, "took": started.elapsed().as_millis() as u64});
    reply::json(&body, "no-store")
}

/// Reciprocal rank fusion of the cosine ranking and the BM25F ranking over
/// `candidates`; best first, ties by agent id.
fn fuse(broker: &Agents, agents: &[Vec<f32>], query: &[f32], text: &str, candidates: Vec<usize>) -> Vec<(usize, f64)> {
    let index = &broker.index;
    let mut by_vector: Vec<(usize, f32)> =
        candidates.iter().map(|i| (*i, almanac::broker::embed::dot(query, &agents[*i]))).collect();
    by_vector.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| index.agents[a.0].id.cmp(&index.agents[b.0].id)));
    let mut score = vec![0f64; index.agents.len()];
    for (rank, (i, _)) in by_vector.iter().enumerate() {
        score[*i] += 1.0 / (FUSION_K + rank as f64 + 1.0);
    }
    let mut by_text = index.text.search(text);
    by_text.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut keep = vec![false; index.agents.len()];
    candidates.iter().for_each(|i| keep[*i] = true);
    for (rank, (i, _)) in by_text.iter().filter(|(i, _)| keep[*i as usize]).enumerate() {
        score[*i as usize] += 1.0 / (FUSION_K + rank as f64 + 1.0);
    }
    let mut out: Vec<(usize, f64)> = candidates.into_iter().map(|i| (i, score[i])).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| index.agents[a.0].id.cmp(&index.agents[b.0].id)));
    out
}

pub const BADGE_STYLES: [&str; 5] = ["flat", "flat-square", "for-the-badge", "plastic", "social"];
pub const BADGE_METRICS: [&str; 5] = ["status", "trust", "registry", "protocol", "availability"];
const BADGE_CACHE_SECONDS: u64 = 300;

/// `GET /agents/badge`: a shields.io endpoint badge for one agent.
fn badge(broker: &Agents, query: &str) -> Reply {
    let params: HashMap<String, String> =
        form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.trim().to_string())).collect();
    let Some(uaid) = params.get("uaid").filter(|u| !u.is_empty()) else {
        return reply::error(StatusCode::BAD_REQUEST, "invalid_parameter", "uaid is required", Some("uaid"));
    };
    let metric = params.get("metric").map_or("status", String::as_str);
    if !BADGE_METRICS.contains(&metric) {
        let message = format!("metric must be one of {}", BADGE_METRICS.join(", "));
        return reply::error(StatusCode::BAD_REQUEST, "invalid_parameter", &message, Some("metric"));
    }
    let style = params.get("style").map(String::as_str);
    if style.is_some_and(|s| !BADGE_STYLES.contains(&s)) {
        let message = format!("style must be one of {}", BADGE_STYLES.join(", "));
        return reply::error(StatusCode::BAD_REQUEST, "invalid_parameter", &message, Some("style"));
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
    reply::json(&body, &format!("public, max-age={BADGE_CACHE_SECONDS}"))
}
