//! Demo agents, so that `make run` has something to chat with and no
//! network is needed: an A2A 1.0 agent with streaming, and a plain HTTP
//! JSON agent, both rule-based. `datasets/broker/demo-agents.json` indexes
//! them at their default addresses.
//!
//! The A2A agent is as strict as a v1.0 server without the v0.3 layer
//! (`@a2a-js/sdk` with its defaults): a request without `A2A-Version: 1.0`
//! is JSON-RPC error -32009; a malformed envelope or message is refused
//! with the JSON-RPC codes; the tests use it as a well-behaved peer.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use warp::http::{HeaderMap, Response, StatusCode};
use warp::Filter;

/// Where `make run`'s demo agents listen (and the dataset says they are).
pub const A2A_ADDR: &str = "127.0.0.1:4101";
pub const HTTP_ADDR: &str = "127.0.0.1:4102";

/// The rule the agents answer by: what was said, counted.
pub fn answer(text: &str) -> String {
    let words = text.split_whitespace().count();
    format!("You said \"{}\" ({words} word{}).", text.trim(), if words == 1 { "" } else { "s" })
}

fn json_response(status: StatusCode, body: &Value) -> warp::reply::Response {
    let mut response = Response::new(body.to_string().into());
    *response.status_mut() = status;
    response.headers_mut().insert("content-type", "application/json".parse().expect("a content type"));
    response
}

fn rpc_error(id: &Value, code: i64, message: &str) -> warp::reply::Response {
    json_response(StatusCode::OK, &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

/// The agent card of an A2A agent whose JSON-RPC endpoint is `url`.
pub fn card(url: &str) -> Value {
    json!({
        "name": "Almanac Echo",
        "description": "A demo A2A agent: it says back what it is told, word by word when asked to stream.",
        "version": "1.0.0",
        "provider": {"url": "https://github.com/almanac", "organization": "almanac"},
        "capabilities": {"streaming": true, "pushNotifications": false, "extensions": []},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "Says back what it is told.", "tags": ["demo"],
            "examples": ["hello"], "inputModes": ["text/plain"], "outputModes": ["text/plain"]}],
        "securitySchemes": {},
        "securityRequirements": [],
        "signatures": [],
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "tenant": "", "protocolVersion": "1.0"}],
    })
}

/// The A2A agent's routes, its JSON-RPC endpoint at `url`; each streamed
/// word waits `pace`.
pub fn a2a(
    url: String,
    pace: Duration,
) -> impl Filter<Extract = (warp::reply::Response,), Error = warp::Rejection> + Clone {
    let card_body = card(&url);
    let card = warp::path!(".well-known" / "agent-card.json")
        .and(warp::get())
        .map(move || json_response(StatusCode::OK, &card_body));
    let rpc = warp::path::end()
        .and(warp::post())
        .and(warp::header::headers_cloned())
        .and(warp::body::content_length_limit(1 << 20))
        .and(warp::body::bytes())
        .map(move |headers: HeaderMap, body: Bytes| rpc(&headers, &body, pace));
    card.or(rpc).unify()
}

