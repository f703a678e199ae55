//! Hybrid search (`POST /api/v1/search`): the query embedded by an
//! OpenAI-compatible provider, ranked against the build's agent embeddings
//! and fused with the text ranking; and `GET /search/status`, which says
//! whether that is on.

use serde::Deserialize;
use serde_json::{json, Value};
use warp::http::StatusCode;

use super::agents;
use super::agents::Agents;
use super::provider::Vectors;
use crate::reply::{self, Answer, Error};
use crate::request::parse_body;
use crate::request::Request;
use almanac::broker::query::SearchQuery;

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
pub async fn status(request: Request) -> Answer {
    let (_, broker) = agents(&request)?;
    Ok(reply::json(&search_status(broker, request.app.vectors.as_ref())))
}

fn search_status(broker: &Agents, vectors: Option<&Vectors>) -> Value {
    let reason = vector_unavailable(broker, vectors);
    let (mode, enabled, healthy, error) = match vectors {
        None => ("disabled", false, false, None),
        Some(_) if broker.embeddings.is_none() => ("disabled", false, false, None),
        // Embeddings of another model: configured, but unusable.
        Some(_) if reason.is_some() => ("error", true, false, reason.clone()),
        Some(v) => match v.last_error() {
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

fn strings(field: &'static str, value: &Option<Value>) -> Result<Vec<String>, Error> {
    let invalid = || Error::invalid_body(format!("filter.{field} must be a string or a list of strings")).naming(field);
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
pub async fn search(request: Request) -> Answer {
    let started = std::time::Instant::now();
    let (_, broker) = agents(&request)?;
    let vectors = request.app.vectors.as_ref();
    let body: VectorRequest = parse_body(&request.body)?;
    let query = body.query.trim();
    if query.is_empty() {
        return Err(Error::invalid_body("query must not be empty").naming("query"));
    }
    let limit = body.limit.unwrap_or(VECTOR_DEFAULT_LIMIT);
    if !(1..=VECTOR_MAX_LIMIT).contains(&limit) {
        return Err(
            Error::invalid_body(format!("limit must be an integer from 1 to {VECTOR_MAX_LIMIT}")).naming("limit")
        );
    }
    let offset = body.offset.unwrap_or(0);
    let filter = body.filter.unwrap_or_default();
    let mut q = SearchQuery { page: 1, limit: 1, ..Default::default() };
    let lists = (|| -> Result<(), Error> {
        q.capabilities =
            strings("capabilities", &filter.capabilities)?.iter().map(|c| almanac::broker::query::slug(c)).collect();
        q.registries = strings("registry", &filter.registry)?;
        q.protocols = strings("protocols", &filter.protocols)?;
        q.adapters = strings("adapter", &filter.adapter)?;
        let kinds = strings("type", &filter.kind)?;
        if let Some(kind) = kinds.iter().find(|k| !almanac::broker::KINDS.contains(&k.as_str())) {
            let message = format!("filter.type {kind:?} is not one of {}", almanac::broker::KINDS.join(", "));
            return Err(Error::invalid_body(message).naming("type"));
        }
        q.kind = (kinds.len() == 1).then(|| kinds[0].clone());
        Ok(())
    })();
    lists?;
    let (Some(vectors), None) = (vectors, vector_unavailable(broker, vectors)) else {
        let reason = vector_unavailable(broker, vectors).unwrap_or_default();
        let message = format!("vector search is off: {reason}");
        return Err(Error::new(StatusCode::NOT_IMPLEMENTED, "vector_search_unavailable", message));
    };
    let embedded = match vectors.provider.embed(&[query.to_string()]).await {
        Ok(mut v) => {
            vectors.record(None);
            v.remove(0)
        }
        Err(e) => {
            let message = format!("embedding the query failed: {e:#}");
            vectors.record(Some(message.clone()));
            return Err(Error::new(StatusCode::INTERNAL_SERVER_ERROR, "embedding_failed", message));
        }
    };
    let embeddings = broker.embeddings.as_ref().expect("checked above");
    if embeddings.vectors.first().is_some_and(|v| v.len() != embedded.len()) {
        let message = "the query embedding's length differs from the agents'";
        return Err(Error::new(StatusCode::INTERNAL_SERVER_ERROR, "embedding_failed", message));
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
    Ok(reply::json(&body))
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
