//! Section A's routes, answered from the agent index the api loads from a
//! build's snapshot (never DuckDB on a request): search, per-registry and
//! capability search, the parameter sets no file covers, UAID validation,
//! similar agents; agent detail, resolution and feedback are files of the
//! build, found here by the decoded UAID. Hybrid search is [`vectors`], the
//! badge [`badge`].

pub mod adapter_registry;
pub mod agents;
pub mod availability;
pub mod badge;
pub mod credits;
pub mod directory;
pub mod encryption;
pub mod feedback;
pub mod hapi;
pub mod inscription;
pub mod intents;
pub mod mirror;
pub mod overlay;
pub mod payments;
pub mod plugins;
pub mod pricing;
pub mod provider;
pub mod register;
pub mod registrar;
pub mod search_parameters;
pub mod secrets;
pub mod skills;
pub mod vectors;
pub mod verification;

use broker_model::catalog::FEEDBACK_REGISTRY;
use broker_site::render;
use search::query::{self, SearchQuery};
use search::segments::Found;
use serde::Deserialize;
use serde_json::{json, Value};
use warp::http::StatusCode;

use crate::published::Build;
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::service::published;
use agents::Agents;

/// The build and its agents; 404 when the build publishes none.
fn agents(request: &Request) -> Result<(&Build, &Agents), Error> {
    let build = request.build()?;
    let agents = build.broker.as_deref().ok_or_else(|| Error::not_found(&request.path))?;
    Ok((build, agents))
}

/// `GET /search`: text search with filters, sorts, pages, aggregations.
pub async fn search(request: Request) -> Answer {
    let query = search_parameters::parse(&request.query)?;
    searched(request, query).await
}

/// [`run_search`] on the search threads ([`crate::pool`]).
async fn searched(request: Request, query: SearchQuery) -> Answer {
    let app = request.app.clone();
    app.searches.run(move || run_search(&request, &query)).await?
}

/// A search's answer (`GET /search`'s body), and whether the live overlay
/// changed it.
struct Searched {
    body: Vec<u8>,
    live: bool,
}

/// A search over the build and the live overlay as one.
fn search_body(request: &Request, query: &SearchQuery) -> Result<Searched, Error> {
    let (_, broker) = agents(request)?;
    let view = request.app.overlay.view();
    let damaged = |e: anyhow::Error| Error::damaged_record(&e);
    Ok(match view.search(broker, query) {
        Some(merged) => Searched { body: view.page_body(broker, &merged).map_err(damaged)?, live: true },
        None => Searched { body: broker.page_body(&broker.search(query)).map_err(damaged)?, live: false },
    })
}

/// [`search_body`] as an answer. One the overlay changed is not kept by
/// shared caches (the next change would not reach them).
fn run_search(request: &Request, query: &SearchQuery) -> Answer {
    let searched = search_body(request, query)?;
    let answer = reply::bytes(searched.body);
    Ok(if searched.live { live(answer) } else { answer })
}

/// The agent whose metadata names `address` (lower-case `0x` hex) as its
/// owner or wallet, an ERC-8004 agent on `chain_id` first: a
/// Programmable Secrets provider's identity, from this broker's own index
/// and overlay. `None` when no agent names it.
pub fn identity_by_wallet(request: &Request, address: &str, chain_id: u64) -> Result<Option<serde_json::Value>, Error> {
    let mut hits = Vec::new();
    for key in ["ownerAddress", "walletAddress"] {
        let mut query = SearchQuery { limit: 80, include_aggregations: false, ..SearchQuery::default() };
        query.metadata.insert(vec![key.to_string()], vec![address.to_string()]);
        let body: serde_json::Value = serde_json::from_slice(&search_body(request, &query)?.body)
            .map_err(|e| Error::bad_answer(format!("a search page is not JSON: {e}")))?;
        hits.extend(body["hits"].as_array().cloned().unwrap_or_default());
    }
    let on_chain = |hit: &serde_json::Value| {
        hit["registry"] == "erc-8004"
            && hit["metadata"]["networkKey"].as_str().is_some_and(|k| k.ends_with(&format!(":{chain_id}")))
    };
    let best = hits
        .iter()
        .find(|h| on_chain(h))
        .or_else(|| hits.iter().find(|h| h["registry"] == "erc-8004"))
        .or(hits.first());
    Ok(best.map(|hit| {
        serde_json::json!({
            "uaid": hit["uaid"],
            "name": hit["name"],
            "registry": hit["registry"],
            "trustScore": hit["trustScore"],
            "availabilityStatus": hit["availabilityStatus"],
            "networkKey": hit["metadata"]["networkKey"],
        })
    }))
}