/// Reads a JSON-RPC request of A2A 1.0 and answers it.
fn rpc(headers: &HeaderMap, body: &[u8], pace: Duration) -> warp::reply::Response {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return rpc_error(&Value::Null, -32700, "Parse error");
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    if request["jsonrpc"] != "2.0" || !request["method"].is_string() {
        return rpc_error(&id, -32600, "Invalid Request");
    }
    let version = headers.get("a2a-version").and_then(|v| v.to_str().ok()).unwrap_or("0.3");
    if version != "1.0" {
        return rpc_error(&id, -32009, "VERSION_NOT_SUPPORTED: this agent speaks A2A 1.0 (send A2A-Version: 1.0)");
    }
    let method = request["method"].as_str().unwrap_or_default();
    if !matches!(method, "SendMessage" | "SendStreamingMessage") {
        return rpc_error(&id, -32601, "Method not found");
    }
    let message = &request["params"]["message"];
    let parts = message["parts"].as_array().filter(|p| !p.is_empty());
    let valid = message["messageId"].as_str().is_some_and(|m| !m.is_empty()) && message["role"] == "ROLE_USER";
    let (true, Some(parts)) = (valid, parts) else {
        return rpc_error(&id, -32602, "Invalid params: message needs messageId, role ROLE_USER and parts");
    };
    if parts.iter().any(|p| p.get("kind").is_some()) {
        return rpc_error(&id, -32602, "Invalid params: a 1.0 part has no kind");
    }
    let text: String = parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("");
    let context = message["contextId"]
        .as_str()
        .map(String::from)
        .unwrap_or_else(|| format!("ctx-{}", shared::http::hex(&crate::store::random::<8>())));
    let reply = answer(&text);
    let reply_id = format!("msg-{}", shared::http::hex(&crate::store::random::<8>()));
    if method == "SendMessage" {
        let result = json!({"message": {"messageId": reply_id, "contextId": context, "role": "ROLE_AGENT",
            "parts": [{"text": reply}]}});
        return json_response(StatusCode::OK, &json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }
    // A task whose one artifact arrives a word at a time, then completed.
    let task = format!("task-{}", shared::http::hex(&crate::store::random::<8>()));
    let mut results = vec![json!({"task": {"id": task, "contextId": context,
        "status": {"state": "TASK_STATE_WORKING"}, "artifacts": [], "history": []}})];
    let words: Vec<String> = reply.split_inclusive(' ').map(String::from).collect();
    let last = words.len().saturating_sub(1);
    for (i, word) in words.into_iter().enumerate() {
        results.push(json!({"artifactUpdate": {"taskId": task, "contextId": context,
            "artifact": {"artifactId": "reply", "name": "reply", "parts": [{"text": word}]},
            "append": i > 0, "lastChunk": i == last}}));
    }
    results.push(
        json!({"statusUpdate": {"taskId": task, "contextId": context, "status": {"state": "TASK_STATE_COMPLETED"}}}),
    );
    let events =
        futures_util::stream::unfold((results.into_iter(), id, true), move |(mut rest, id, first)| async move {
            let result = rest.next()?;
            if !first {
                tokio::time::sleep(pace).await;
            }
            let event = json!({"jsonrpc": "2.0", "id": id, "result": result});
            Some((Ok::<_, Infallible>(Bytes::from(format!("data: {event}\n\n"))), (rest, id, false)))
        });
    let mut response = warp::Reply::into_response(warp::reply::stream(events));
    response.headers_mut().insert("content-type", "text/event-stream".parse().expect("a content type"));
    response
}

/// The plain HTTP agent's route: `POST /chat {message, sessionId,
/// history}` answers `{reply, turn}`.
pub fn plain() -> impl Filter<Extract = (warp::reply::Response,), Error = warp::Rejection> + Clone {
    warp::path!("chat").and(warp::post()).and(warp::body::content_length_limit(1 << 20)).and(warp::body::bytes()).map(
        |body: Bytes| {
            let Ok(request) = serde_json::from_slice::<Value>(&body) else {
                return json_response(StatusCode::BAD_REQUEST, &json!({"error": "the body must be JSON"}));
            };
            let Some(message) = request["message"].as_str() else {
                return json_response(StatusCode::BAD_REQUEST, &json!({"error": "message is required"}));
            };
            let turn =
                request["history"].as_array().map_or(0, |h| h.iter().filter(|m| m["role"] == "user").count()) + 1;
            json_response(StatusCode::OK, &json!({"reply": answer(message), "turn": turn}))
        },
    )
}

/// Serves both demo agents until the process ends; a port already taken
/// is logged and skipped.
pub async fn serve(a2a_addr: SocketAddr, http_addr: SocketAddr) {
    let url = format!("http://{a2a_addr}/");
    match tokio::net::TcpListener::bind(a2a_addr).await {
        Ok(listener) => {
            tokio::spawn(warp::serve(a2a(url, Duration::from_millis(40))).incoming(listener).run());
            tracing::info!(%a2a_addr, "demo A2A agent listening");
        }
        Err(e) => tracing::warn!(%a2a_addr, error = %e, "demo A2A agent: cannot listen"),
    }
    match tokio::net::TcpListener::bind(http_addr).await {
        Ok(listener) => {
            tokio::spawn(warp::serve(plain()).incoming(listener).run());
            tracing::info!(%http_addr, "demo HTTP agent listening");
        }
        Err(e) => tracing::warn!(%http_addr, error = %e, "demo HTTP agent: cannot listen"),
    }
}
