//! Request dispatch. Every request passes through [`App::respond`]: health,
//! CORS preflight, section C's parameterised routes, then any other route
//! of the manifest. Nothing here touches the filesystem: answers come from
//! the build held in memory, so no request path can reach a file.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use crate::reply::Reply;
use almanac::manifest;
use almanac::routes::{Limits, Route};
use bytes::{Buf, Bytes};
use futures_util::Stream;
use warp::http::{header, HeaderMap, Method, StatusCode};
use warp::Filter;

use crate::body::{read_body, BodyError};
use crate::limit::{self, Limiter};
use crate::mcp;
use crate::published::{Build, Live};
use crate::reply::Representation;
use crate::reply::{self, method_not_allowed, not_found};
use crate::{cors, path};

const ALLOW: &str = "GET, HEAD, OPTIONS";

pub struct App {
    pub live: Arc<Live>,
    /// Where builds are published.
    pub layout: almanac::site::Layout,
    /// How often to look for a new build.
    pub reload_every: std::time::Duration,
    /// How often idle clients' rate-limit buckets are dropped.
    pub cleanup_every: std::time::Duration,
    pub limits: Limits,
    pub guard: GuardLimits,
    /// Largest body of a broker POST (search), in bytes (413 above).
    pub broker_max_body: usize,
    /// The embedding provider for hybrid search, if configured.
    pub vectors: Option<crate::broker::Vectors>,
}

/// Section B's live settings: who may call the MCP endpoint, how big a
/// request may be, and the rate limits.
pub struct GuardLimits {
    pub access: mcp::Access,
    pub max_body: usize,
    pub json: Limiter,
    pub mcp: Limiter,
    /// Peers whose `X-Forwarded-For` is believed.
    pub proxies: Vec<IpAddr>,
}

/// The whole api as one warp filter.
pub fn filter(app: Arc<App>) -> impl Filter<Extract = (Reply,), Error = warp::Rejection> + Clone {
    let query = warp::query::raw().or(warp::any().map(String::new)).unify();
    warp::method()
        .and(warp::path::full())
        .and(query)
        .and(warp::header::headers_cloned())
        .and(warp::addr::remote())
        .and(warp::body::stream())
        .and_then(move |method: Method, path: warp::path::FullPath, query: String, headers: HeaderMap, peer, body| {
            let app = app.clone();
            async move { Ok::<_, Infallible>(cors::public(handle(app, method, path, query, headers, peer, body).await)) }
        })
}

/// One request, start to finish (CORS headers are added by the caller).
async fn handle<S, B>(
    app: Arc<App>,
    method: Method,
    path: warp::path::FullPath,
    query: String,
    headers: HeaderMap,
    peer: Option<SocketAddr>,
    body: S,
) -> Reply
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    // Every decision below is made on the path's normal form, so that no
    // spelling of a path escapes its quota or its bound.
    let Ok(path) = path::normalize(path.as_str()) else {
        return reply::error(StatusCode::BAD_REQUEST, "invalid_path", "the path is not valid UTF-8 once decoded", None);
    };
    if path == mcp::PATH {
        return app.mcp(&method, &headers, peer, body).await;
    }
    if path.starts_with("/guard/") {
        if let Some(refusal) = app.throttle(&app.guard.json, peer, &headers) {
            return refusal;
        }
    }
    let mut body_bytes = Bytes::new();
    if method == Method::POST && path.starts_with("/api/v1/") {
        let limit = app.broker_max_body;
        body_bytes = match read_body(&headers, body, limit).await {
            Ok(bytes) => bytes,
            Err(BodyError::TooLarge) => {
                let message = format!("the request body is larger than {limit} bytes");
                return reply::error(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", &message, None);
            }
            Err(BodyError::Unreadable) => {
                let message = "the request body could not be read";
                return reply::error(StatusCode::BAD_REQUEST, "bad_body", message, None);
            }
        };
    }
    if method == Method::POST && path == "/api/v1/search" {
        return app.vector_search(&body_bytes).await;
    }
    app.respond(&method, &path, &query, &headers, &body_bytes)
}

impl App {
    /// The MCP endpoint: rate limit, then the body read up to its bound,
    /// then [`mcp::respond`].
    async fn mcp<S, B>(&self, method: &Method, headers: &HeaderMap, peer: Option<SocketAddr>, body: S) -> Reply
    where
        S: Stream<Item = Result<B, warp::Error>>,
        B: Buf,
    {
        if let Some(refusal) = self.throttle(&self.guard.mcp, peer, headers) {
            return refusal;
        }
        let limit = self.guard.max_body;
        let bytes = match read_body(headers, body, limit).await {
            Ok(bytes) => bytes,
            Err(BodyError::TooLarge) => return mcp::too_large(limit),
            Err(BodyError::Unreadable) => {
                return reply::error(StatusCode::BAD_REQUEST, "bad_body", "the request body could not be read", None)
            }
        };
        let build = self.live.get();
        let datasets = build.as_ref().and_then(|b| b.guard.as_ref());
        mcp::respond(&self.guard.access, datasets, method, headers, &bytes)
    }

