//! A small OpenAI-compatible model server on 127.0.0.1, as strict as the
//! real chat completions API where the api touches it:
//!
//! - `POST /v1/chat/completions` needs `Authorization: Bearer <key>` (401
//!   `invalid_api_key`); a JSON body whose parameters are all known (400
//!   "Unrecognized request argument supplied"); a `model` it serves (404
//!   `model_not_found`); a non-empty `messages` of `{role, content}` with
//!   a known role and string content (400); `stream_options` only with
//!   `stream: true` (400);
//! - it answers `chat.completion` with `usage`, or, streaming,
//!   `chat.completion.chunk`s of `delta.content`, a last chunk with
//!   `usage` when `stream_options.include_usage`, then `data: [DONE]`;
//! - its reply says how many lines and words it was given (a summariser
//!   and a chat model at once), and usage counts words as tokens.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};
use warp::http::{Response, StatusCode};
use warp::Filter;

pub const MODEL: &str = "almanac-test-1";
const KNOWN: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "temperature",
    "max_tokens",
    "max_completion_tokens",
    "top_p",
    "n",
    "stop",
    "user",
];

pub struct ModelServer {
    pub addr: SocketAddr,
    pub key: String,
    /// Requests answered (of any outcome).
    pub calls: Arc<AtomicUsize>,
    /// While set, every call fails with 500.
    pub failing: Arc<AtomicBool>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

fn error(status: StatusCode, code: &str, message: &str) -> warp::reply::Response {
    let body = json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": code}});
    let mut response = Response::new(body.to_string().into());
    *response.status_mut() = status;
    response.headers_mut().insert("content-type", "application/json".parse().unwrap());
    response
}

/// The reply to `messages`, and its usage (words as tokens).
pub fn reply(messages: &[Value]) -> (String, u64, u64) {
    let text: Vec<&str> = messages.iter().filter_map(|m| m["content"].as_str()).collect();
    let prompt: u64 = text.iter().map(|t| t.split_whitespace().count() as u64).sum();
    let last = messages.iter().rev().find(|m| m["role"] == "user").and_then(|m| m["content"].as_str()).unwrap_or("");
    let lines = last.lines().count();
    let answer = format!("Read {lines} lines and {} words.", last.split_whitespace().count());
    let completion = answer.split_whitespace().count() as u64;
    (answer, prompt, completion)
}

impl ModelServer {
    pub async fn start(key: &str) -> ModelServer {
        let (calls, failing) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (secret, counted, fails) = (key.to_string(), calls.clone(), failing.clone());
        let route = warp::path!("v1" / "chat" / "completions")
            .and(warp::post())
            .and(warp::header::optional::<String>("authorization"))
            .and(warp::body::bytes())
            .map(move |auth: Option<String>, body: Bytes| {
                counted.fetch_add(1, Ordering::SeqCst);
                if fails.load(Ordering::SeqCst) {
                    return error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", "The server had an error");
                }
                if auth.as_deref() != Some(&format!("Bearer {secret}")) {
                    return error(StatusCode::UNAUTHORIZED, "invalid_api_key", "Incorrect API key provided");
                }
                answer(&body)
            });
        let (addr, tx) = crate::serve_on_loopback(route).await;
        ModelServer { addr, key: key.to_string(), calls, failing, shutdown: Some(tx) }
    }

    /// The API base, as a client is configured with it.
    pub fn base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn answer(body: &[u8]) -> warp::reply::Response {
    let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(body) else {
        return error(StatusCode::BAD_REQUEST, "invalid_json", "We could not parse the JSON body of your request.");
    };
    if let Some(unknown) = request.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return error(
            StatusCode::BAD_REQUEST,
            "unknown_parameter",
            &format!("Unrecognized request argument supplied: {unknown}"),
        );
    }
    let model = request.get("model").and_then(Value::as_str).unwrap_or_default();
    if model != MODEL {
        return error(StatusCode::NOT_FOUND, "model_not_found", &format!("The model `{model}` does not exist"));
    }
    let messages = request.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    let valid = |m: &Value| {
        matches!(m["role"].as_str(), Some("system" | "user" | "assistant" | "developer" | "tool"))
            && m["content"].is_string()
    };
    if messages.is_empty() || !messages.iter().all(valid) {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_value",
            "Invalid 'messages': each needs a role and string content.",
        );
    }
    let streaming = request.get("stream") == Some(&json!(true));
    if request.contains_key("stream_options") && !streaming {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_value",
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
        );
    }
    let (text, prompt, completion) = reply(&messages);
    let usage = json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion});
    if !streaming {
        let body = json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1_800_000_000, "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": usage});
        let mut response = Response::new(body.to_string().into());
        response.headers_mut().insert("content-type", "application/json".parse().unwrap());
        return response;
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_800_000_000, "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
    events.extend(text.split_inclusive(' ').map(|w| chunk(json!({"content": w}), Value::Null)));
    events.push(chunk(json!({}), json!("stop")));
    if request["stream_options"]["include_usage"] == json!(true) {
        events.push(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_800_000_000, "model": MODEL,
            "choices": [], "usage": usage}),
        );
    }
    let mut lines: Vec<Result<Bytes, std::io::Error>> =
        events.into_iter().map(|e| Ok(Bytes::from(format!("data: {e}\n\n")))).collect();
    lines.push(Ok(Bytes::from_static(b"data: [DONE]\n\n")));
    let mut response = warp::Reply::into_response(warp::reply::stream(futures_util::stream::iter(lines)));
    response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
    response
}