/// A page the api made when asked (`pages::Renderer`), as the answer to
/// `request`; a page that cannot be rendered is the api's fault (500).
pub(crate) fn made_page(request: &Request, file: anyhow::Result<shared::site::File>) -> Answer {
    let file = file.map_err(|e| Error::bad_answer(format!("{e:#}")))?;
    let made = reply::Representation::computed(file.representation)?;
    Ok(reply::representation(&request.method, &request.headers, &made))
}

/// Marks an answer made from the live overlay: revalidated every time.
fn live(mut reply: reply::Reply) -> reply::Reply {
    let value = warp::http::HeaderValue::from_static("no-cache");
    reply.headers_mut().insert(warp::http::header::CACHE_CONTROL, value);
    reply
}

/// `GET /registries/{registry}/search`: `GET /search`'s parameters within
/// one registry (404 for a registry with no agents).
pub async fn registry_search(request: Request) -> Answer {
    let (_, broker) = agents(&request)?;
    let registry = request.params.get("registry");
    let view = request.app.overlay.view();
    let live_only = view.agents_after(broker.journal_seq).any(|a| a.registry.eq_ignore_ascii_case(registry));
    if !broker.index.has_registry(registry) && !live_only {
        let message = format!("no agents in registry {registry}");
        return Err(Error::new(StatusCode::NOT_FOUND, "registry_not_found", message));
    }
    let mut query = search_parameters::parse(&request.query)?;
    query.registries = vec![registry.to_string()];
    searched(request, query).await
}

/// `GET /search/facets[?adapter]`: a file per adapter; an adapter nobody
/// knows has no facets.
pub async fn facets(request: Request) -> Answer {
    agents(&request)?;
    let adapter = request.query_value("adapter")?;
    let adapter = adapter.as_deref().map(str::trim).filter(|a| !a.is_empty());
    Ok(published(&request, &render::facets_route(adapter)).await.unwrap_or_else(|| reply::json(&json!({"facets": []}))))
}

/// `GET /agents/{uaid}`.
pub async fn agent(request: Request) -> Answer {
    agent_file(&request, render::agent_route, |broker, _, agent| register::live_detail(broker, agent)).await
}

/// `GET /agents/{uaid}` for people: the build's profile page, or, for an
/// agent changed since the build (registered, updated, or checked by
/// [`availability`]), the page rendered now from the overlay's agent, as
/// the next build will publish it. 404 for a deleted agent.
pub async fn agent_page(request: Request) -> Answer {
    let build = request.build()?;
    if let Some(broker) = build.broker.as_deref() {
        let uaid = request.params.get("uaid");
        let view = request.app.overlay.view();
        match view.segments.find(uaid, broker.journal_seq) {
            Found::Live(agent) => {
                let feedback = broker.feedback(uaid).map_err(|e| Error::damaged_record(&e))?;
                let page = build.pages.profile(agent, &feedback.iter().collect::<Vec<_>>(), pages::Made::Live);
                return made_page(&request, page).map(live);
            }
            Found::Deleted => return Err(Error::not_found(&request.path)),
            Found::Build => {}
        }
    }
    crate::service::page(request).await
}

/// `GET /agents/{uaid}/similar`: ranked over the build's agents (from
/// their capability sets' best, `query::similar`) and the live ones, for
/// an agent of the build or one changed since; ETag and Last-Modified as
/// a file would have them. An answer the overlay could change is not kept
/// by shared caches.
pub async fn similar(request: Request) -> Answer {
    let (_, broker) = agents(&request)?;
    let uaid = request.params.get("uaid");
    let view = request.app.overlay.view();
    let damaged = |e: anyhow::Error| Error::damaged_record(&e);
    let (agent, own) = match view.segments.find(uaid, broker.journal_seq) {
        Found::Live(agent) => (std::borrow::Cow::Borrowed(agent), None),
        Found::Deleted => return Err(unknown_agent(uaid)),
        Found::Build => {
            let at = broker.position(uaid).ok_or_else(|| unknown_agent(uaid))?;
            (broker.index.records.agent(at).map_err(damaged)?, Some(at))
        }
    };
    let seen = view.live(broker);
    let excluded = seen.as_ref().map(|seen| &*seen.base_excluded);
    let skip = |i: usize| Some(i) == own || excluded.is_some_and(|e| e.contains(i));
    let best: Vec<_> = query::similar(&broker.index, render::mask(&agent), skip, render::SIMILAR_LIMIT)
        .into_iter()
        .map(|i| broker.index.records.agent(i).map(std::borrow::Cow::into_owned))
        .collect::<anyhow::Result<_>>()
        .map_err(damaged)?;
    let live_agents = seen.iter().flat_map(|seen| seen.agents());
    let made = render::similar(&agent, best.iter().chain(live_agents));
    let made = reply::Representation::computed(made)?;
    let answer = reply::representation(&request.method, &request.headers, &made);
    Ok(if seen.is_some() { live(answer) } else { answer })
}

