//! `POST /api/guard/public-mcp`: a stateless MCP server, protocol version
//! 2026-07-28, over the guard datasets of the live build.
//!
//! Checks run in this order, each answering as soon as it fails (the
//! first three by the pipeline, from the route table, as JSON-RPC errors):
//! 1. the MCP quota (429);
//! 2. method (POST; OPTIONS preflight; anything else 405);
//! 3. body size (413, enforced while the body is read);
//! 4. `Host` and `Origin` against the allow-lists (403): DNS rebinding;
//! 5. JSON-RPC shape: parse error -32700, batches and bad envelopes -32600;
//! 6. `params._meta` carries the protocol version and client capabilities
//!    (-32602);
//! 7. headers: `MCP-Protocol-Version` equals the `_meta` version,
//!    `Mcp-Method` the body's method, `Mcp-Name` the tool name (-32020);
//!    then the version must be one we speak (-32022);
//! 8. the method: `server/discover`, `tools/list`, `tools/call`; any other,
//!    `initialize` and `ping` included, is -32601 with 404.
//!
//! No sessions: `Mcp-Session-Id` is neither read nor issued. A notification
//! that passes the checks answers 202 with no body.

use bytes::Bytes;
use serde_json::{json, Value};
use warp::http::{header, HeaderMap, Response, StatusCode};
use warp::reply::Response as Reply;

use super::tools;
use crate::reply::excerpt;
use guard_data::Datasets;

/// A build's guard datasets, and the serialized results of the tool calls
/// made on them: a result is a pure function of the build and the call, so
/// a call asked again is answered from memory. The cache is bounded in
/// bytes (keys and results together) and keeps what is asked often: its
/// policy (S3-FIFO, `quick_cache`) lets a stream of distinct one-off calls
/// pass through without evicting the popular ones.
pub struct Published {
    pub datasets: Datasets,
    results: quick_cache::sync::Cache<String, Bytes, Size>,
    bounds: CacheBounds,
}

/// How much of the results of tool calls a build keeps.
#[derive(Clone, Copy, Debug)]
pub struct CacheBounds {
    /// Keys and results together, in bytes.
    pub bytes: u64,
    /// Longest call (tool name and arguments as JSON) kept; a longer one
    /// is answered, never kept.
    pub key_bytes: usize,
}

/// Weighs a cached result by the bytes it holds.
#[derive(Clone)]
struct Size;

impl quick_cache::Weighter<String, Bytes> for Size {
    fn weight(&self, key: &String, result: &Bytes) -> u64 {
        (key.len() + result.len()) as u64
    }
}

impl Published {
    pub fn new(datasets: Datasets, bounds: CacheBounds) -> Published {
        // An estimate of the number of entries (results are a few hundred
        // bytes to a few kilobytes); the weight is the bound.
        let entries = (bounds.bytes / 1024).clamp(16, 1 << 20) as usize;
        Published { datasets, results: quick_cache::sync::Cache::with_weighter(entries, bounds.bytes, Size), bounds }
    }

    /// The `result` of a successful call, serialized; tool errors and
    /// refusals are not cached.
    fn call(&self, name: &str, arguments: Option<&Value>) -> Result<Result<Bytes, String>, tools::Refused> {
        // serde_json's maps are ordered, so equal arguments print equal.
        let key = format!("{name}\u{0}{}", arguments.map(Value::to_string).unwrap_or_default());
        if let Some(hit) = self.results.get(&key) {
            return Ok(Ok(hit));
        }
        let structured = match tools::call(&self.datasets, name, arguments)? {
            Ok(structured) => structured,
            Err(message) => return Ok(Err(message)),
        };
        let text = serde_json::to_string(&structured).expect("results serialise");
        let result = json!({
            "resultType": "complete",
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": false,
        });
        let bytes = Bytes::from(serde_json::to_vec(&result).expect("results serialise"));
        if key.len() <= self.bounds.key_bytes {
            self.results.insert(key, bytes.clone());
        }
        Ok(Ok(bytes))
    }

