//! The agent directory's pages for people as the api knows them now
//! (`pages::agents`): a directory page of the build with each row's
//! availability as the live overlay has it, and the page of a search
//! (`/agents/search`), made from `GET /search`'s own answer so that the
//! two never disagree.

use std::sync::Arc;

use bytes::Bytes;
use pages::{AgentSearch, SearchForm};
use search::segments::Found;
use serde::Deserialize;
use serde_json::Value;
use warp::http::HeaderValue;

use super::{live, search_body, search_parameters, Searched};
use crate::reply::{self, Answer, Error};
use crate::request::Request;

/// `GET /agents` and `/agents/page/{page}`: the build's page, its rows'
/// availability rewritten where the overlay's agents say otherwise (then
/// revalidated every time, as any answer the overlay changed). Without
/// changes since the build, the build's file as it is. O(size of the page).
pub async fn directory_page(request: Request) -> Answer {
    let view = request.app.overlay.view();
    let changed = request.build()?.broker.clone().filter(|broker| view.live(broker).is_some());
    let Some(broker) = changed else { return crate::service::page(request).await };
    let build = request.build.clone().ok_or_else(Error::unavailable)?;
    let route = pages::routes::canonical(&request.path);
    let file = match crate::service::read(&build, &route).await {
        Some(Ok(file)) => file,
        Some(Err(damage)) => return Err(Error::damaged(&damage)),
        None => return Err(Error::not_found(&request.path)),
    };
    let available_now = |uaid: &str| match view.segments.find(uaid, broker.journal_seq) {
        Found::Live(agent) => Some(agent.available),
        Found::Deleted | Found::Build => None,
    };
    let Some(body) = pages::directory_now(&file.body, available_now) else {
        return Ok(reply::representation(&request.method, &request.headers, &file));
    };
    let made = reply::Representation {
        etag: HeaderValue::from_str(&shared::manifest::etag(&body)).map_err(|_| Error::bad_answer("an entity tag"))?,
        body: Bytes::from(body),
        ..Arc::unwrap_or_clone(file)
    };
    Ok(live(reply::representation(&request.method, &request.headers, &made)))
}

/// `GET /agents/search`: `GET /search`'s answer to the same parameters
/// (the form's `q`, `registries`, `protocols` and `online`, and any other
/// of its parameters), as a page with the form and links to the pages
/// before and after. A bad parameter is the same 400 as the search's.
pub async fn search_page(request: Request) -> Answer {
    let mut query = search_parameters::parse(&request.query)?;
    query.include_aggregations = true;
    let form = SearchForm {
        q: query.q.clone().unwrap_or_default(),
        registry: query.registries.first().cloned().unwrap_or_default(),
        protocol: query.protocols.first().cloned().unwrap_or_default(),
        online: query.online,
    };
    let app = request.app.clone();
    let (request, searched) = app
        .searches
        .run(move || {
            let searched = search_body(&request, &query);
            (request, searched)
        })
        .await?;
    let Searched { body, live: changed } = searched?;
    let answer: Value =
        serde_json::from_slice(&body).map_err(|e| Error::bad_answer(format!("a search answer: {e}")))?;
    let found = found(&request.query, form, &answer)?;
    let build = request.build()?;
    let answer = super::made_page(&request, build.pages.agent_search(&found))?;
    Ok(if changed { live(answer) } else { answer })
}

/// The page's facts from a search answer (`{hits, total, page, limit,
/// aggregations}`) to the query string `raw`.
fn found(raw: &str, form: SearchForm, answer: &Value) -> Result<AgentSearch, Error> {
    let number = |key: &str| answer[key].as_u64().unwrap_or(0) as usize;
    let (total, page, limit) = (number("total"), number("page").max(1), number("limit").max(1));
    let hits = answer["hits"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut shared = broker_site::rows::Shared::default();
    let rows = hits
        .iter()
        .map(|hit| Ok(shared.row(&broker_model::Agent::deserialize(hit)?)))
        .collect::<Result<Vec<_>, serde_json::Error>>()
        .map_err(|e| Error::bad_answer(format!("a search hit: {e}")))?;
    let last_modified = rows.iter().map(|r| r.updated).max().unwrap_or_default();
    let choices = |key: &str, chosen: &str| {
        let mut names: Vec<String> =
            answer["aggregations"][key].as_object().map(|counts| counts.keys().cloned().collect()).unwrap_or_default();
        if !chosen.is_empty() && !names.iter().any(|n| n == chosen) {
            names.push(chosen.to_string());
        }
        names.sort();
        names
    };
    let registries = choices("registries", &form.registry);
    let protocols = choices("protocols", &form.protocol);
    let link = |to: usize| {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (key, value) in form_urlencoded::parse(raw.as_bytes()).filter(|(k, _)| k != "page") {
            query.append_pair(&key, &value);
        }
        query.append_pair("page", &to.to_string());
        format!("{}?{}", pages::routes::AGENT_SEARCH, query.finish())
    };
    Ok(AgentSearch {
        form,
        total,
        page,
        previous: (page > 1).then(|| link(page - 1)),
        next: (page * limit < total).then(|| link(page + 1)),
        json: format!("/api/v1/search{}{raw}", if raw.is_empty() { "" } else { "?" }),
        rows,
        registries,
        protocols,
        last_modified,
    })
}
