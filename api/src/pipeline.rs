//! One request, top to bottom. Every request passes through [`handle`]:
//!
//! 0. **head**: the request target's form, `Host` and framing
//!    ([`crate::head`]; 400 and the connection closed);
//! 1. **path**: its normal form ([`crate::path`]), the only spelling any
//!    later step sees;
//! 2. **route**: the endpoint in the route table (404 when none);
//! 3. **limit**: the endpoint's quota (429; a JSON-RPC endpoint reads the
//!    body first, to answer with the request's id);
//! 4. **method**: a preflight is answered from the table, a method the
//!    endpoint lacks is 405 with `Allow`;
//! 5. **who**: the principal an API key names, where the operation reads
//!    keys (401 for a bad or missing key, 403 for the wrong one);
//! 6. **body**: JSON only (415; none at all is no body), read up to the
//!    operation's bound (413) within the body deadline (408), or not at
//!    all;
//! 7. **handler**: the operation's, with one [`Request`];
//! 8. **reply**: a refusal in the endpoint's error form, the operation's
//!    cache policy on a live answer; CORS headers on everything, as it
//!    leaves.
//!
//! Nothing here touches the filesystem: answers come from the build held in
//! memory, so no request path can reach a file.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use warp::http::{self, header, HeaderMap, HeaderValue, Method, StatusCode};

use crate::app::App;
use crate::body::{read_body, BodyError};
use crate::head::{self, Target};
use crate::limit::Limiter;
use crate::reply::{Error, Reply};
use crate::request::Request;
use crate::routes::{Auth, BodyLimit, Cors, Dialect, Endpoint, Rate, Table};
use crate::{cors, limit, path};

/// Request headers a page may send to a public route when its preflight
/// names none.
const PUBLIC_REQUEST_HEADERS: &str = "If-None-Match, If-Modified-Since";

/// One request, start to finish, CORS headers included.
pub async fn handle<B>(table: &Table, app: Arc<App>, request: http::Request<B>, peer: SocketAddr) -> Reply
where
    B: http_body::Body<Data = Bytes>,
{
    let (parts, body) = request.into_parts();
    let mut reply = cors::public(answer(table, app, parts, body, peer).await);
    // Every answer is what its Content-Type says: no browser may guess
    // otherwise (a JSON body read as HTML or script).
    reply.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    reply
}

/// The steps, in order; a refusal ends them.
async fn answer<B>(table: &Table, app: Arc<App>, parts: http::request::Parts, body: B, peer: SocketAddr) -> Reply
where
    B: http_body::Body<Data = Bytes>,
{
    let http::request::Parts { method, uri, version, headers, .. } = parts;
    let target = match head::check(&method, &uri, version, &headers) {
        Ok(Target::Path(path)) => path,
        Ok(Target::Server) => return server_options(),
        Err(bad) => {
            let close = HeaderValue::from_static("close");
            return Error::new(StatusCode::BAD_REQUEST, bad.code, bad.message)
                .with(header::CONNECTION, close)
                .into_reply();
        }
    };
    let Ok(path) = path::normalize(target) else {
        let message = "the path is not valid UTF-8 once decoded";
        return Error::new(StatusCode::BAD_REQUEST, "invalid_path", message).into_reply();
    };
    let Some(found) = table.find(&path) else {
        return Error::not_found(&path).into_reply();
    };
    let endpoint = found.endpoint;
    let client = limit::client(peer, &headers, &app.guard.proxies);
    let over_quota = limiter(&app, endpoint.rate).and_then(|limiter| limiter.check(client).err());
    // A JSON-RPC refusal carries the request's id, so such a client over
    // its quota has its body read (within the same bound and deadline)
    // before it is told; anyone else is told at once.
    let tell_at_once = endpoint.errors == Dialect::Json || method == Method::OPTIONS;
    if let (Some(wait), true) = (over_quota, tell_at_once) {
        return refuse(endpoint, limit::rate_limited(wait), None);
    }
    if method == Method::OPTIONS {
        return preflight(endpoint, &headers);
    }
    let Some(operation) = endpoint.operation_for(&method) else {
        return refuse(endpoint, Error::method_not_allowed(endpoint.allow.clone()), None);
    };
    // Who is asking, before any body is read from them.
    let principal = match operation.auth {
        Auth::Public => None,
        auth => {
            let resolved = crate::auth::resolve(&app.auth, &app.store, &headers).await;
            let admitted = resolved.and_then(|principal| {
                crate::auth::admit(auth, principal.as_ref())?;
                crate::auth::account_header(&headers, principal.as_ref())?;
                Ok(principal)
            });
            match admitted {
                Ok(principal) => principal,
                Err(refusal) => return refuse(endpoint, refusal, None),
            }
        }
    };
    let limit = body_limit(&app, operation.body);
    if limit.is_some() && !is_json(&headers) && has_body(&headers) {
        // A body this api reads is JSON. Refusing any other type also keeps
        // a cross-site form post (text/plain, no preflight) from reaching a
        // route that acts on a body. No body at all is no body of another
        // type: routes whose body is optional take it, the others refuse
        // the empty body as they refuse any bad one.
        let message = "the request body must be JSON (Content-Type: application/json)";
        return refuse(
            endpoint,
            Error::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", message),
            None,
        );
    }
    let body = match limit {
        None => Bytes::new(),
        Some(limit) => match read_body(&headers, body, limit, app.connections.limits().body_timeout).await {
            Ok(bytes) => bytes,
            Err(BodyError::TooLarge) => {
                let message = format!("the request body is larger than {limit} bytes");
                return refuse(endpoint, Error::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", message), None);
            }
            Err(BodyError::TooSlow) => {
                let message = "the request body did not arrive in time";
                return refuse(endpoint, Error::new(StatusCode::REQUEST_TIMEOUT, "body_timeout", message), None);
            }
            Err(BodyError::Unreadable) => {
                let message = "the request body could not be read";
                return refuse(endpoint, Error::new(StatusCode::BAD_REQUEST, "bad_body", message), None);
            }
        },
    };
    if let Some(wait) = over_quota {
        return refuse(endpoint, limit::rate_limited(wait), Some(&body));
    }
    let build = app.live.get();
    let request = Request {
        app: app.clone(),
        method,
        path: found.path,
        params: found.params,
        query: uri.query().unwrap_or_default().to_string(),
        headers,
        body,
        client,
        build,
        principal,
    };
    match (operation.handler)(request).await {
        Ok(mut reply) => {
            if reply.status().is_success() && !reply.headers().contains_key(header::CACHE_CONTROL) {
                reply.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(operation.cache.header()));
            }
            reply
        }
        Err(error) => refuse(endpoint, error, None),
    }
}