    /// Bytes the cached results hold now.
    pub fn cached_bytes(&self) -> u64 {
        self.results.weight()
    }
}

pub const PATH: &str = "/api/guard/public-mcp";
pub const VERSION: &str = "2026-07-28";
const SUPPORTED: [&str; 1] = [VERSION];
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// How long a client may reuse `server/discover` and `tools/list` answers:
/// they change only with a new build.
const TTL_MS: u64 = 300_000;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;
const HEADER_MISMATCH: i64 = -32020;
const UNSUPPORTED_VERSION: i64 = -32022;
/// Server-defined (the JSON-RPC range -32000 to -32099): over the quota;
/// `Retry-After` says when to try again.
const RATE_LIMITED: i64 = -32029;

/// Who may call: the `Host` names (any port) and `Origin`s accepted.
#[derive(Clone, Debug)]
pub struct Access {
    pub hosts: Vec<String>,
    pub origins: Vec<String>,
}

impl Access {
    /// Loopback names only: what a server on a developer machine accepts.
    pub fn loopback() -> Access {
        Access { hosts: vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()], origins: Vec::new() }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = match host.rsplit_once(':') {
            // `[::1]:4000`, `localhost:4000`; a bare IPv6 literal has no port.
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !name.is_empty() => name,
            _ => host,
        };
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
    }

    /// An `Origin` is accepted when listed, or when its host is an accepted
    /// `Host` name (a page served by this same deployment).
    fn origin_allowed(&self, origin: &str) -> bool {
        if self.origins.iter().any(|o| o == origin || o == "*") {
            return true;
        }
        origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(|rest| !rest.contains('/') && self.host_allowed(rest))
    }
}

/// A JSON-RPC answer: status, and the body (none for 202).
struct Answer {
    status: StatusCode,
    body: Option<Body>,
}

enum Body {
    Json(Value),
    /// `{"jsonrpc":"2.0","id":<id>,"result":<result>}` with `result`
    /// already serialized.
    Result {
        id: Value,
        result: Bytes,
    },
}

fn error(status: StatusCode, id: &Value, code: i64, message: &str, data: Option<Value>) -> Answer {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    Answer { status, body: Some(Body::Json(json!({"jsonrpc": "2.0", "id": id, "error": error}))) }
}

fn result(id: &Value, result: Value) -> Answer {
    Answer { status: StatusCode::OK, body: Some(Body::Json(json!({"jsonrpc": "2.0", "id": id, "result": result}))) }
}

/// Headers a request may carry once at most: with two, which one a check
/// reads and which one an intermediary acted on could differ (`Host` is
/// checked for every route, in `head`).
const SINGLE: [&str; 4] = ["origin", "mcp-method", "mcp-name", "mcp-protocol-version"];

/// Answers one `POST` to the endpoint. `body` is already bounded in size.
pub fn respond(access: &Access, published: Option<&Published>, headers: &HeaderMap, body: &Bytes) -> Reply {
    if let Some(name) = SINGLE.iter().find(|name| headers.get_all(**name).iter().nth(1).is_some()) {
        let message = format!("the {name} header is sent more than once");
        return reply(error(StatusCode::BAD_REQUEST, &Value::Null, INVALID_REQUEST, &message, None));
    }
    if let Some(refusal) = check_access(access, headers) {
        return reply(refusal);
    }
    reply(answer(published, headers, body))
}

/// A refusal made before the exchange (a method the endpoint does not
/// take, a body over its bound, a spent quota) as a JSON-RPC error, with
/// the headers its status calls for.
pub fn refusal(error: crate::reply::Error, body: Option<&Bytes>) -> Reply {
    // The request's id when its body was read and names a valid one, so a
    // client can match the refusal to its request.
    let id = body
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .and_then(|request| request.get("id").cloned())
        .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
        .unwrap_or(Value::Null);
    let code = if error.status == StatusCode::TOO_MANY_REQUESTS { RATE_LIMITED } else { INVALID_REQUEST };
    let mut reply = reply(self::error(error.status, &id, code, &error.message, None));
    crate::reply::Error::add_headers(error.headers, &mut reply);
    reply
}