    /// `POST /api/v1/search` (it waits on the embedding provider).
    async fn vector_search(&self, body: &Bytes) -> Reply {
        let Some(build) = self.live.get() else {
            return reply::error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "no build has been published yet",
                None,
            );
        };
        match &build.broker {
            Some(broker) => crate::broker::vector_search(broker, self.vectors.as_ref(), body).await,
            None => not_found("/api/v1/search"),
        }
    }

    /// 429 with `Retry-After` when the client is over its quota.
    fn throttle(&self, limiter: &Limiter, peer: Option<SocketAddr>, headers: &HeaderMap) -> Option<Reply> {
        let wait = limiter.check(limit::client(peer, headers, &self.guard.proxies)).err()?;
        let seconds = limit::retry_after(wait);
        let mut reply = reply::error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            &format!("too many requests; retry in {seconds} s"),
            None,
        );
        reply.headers_mut().insert(header::RETRY_AFTER, seconds.into());
        Some(reply)
    }

    /// Answers a request whose path is `path` in normal form ([`path::normalize`]).
    pub fn respond(&self, method: &Method, path: &str, query: &str, headers: &HeaderMap, body: &Bytes) -> Reply {
        if path == "/health" || path == "/api/v1/health" {
            return self.health(method);
        }
        if method == Method::OPTIONS {
            // The broker's searches are POSTs with JSON bodies.
            let methods = if path.starts_with("/api/v1/") { "GET, HEAD, POST, OPTIONS" } else { ALLOW };
            let allow = cors::AllowHeaders::Requested { default: "If-None-Match, If-Modified-Since" };
            return cors::preflight(headers, methods, allow);
        }
        if let Some(uaid) = path.strip_prefix("/api/v1/uaids/validate/") {
            if method != Method::GET && method != Method::HEAD {
                return method_not_allowed(ALLOW);
            }
            return validate_uaid(&path::decode_segment(uaid));
        }
        let readable = method == Method::GET || method == Method::HEAD;
        let Some(build) = self.live.get() else {
            return reply::error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "no build has been published yet",
                None,
            );
        };
        if path.starts_with("/api/v1/") {
            // One segment per path parameter: a UAID may hold an encoded `/`,
            // which the normal form keeps encoded.
            let Some(canonical) = almanac::broker::render::canonical_path(path) else {
                return reply::error(StatusCode::BAD_REQUEST, "invalid_path", "the path is not valid UTF-8", None);
            };
            let vectors = self.vectors.as_ref();
            if let Some(reply) = crate::broker::respond(&build, vectors, method, &canonical, query, headers, body) {
                return reply;
            }
        }
        match Route::parse(path, query, self.limits) {
            Err(bad) => reply::error(StatusCode::BAD_REQUEST, "invalid_parameter", &bad.message, Some(bad.parameter)),
            Ok(Some(_)) if !readable => method_not_allowed(ALLOW),
            Ok(Some(route)) => match build.routes.get(&route.canonical()) {
                Some(representation) => reply::representation(method, headers, representation),
                None => self.render(&build, &route, method, headers),
            },
            Ok(None) => match build.routes.get(path) {
                Some(_) if !readable => method_not_allowed(ALLOW),
                Some(representation) => reply::representation(method, headers, representation),
                None => not_found(path),
            },
        }
    }

    /// Answers a section C route no file covers (another page size, an
    /// account that never held a token) through the same query functions.
    fn render(&self, build: &Build, route: &Route, method: &Method, headers: &HeaderMap) -> Reply {
        match route.render(&build.analytics) {
            Ok(rendered) => {
                let seconds = rendered.last_modified.seconds();
                let representation = Representation {
                    etag: manifest::etag(&rendered.body),
                    body: Bytes::from(rendered.body),
                    last_modified: UNIX_EPOCH + Duration::from_secs(seconds),
                    last_modified_text: rendered.last_modified.http_date(),
                    content_type: almanac::JSON.to_string(),
                    cache_control: rendered.cache.header(),
                };
                reply::representation(method, headers, &representation)
            }
            Err(unknown) => reply::error(StatusCode::NOT_FOUND, "tick_not_found", &unknown.to_string(), None),
        }
    }

    fn health(&self, method: &Method) -> Reply {
        if method != Method::GET && method != Method::HEAD {
            return method_not_allowed("GET, HEAD");
        }
        let build = self.live.get();
        let body = serde_json::json!({
            "status": "ok",
            "ready": build.is_some(),
            "build": build.as_ref().map(|b| b.id.clone()),
            "rateLimit": {"guardClients": self.guard.json.tracked(), "mcpClients": self.guard.mcp.tracked()},
            "broker": build.as_ref().and_then(|b| b.broker.as_ref()).map(|b| serde_json::json!({
                "agents": b.index.agents.len(), "loadedAt": b.loaded_at, "fingerprint": b.fingerprint,
            })),
        });
        reply::json(&body, "no-store")
    }
}

/// `GET /api/v1/uaids/validate/{uaid}` (the path already percent-decoded):
/// `{uaid, valid, formats}`, `formats` naming the HCS-14 target a valid
/// UAID uses. A pure function of the path, so shared caches may keep it.
fn validate_uaid(text: &str) -> Reply {
    let parsed = text.parse::<almanac::uaid::Uaid>();
    let formats: Vec<String> = parsed.iter().map(|u| format!("uaid:{}", u.target.as_str())).collect();
    let body = serde_json::json!({"uaid": text, "valid": parsed.is_ok(), "formats": formats});
    reply::json(&body, "public, max-age=86400")
}