/// `OPTIONS *`: what the server as a whole answers to.
fn server_options() -> Reply {
    let mut reply = Reply::new(Default::default());
    *reply.status_mut() = StatusCode::NO_CONTENT;
    reply.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD, POST, OPTIONS"));
    reply
}

/// Whether the request says its body is JSON: `application/json` or a
/// `+json` type, parameters (a charset) allowed.
/// Whether a request says it has a body: a length above zero, or chunks.
fn has_body(headers: &HeaderMap) -> bool {
    let length = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok());
    headers.contains_key(header::TRANSFER_ENCODING) || length.is_some_and(|l| l.trim() != "0")
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else { return false };
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json")
            || subtype.get(subtype.len().saturating_sub(5)..).is_some_and(|end| end.eq_ignore_ascii_case("+json")))
}

/// The quota a rate class spends, if it has one.
fn limiter(app: &App, rate: Rate) -> Option<&Limiter> {
    match rate {
        Rate::Unlimited => None,
        Rate::Guard => Some(&app.guard.json),
        Rate::Mcp => Some(&app.guard.mcp),
        Rate::SignIn => Some(&app.sign_in_limit),
        Rate::Verification => Some(&app.verification_limit),
        Rate::Relay => Some(&app.relay_limit),
    }
}

/// The configured bound of a body class, in bytes.
fn body_limit(app: &App, body: BodyLimit) -> Option<usize> {
    match body {
        BodyLimit::None => None,
        BodyLimit::Search => Some(app.broker_max_body),
        BodyLimit::Mcp => Some(app.guard.max_body),
        BodyLimit::Live => Some(app.live_max_body),
        BodyLimit::Content => Some(app.content_max_body),
        BodyLimit::Package => Some(app.package_max_body),
        BodyLimit::Secrets => Some(app.secrets_max_body),
    }
}

/// A refusal in the endpoint's error form (a JSON-RPC one names the id of
/// the request in `body`, when it was read).
fn refuse(endpoint: &Endpoint, error: Error, body: Option<&Bytes>) -> Reply {
    match endpoint.errors {
        Dialect::Json => error.into_reply(),
        Dialect::JsonRpc => crate::guard::mcp::refusal(error, body),
    }
}

/// A preflight for the endpoint's methods and the request headers its CORS
/// policy allows.
fn preflight(endpoint: &Endpoint, headers: &HeaderMap) -> Reply {
    let allow = match endpoint.cors {
        Cors::Public => cors::AllowHeaders::Requested { default: PUBLIC_REQUEST_HEADERS },
        Cors::Headers(list) => cors::AllowHeaders::Only(list),
    };
    cors::preflight(headers, endpoint.allow.clone(), allow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        let check = |value: Option<&str>, json: bool| {
            let mut headers = HeaderMap::new();
            if let Some(value) = value {
                headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
            }
            assert_eq!(is_json(&headers), json, "{value:?}");
        };
        check(Some("application/json"), true);
        check(Some("Application/JSON; charset=utf-8"), true);
        check(Some("application/problem+json"), true);
        check(None, false);
        check(Some("text/plain"), false);
        check(Some("application/x-www-form-urlencoded"), false);
        check(Some("multipart/form-data; boundary=x"), false);
        check(Some("text/json+html"), false);
        check(Some("application/jsonp"), false);
    }
}