fn check_access(access: &Access, headers: &HeaderMap) -> Option<Answer> {
    let text = |name: header::HeaderName| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if let Some(host) = text(header::HOST) {
        if !access.host_allowed(host.trim()) {
            return Some(error(StatusCode::FORBIDDEN, &Value::Null, INVALID_REQUEST, "Host not allowed", None));
        }
    }
    if let Some(origin) = text(header::ORIGIN) {
        if !access.origin_allowed(origin.trim()) {
            return Some(error(StatusCode::FORBIDDEN, &Value::Null, INVALID_REQUEST, "Origin not allowed", None));
        }
    }
    None
}

fn answer(published: Option<&Published>, headers: &HeaderMap, body: &Bytes) -> Answer {
    let bad = StatusCode::BAD_REQUEST;
    let request: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return error(bad, &Value::Null, PARSE_ERROR, &format!("the body is not JSON: {e}"), None),
    };
    // Which of two values of one key counts is left to each parser:
    // refused, as every body of the api is.
    if let Some(path) = crate::body::duplicate_key(body) {
        return error(bad, &Value::Null, INVALID_REQUEST, &format!("{path}: appears twice in its object"), None);
    }
    let Value::Object(request) = request else {
        let message = match request {
            Value::Array(_) => "batches are not supported: send one request per POST",
            _ => "a request must be a JSON object",
        };
        return error(bad, &Value::Null, INVALID_REQUEST, message, None);
    };
    let id = request.get("id").cloned();
    if id.as_ref().is_some_and(|id| !(id.is_string() || id.is_i64() || id.is_u64())) {
        return error(bad, &Value::Null, INVALID_REQUEST, "id must be a string or an integer", None);
    }
    let reply_id = id.clone().unwrap_or(Value::Null);
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return error(bad, &reply_id, INVALID_REQUEST, "jsonrpc must be \"2.0\"", None);
    }
    let Some(method) = request.get("method").and_then(Value::as_str) else {
        return error(bad, &reply_id, INVALID_REQUEST, "method must be a string", None);
    };
    let params = request.get("params");
    if params.is_some_and(|p| !p.is_object()) {
        return error(bad, &reply_id, INVALID_PARAMS, "params must be an object", None);
    }
    let Some(id) = id else {
        // A notification: nothing to answer, once its headers agree with
        // it and name a version we speak.
        if let Err(message) = header_matches(headers, "mcp-method", method) {
            return error(bad, &Value::Null, HEADER_MISMATCH, &message, None);
        }
        let meta = params.and_then(|p| p.get("_meta"));
        let version = meta.and_then(|m| m.get(META_VERSION)).and_then(Value::as_str);
        let version = match version {
            Some(version) => header_matches(headers, "mcp-protocol-version", version).map(|()| version.to_string()),
            None => header_text(headers, "mcp-protocol-version", || {
                "the mcp-protocol-version header is required".to_string()
            }),
        };
        return match version {
            Err(message) => error(bad, &Value::Null, HEADER_MISMATCH, &message, None),
            Ok(version) if !SUPPORTED.contains(&version.as_str()) => unsupported(&Value::Null, &version),
            Ok(_) => Answer { status: StatusCode::ACCEPTED, body: None },
        };
    };

    let meta = params.and_then(|p| p.get("_meta"));
    let version = meta.and_then(|m| m.get(META_VERSION)).and_then(Value::as_str);
    let capabilities = meta.and_then(|m| m.get(META_CAPABILITIES)).filter(|c| c.is_object());
    let (Some(version), Some(_)) = (version, capabilities) else {
        return error(
            bad,
            &id,
            INVALID_PARAMS,
            &format!("params._meta must carry {META_VERSION:?} (a string) and {META_CAPABILITIES:?} (an object)"),
            None,
        );
    };
    if let Err(message) = header_matches(headers, "mcp-protocol-version", version) {
        return error(bad, &id, HEADER_MISMATCH, &message, None);
    }
    if let Err(message) = header_matches(headers, "mcp-method", method) {
        return error(bad, &id, HEADER_MISMATCH, &message, None);
    }
    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    if method == "tools/call" {
        let Some(name) = name else {
            return error(bad, &id, INVALID_PARAMS, "tools/call needs params.name", None);
        };
        if let Err(message) = header_matches(headers, "mcp-name", name) {
            return error(bad, &id, HEADER_MISMATCH, &message, None);
        }
    }
    if !SUPPORTED.contains(&version) {
        return unsupported(&id, version);
    }

    match method {
        "server/discover" => result(
            &id,
            json!({
                "resultType": "complete",
                "supportedVersions": SUPPORTED,
                "capabilities": {"tools": {}},
                "instructions": "Read-only access to almanac's reviewed public guard datasets: product facts, \
                                 threat campaigns, harness coverage, defensive policies and benchmark results. \
                                 Every result lists its evidence and limitations.",
                "ttlMs": TTL_MS,
                "cacheScope": "public",
                "_meta": {"io.modelcontextprotocol/serverInfo": {
                    "name": "almanac-guard", "version": env!("CARGO_PKG_VERSION")}},
            }),
        ),
        "tools/list" => result(
            &id,
            json!({"resultType": "complete", "tools": tools::list(), "ttlMs": TTL_MS, "cacheScope": "public"}),
        ),
        "tools/call" => {
            let name = name.expect("checked above");
            let Some(published) = published else {
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &id,
                    INTERNAL_ERROR,
                    "this build publishes no guard data",
                    None,
                );
            };
            match published.call(name, params.and_then(|p| p.get("arguments"))) {
                Err(tools::Refused(message)) => error(bad, &id, INVALID_PARAMS, &message, None),
                Ok(Ok(result)) => Answer { status: StatusCode::OK, body: Some(Body::Result { id, result }) },
                Ok(Err(message)) => self::result(
                    &id,
                    json!({"resultType": "complete", "content": [{"type": "text", "text": message}], "isError": true}),
                ),
            }
        }
        other => {
            let message = format!("method {:?} not found", excerpt(other));
            error(StatusCode::NOT_FOUND, &id, METHOD_NOT_FOUND, &message, None)
        }
    }
}

