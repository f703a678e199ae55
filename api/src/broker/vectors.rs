//! Hybrid search (`POST /api/v1/search`): the query embedded by an
//! OpenAI-compatible provider, ranked against the build's agent embeddings
//! and fused with the text ranking; and `GET /search/status`, which says
//! whether that is on.

use serde::Deserialize;
use serde_json::{json, Value};
use warp::http::StatusCode;

use std::collections::HashMap;
use std::sync::Arc;

use super::agents;
use super::agents::Agents;
use super::provider::Vectors;
use crate::reply::{self, Answer, Error};
use crate::request::parse_body;
use crate::request::Request;
use search::fusion::{fuse, text_scores, Candidate, Vector};
use search::query::{filtered, slug, Hit, SearchQuery};

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
        "agents": broker.index.len(),
        "embeddedAgents": broker.embeddings.as_ref().map_or(0, |e| e.len()),
        "model": broker.embeddings.as_ref().map(|e| e.model.clone()),
        "reason": reason,
    }});
    if let Some(error) = error {
        status["lastError"] = json!(error);
    }
    json!({"storageMode": "memory", "vectorStatus": status})
}

pub const VECTOR_DEFAULT_LIMIT: usize = 10;
pub const VECTOR_MAX_LIMIT: usize = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VectorRequest {
    query: String,
    #[serde(default, deserialize_with = "present")]
    filter: Option<VectorFilter>,
    #[serde(default, deserialize_with = "present")]
    limit: Option<usize>,
    #[serde(default, deserialize_with = "present")]
    offset: Option<usize>,
}

/// An optional field that, when present, must hold a value: `null` is
/// refused (400 naming the field), as the OpenAPI document's types say;
/// leave the field out to take its default.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
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
    let mut q = SearchQuery { limit: 1, ..SearchQuery::default() };
    let lists = (|| -> Result<(), Error> {
        q.capabilities = strings("capabilities", &filter.capabilities)?.iter().map(|c| slug(c)).collect();
        q.registries = strings("registry", &filter.registry)?;
        q.protocols = strings("protocols", &filter.protocols)?;
        q.adapters = strings("adapter", &filter.adapter)?;
        let kinds = strings("type", &filter.kind)?;
        if let Some(kind) = kinds.iter().find(|k| !broker_model::KINDS.contains(&k.as_str())) {
            let message = format!("filter.type {kind:?} is not one of {}", broker_model::KINDS.join(", "));
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
    let embeddings = broker.embeddings.as_ref().expect("checked above");
    let overlay = &request.app.overlay;
    let view = overlay.view();
    let live = view.live(broker);

    // Live agents passing the filters, each with its embedding if made.
    let model = vectors.provider.model();
    let mut live_hits: Vec<LiveHit> = Vec::new();
    if let Some(live) = &live {
        for (k, (index, excluded)) in live.segments().enumerate() {
            let agents = index.records.held_agents().expect("a live segment's agents are held");
            for at in filtered(index, &q).into_iter().filter(|i| !excluded.contains(*i)) {
                let agent = &agents[at];
                let key = embeddings::key(model, &embeddings::text(agent));
                let vector = overlay.embedding(&agent.uaid, &key);
                live_hits.push(LiveHit { hit: Hit { part: k + 1, at }, agent, key, vector });
            }
        }
    }
    // One provider call embeds the query and the live agents not yet embedded.
    let unembedded: Vec<usize> = (0..live_hits.len()).filter(|n| live_hits[*n].vector.is_none()).collect();
    let mut texts = vec![query.to_string()];
    texts.extend(unembedded.iter().map(|n| embeddings::text(live_hits[*n].agent)));
    let mut fresh = match vectors.provider.embed(&texts).await {
        Ok(v) => {
            vectors.record(None);
            v
        }
        Err(e) => {
            let message = format!("embedding the query failed: {e:#}");
            vectors.record(Some(message.clone()));
            return Err(Error::new(StatusCode::INTERNAL_SERVER_ERROR, "embedding_failed", message));
        }
    };
    let embedded = fresh.remove(0);
    let dimensions = if embeddings.is_empty() { embedded.len() } else { embeddings.dimensions() };
    if embedded.len() != dimensions || fresh.iter().any(|v| v.len() != dimensions) {
        let message = "the provider's embeddings differ in length from the build's agents'";
        return Err(Error::new(StatusCode::INTERNAL_SERVER_ERROR, "embedding_failed", message));
    }
    for (n, vector) in unembedded.into_iter().zip(fresh) {
        let hit = &mut live_hits[n];
        let vector: Arc<[f32]> = vector.into();
        overlay.remember(&hit.agent.uaid, hit.key.clone(), vector.clone());
        hit.vector = Some(vector);
    }

    // Candidates: the build's agents the overlay left alone, and the live ones.
    let base_text = text_scores(&broker.index, query, None);
    let mut candidates: Vec<Candidate> = filtered(&broker.index, &q)
        .into_iter()
        .filter(|i| live.as_ref().is_none_or(|l| !l.base_excluded.contains(*i)))
        .map(|at| Candidate {
            hit: Hit { part: 0, at },
            id: broker.index.records.keys(at).id,
            vector: Vector::Mapped(embeddings.get(at)),
            text: base_text.get(&at).copied(),
        })
        .collect();
    if let Some(live) = &live {
        let scores: Vec<HashMap<usize, f32>> =
            live.segments().map(|(index, _)| text_scores(index, query, Some(&broker.index))).collect();
        candidates.extend(live_hits.iter().map(|live| Candidate {
            hit: live.hit,
            id: &live.agent.id,
            vector: Vector::Held(live.vector.as_deref().expect("embedded above")),
            text: scores[live.hit.part - 1].get(&live.hit.at).copied(),
        }));
    }
    let total = candidates.len();
    let hits: Vec<Value> = fuse(&embedded, &candidates)
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|(n, score)| {
            let damaged = |e: anyhow::Error| Error::damaged_record(&e);
            let record = view.hit(broker, candidates[n].hit).map_err(damaged)?;
            let agent: Value = serde_json::from_slice(&record).map_err(|e| damaged(e.into()))?;
            Ok(json!({"agent": agent, "score": score}))
        })
        .collect::<Result<_, Error>>()?;
    let body = json!({"hits": hits, "total": total, "took": started.elapsed().as_millis() as u64});
    Ok(reply::json(&body))
}

/// A live agent passing the filters: where it is, the key of its
/// embedded text, and its embedding once made.
struct LiveHit<'a> {
    hit: Hit,
    agent: &'a broker_model::Agent,
    key: String,
    vector: Option<Arc<[f32]>>,
}