/// `GET /resolve/{uaid}`.
pub async fn resolve(request: Request) -> Answer {
    agent_file(&request, render::resolve_route, |_, _, agent| Ok(render::resolved(agent))).await
}

/// `GET /agents/{uaid}/feedback[?includeRevoked]`: ERC-8004 agents only.
pub async fn agent_feedback(request: Request) -> Answer {
    let (_, broker) = agents(&request)?;
    let uaid = request.params.get("uaid");
    let view = request.app.overlay.view();
    let agent = register::lookup(&request, &view, uaid)?.ok_or_else(|| unknown_agent(uaid))?;
    if agent.registry != FEEDBACK_REGISTRY {
        let message = format!("agent {uaid} is not in the {FEEDBACK_REGISTRY} registry and has no ERC-8004 feedback");
        return Err(Error::new(StatusCode::BAD_REQUEST, "feedback_unsupported", message));
    }
    let include = match request.query_value("includeRevoked")?.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(Error::parameter("includeRevoked", "includeRevoked must be true or false")),
    };
    if let Some(body) = feedback::live(&request, &agent, include).await? {
        return Ok(live(reply::json(&body)));
    }
    if broker.position(uaid).is_none() {
        // Registered since the build: no feedback yet.
        let summary = json!({"averageScore": 0, "totalFeedbacks": 0});
        return Ok(live(reply::json(&json!({"uaid": uaid, "summary": summary, "entries": []}))));
    }
    agent_file(&request, |uaid| render::feedback_route(uaid, include), |_, _, _| Ok(Value::Null)).await
}

fn unknown_agent(uaid: &str) -> Error {
    Error::new(StatusCode::NOT_FOUND, "agent_not_found", format!("no indexed agent {uaid}"))
}

/// The file `route(uaid)` of an indexed agent, or `live(agent)` when the
/// agent changed since the build; 404 for an unknown or deleted UAID.
async fn agent_file(
    request: &Request,
    route: impl Fn(&str) -> String,
    live_body: impl Fn(&Agents, &overlay::View, &broker_model::Agent) -> Result<Value, Error>,
) -> Answer {
    let (_, broker) = agents(request)?;
    let uaid = request.params.get("uaid");
    let view = request.app.overlay.view();
    match view.segments.find(uaid, broker.journal_seq) {
        Found::Live(agent) => return Ok(live(reply::json(&live_body(broker, &view, agent)?))),
        Found::Deleted => return Err(unknown_agent(uaid)),
        Found::Build => {}
    }
    // The build's file first: an agent of the build has it, so the UAID is
    // looked up among the build's agents only when it is missing (404 for
    // an agent the build does not hold, else a broken build).
    let route = route(uaid);
    published(request, &route).await.ok_or_else(|| match broker.position(uaid) {
        None => unknown_agent(uaid),
        Some(_) => missing(&route),
    })
}

/// The build lacks a file its own index promises: a broken build.
fn missing(route: &str) -> Error {
    Error::new(StatusCode::INTERNAL_SERVER_ERROR, "missing_file", format!("the build has no file for {route}"))
}

/// `GET /uaids/validate/{uaid}`: `{uaid, valid, formats}`, `formats`
/// naming the HCS-14 target a valid UAID uses. A pure function of the
/// path, so shared caches may keep it.
pub async fn validate_uaid(request: Request) -> Answer {
    let text = request.params.get("uaid");
    let parsed = text.parse::<shared::uaid::Uaid>();
    let formats: Vec<String> = parsed.iter().map(|u| format!("uaid:{}", u.target.as_str())).collect();
    Ok(reply::json(&json!({"uaid": text, "valid": parsed.is_ok(), "formats": formats})))
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

/// `POST /search/capabilities`: agents advertising every capability named
/// (codes or labels), in `GET /search`'s order and page shape.
pub async fn capability_search(http: Request) -> Answer {
    agents(&http)?;
    let query = capability_query(parse_body(&http.body)?)?;
    searched(http, query).await
}

/// `POST /search/capabilities`'s body as `GET /search`'s query.
fn capability_query(request: CapabilityRequest) -> Result<SearchQuery, Error> {
    let mut raw = form_urlencoded::Serializer::new(String::new());
    let mut names = Vec::new();
    for c in &request.capabilities {
        match c {
            Value::String(s) if !s.trim().is_empty() => names.push(s.trim().to_string()),
            Value::Number(n) if n.as_u64().is_some_and(|n| n <= 18) => names.push(n.to_string()),
            _ => {
                let message = format!("capability {c} is neither a label nor a code from 0 to 18");
                return Err(Error::invalid_body(message).naming("capabilities"));
            }
        }
    }
    if names.is_empty() {
        return Err(Error::invalid_body("capabilities must name at least one").naming("capabilities"));
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
    let mut query = search_parameters::parse(&raw.finish())?;
    query.include_aggregations = false;
    Ok(query)
}