fn unsupported(id: &Value, version: &str) -> Answer {
    error(
        StatusCode::BAD_REQUEST,
        id,
        UNSUPPORTED_VERSION,
        &format!("protocol version {:?} is not supported", excerpt(version)),
        Some(json!({"supported": SUPPORTED, "requested": version})),
    )
}

/// Header `name`, trimmed and with the base64 form decoded; `missing`
/// words the refusal when it is absent.
fn header_text(headers: &HeaderMap, name: &str, missing: impl FnOnce() -> String) -> Result<String, String> {
    let raw = headers.get(name).ok_or_else(missing)?;
    let value = raw.to_str().map_err(|_| format!("the {name} header is not text"))?;
    decode_header(value.trim()).ok_or_else(|| format!("the {name} header has invalid base64"))
}

/// Whether header `name` is present and, trimmed and decoded, equals
/// `expected` exactly (values are case-sensitive; names are not).
fn header_matches(headers: &HeaderMap, name: &str, expected: &str) -> Result<(), String> {
    let missing = || format!("the {name} header is required and must be {expected:?}");
    let value = header_text(headers, name, missing)?;
    if value != expected {
        return Err(format!(
            "the {name} header {:?} does not match the body's {:?}",
            excerpt(&value),
            excerpt(expected)
        ));
    }
    Ok(())
}

/// A header value, with the `=?base64?...?=` form decoded. Only the whole
/// wrapper marks base64; anything else is taken literally.
pub fn decode_header(value: &str) -> Option<String> {
    use base64::Engine;
    let Some(encoded) = value.strip_prefix("=?base64?").and_then(|v| v.strip_suffix("?=")) else {
        return Some(value.to_string());
    };
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
    String::from_utf8(bytes).ok()
}

fn reply(answer: Answer) -> Reply {
    let builder = Response::builder().status(answer.status).header(header::CACHE_CONTROL, "no-store");
    let bytes = match answer.body {
        Some(Body::Json(body)) => Bytes::from(serde_json::to_vec(&body).expect("answers serialise")),
        Some(Body::Result { id, result }) => {
            let id = serde_json::to_vec(&id).expect("ids serialise");
            let mut out = Vec::with_capacity(result.len() + id.len() + 40);
            out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            out.extend_from_slice(&id);
            out.extend_from_slice(b",\"result\":");
            out.extend_from_slice(&result);
            out.push(b'}');
            Bytes::from(out)
        }
        None => return builder.body(Default::default()).expect("valid MCP response"),
    };
    builder.header(header::CONTENT_TYPE, "application/json").body(bytes.into()).expect("valid MCP response")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_decode_only_in_the_full_base64_form() {
        let check = |raw: &str, expected: Option<&str>| assert_eq!(decode_header(raw).as_deref(), expected, "{raw}");
        check("tools/call", Some("tools/call"));
        check("=?base64?SGVsbG8=?=", Some("Hello"));
        check("=?base64?SGVsbG8?=", None); // missing padding
        check("=?base64?SGVs!!!bG8=?=", None); // not the alphabet
        check("SGVsbG8=", Some("SGVsbG8=")); // no wrapper: literal
        check("=?base64?SGVsbG8=", Some("=?base64?SGVsbG8=")); // no closing ?=: literal
    }

    /// A body whose one key is given twice is refused whichever key it is,
    /// and the same body without the repetition is not refused for it.
    #[tokio::test]
    async fn a_key_twice_in_one_object_is_refused() {
        let access = Access::loopback();
        let headers = HeaderMap::new();
        let ask = async |body: &'static str| {
            let reply = respond(&access, None, &headers, &Bytes::from_static(body.as_bytes()));
            let status = reply.status();
            let body = http_body_util::BodyExt::collect(reply.into_body()).await.unwrap().to_bytes();
            (status, String::from_utf8(body.to_vec()).unwrap())
        };
        for (body, path) in [
            (r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}"#, "method"),
            (r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"ping"}"#, "jsonrpc"),
            (r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#, "params.name"),
        ] {
            let (status, answer) = ask(body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
            assert!(answer.contains(&format!("{path}: appears twice")), "{body}: {answer}");
        }
        let (_, answer) = ask(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await;
        assert!(!answer.contains("appears twice"), "{answer}");
    }

    #[test]
    fn hosts_and_origins() {
        let access = Access { origins: vec!["https://app.example".into()], ..Access::loopback() };
        for (host, ok) in [
            ("localhost", true),
            ("localhost:4000", true),
            ("127.0.0.1:80", true),
            ("[::1]:4000", true),
            ("LOCALHOST", true),
            ("evil.example.com", false),
            ("localhost.evil.com", false),
            ("127.0.0.1.nip.io", false),
        ] {
            assert_eq!(access.host_allowed(host), ok, "Host {host}");
        }
        for (origin, ok) in [
            ("http://localhost:3000", true),
            ("https://app.example", true),
            ("http://evil.example.com", false),
            ("https://app.example.evil", false),
            ("null", false),
        ] {
            assert_eq!(access.origin_allowed(origin), ok, "Origin {origin}");
        }
    }
}
