//! MCP servers as chat agents, over streamable HTTP: a chat turn becomes
//! a `tools/list` or a `tools/call`. The message is `tools` (or `list`)
//! for the list, or a tool's name optionally followed by its arguments as
//! a JSON object (`search {"q": "tide"}`), or the JSON `{"tool": name,
//! "arguments": {…}}`; the reply is the tool's text content.
//!
//! Two dialects: the stateful protocol (2025-06-18: `initialize`, then the
//! session id the server gives, and `notifications/initialized`), and the
//! stateless one (2026-07-28: no `initialize`; each request carries its
//! version and capabilities in `params._meta` and the `MCP-Protocol-
//! Version`, `Mcp-Method` and `Mcp-Name` headers), used when a server
//! refuses `initialize` as an unknown method.

use serde_json::{json, Value};

use super::sse;
use super::turn::{read_bounded, Failure, Reply, Turn};
use crate::egress::Gate;

pub const STATEFUL: &str = "2025-06-18";
pub const STATELESS: &str = "2026-07-28";

/// How a server is spoken to.
#[derive(Clone, Debug, PartialEq)]
pub struct Server {
    pub url: String,
    pub stateless: bool,
}

/// A session with a stateful server (its id), or none.
struct Session {
    id: Option<String>,
}

/// The JSON-RPC answer to request `id` in a response (JSON, or the event
/// of a stream that carries it).
async fn answer(response: reqwest::Response, id: u64, max_bytes: usize) -> Result<Value, Failure> {
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let bytes = read_bounded(response, max_bytes).await?;
    let candidates: Vec<Value> = if is_sse {
        let mut decoder = sse::Decoder::new(max_bytes);
        let mut events =
            decoder.feed(&bytes).map_err(|_| Failure::Garbage("the server's stream has an overlong line".into()))?;
        events.extend(decoder.feed(b"\n\n").unwrap_or_default());
        events.iter().filter_map(|e| serde_json::from_str(e).ok()).collect()
    } else {
        vec![serde_json::from_slice(&bytes).map_err(|_| Failure::Garbage("the server's answer is not JSON".into()))?]
    };
    candidates
        .into_iter()
        .find(|c| c["id"] == json!(id))
        .ok_or_else(|| Failure::Garbage("the server did not answer the request".into()))
}

/// What every request to a server shares.
struct Link<'a> {
    gate: &'a Gate,
    server: &'a Server,
    turn: &'a Turn<'a>,
    max_bytes: usize,
}

/// Sends one JSON-RPC request (or, without `id`, a notification).
async fn call(
    link: &Link<'_>,
    session: &Session,
    method: &str,
    mut params: Value,
    id: Option<u64>,
) -> Result<Option<(reqwest::header::HeaderMap, Value)>, Failure> {
    let (gate, server, turn, max_bytes) = (link.gate, link.server, link.turn, link.max_bytes);
    let version = if server.stateless { STATELESS } else { STATEFUL };
    let mut builder = gate
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if server.stateless {
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {}});
        builder = builder.header("mcp-protocol-version", version).header("mcp-method", method);
        if let Some(name) = params["name"].as_str() {
            builder = builder.header("mcp-name", name);
        }
    } else if method != "initialize" {
        builder = builder.header("mcp-protocol-version", version);
    }
    if let Some(session) = &session.id {
        builder = builder.header("mcp-session-id", session);
    }
    builder = builder.credentials(turn.headers);
    let mut message = json!({"jsonrpc": "2.0", "method": method, "params": params});
    if let Some(id) = id {
        message["id"] = json!(id);
    }
    let response = builder.body(message.to_string()).send().await?;
    let Some(id) = id else { return Ok(None) };
    let headers = response.headers().clone();
    let status = response.status();
    let answer = answer(response, id, max_bytes).await.map_err(|failure| match status.is_success() {
        true => failure,
        false => Failure::Refused(format!("the server answered {status}")),
    })?;
    Ok(Some((headers, answer)))
}

fn rpc_error(answer: &Value) -> Option<(i64, String)> {
    let error = answer.get("error")?;
    Some((error["code"].as_i64().unwrap_or(0), error["message"].as_str().unwrap_or("an error").to_string()))
}

/// Sends `initialize` (the stateful dialect): the session the server
/// gives, or why it refused.
async fn initialize(link: &Link<'_>) -> Result<Session, Failure> {
    let params = json!({"protocolVersion": STATEFUL, "capabilities": {},
        "clientInfo": {"name": "almanac", "version": env!("CARGO_PKG_VERSION")}});
    let (headers, answer) = call(link, &Session { id: None }, "initialize", params, Some(0)).await?.expect("a request");
    if let Some((code, message)) = rpc_error(&answer) {
        return Err(Failure::Refused(format!("the server refused initialize ({code}): {message}")));
    }
    Ok(Session { id: headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(String::from) })
}

/// Opens a conversation: `initialize` (stateful), or nothing (stateless).
async fn begin(link: &Link<'_>) -> Result<Session, Failure> {
    if link.server.stateless {
        return Ok(Session { id: None });
    }
    let session = initialize(link).await?;
    call(link, &session, "notifications/initialized", json!({}), None).await?;
    Ok(session)
}

/// Finds how to speak to the server at `url`: stateful if it takes
/// `initialize`; else stateless if it answers `server/discover` so.
pub async fn connect(gate: &Gate, url: &str, max_bytes: usize) -> Result<Server, Failure> {
    connect_opening(gate, url, max_bytes).await.map(|(server, _)| server)
}

/// Whether the server at `url` speaks MCP, asked as [`connect`] asks it;
/// the session a stateful server opened for the question is ended at
/// once (DELETE, as the transport asks of a client done with one).
pub async fn probe(gate: &Gate, url: &str, max_bytes: usize) -> Result<(), Failure> {
    let (_, session) = connect_opening(gate, url, max_bytes).await?;
    if let Some(id) = session.id {
        // The answer does not matter: a server may keep sessions until
        // they expire (405).
        let end = gate.call(reqwest::Method::DELETE, url, crate::egress::Trust::Judged);
        let _ = end.header("mcp-session-id", &id).header("mcp-protocol-version", STATEFUL).send().await;
    }
    Ok(())
}

/// [`connect`], and the session `initialize` opened (stateful servers).
async fn connect_opening(gate: &Gate, url: &str, max_bytes: usize) -> Result<(Server, Session), Failure> {
    let stateful = Server { url: url.to_string(), stateless: false };
    let headers = Default::default();
    let turn = Turn { text: "", session: "", context: None, history: &[], headers: &headers };
    let link = Link { gate, server: &stateful, turn: &turn, max_bytes };
    let refused = match initialize(&link).await {
        Ok(session) => return Ok((stateful, session)),
        Err(Failure::Unreachable(why)) => return Err(Failure::Unreachable(why)),
        Err(other) => other,
    };
    let stateless = Server { url: url.to_string(), stateless: true };
    let link = Link { gate, server: &stateless, turn: &turn, max_bytes };
    match call(&link, &Session { id: None }, "server/discover", json!({}), Some(0)).await {
        Ok(Some((_, answer))) if answer.get("result").is_some() => Ok((stateless, Session { id: None })),
        _ => Err(refused),
    }
}

/// What a message asks of the server.
#[derive(Debug, PartialEq)]
enum Ask {
    List,
    Call { name: String, arguments: Value },
}

fn read_ask(text: &str) -> Result<Ask, Failure> {
    let text = text.trim();
    if matches!(text.to_ascii_lowercase().as_str(), "tools" | "list" | "tools/list" | "help") {
        return Ok(Ask::List);
    }
    let bad = |why: &str| Failure::Refused(format!("{why}: send `tools`, or a tool's name and its arguments as JSON"));
    if text.starts_with('{') {
        let value: Value = serde_json::from_str(text).map_err(|_| bad("the message is not JSON"))?;
        let name = value["tool"].as_str().ok_or_else(|| bad("the message names no tool"))?.to_string();
        let arguments = value.get("arguments").cloned().unwrap_or(json!({}));
        return Ok(Ask::Call { name, arguments });
    }
    let (name, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let arguments = match rest.trim() {
        "" => json!({}),
        json => serde_json::from_str::<Value>(json)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| bad("the arguments are not a JSON object"))?,
    };
    Ok(Ask::Call { name: name.to_string(), arguments })
}

/// One turn: the list of tools, or a tool's result.
pub async fn send(gate: &Gate, server: &Server, turn: &Turn<'_>, max_bytes: usize) -> Result<Reply, Failure> {
    let ask = read_ask(turn.text)?;
    let link = Link { gate, server, turn, max_bytes };
    let session = begin(&link).await?;
    let (method, params) = match &ask {
        Ask::List => ("tools/list", json!({})),
        Ask::Call { name, arguments } => ("tools/call", json!({"name": name, "arguments": arguments})),
    };
    let (_, answer) = call(&link, &session, method, params, Some(1)).await?.expect("a request");
    if let Some((code, message)) = rpc_error(&answer) {
        return Err(Failure::Refused(format!("the server answered error {code}: {message}")));
    }
    let result = answer["result"].clone();
    let text = match ask {
        Ask::List => {
            let tools = result["tools"].as_array().cloned().unwrap_or_default();
            let lines: Vec<String> = tools
                .iter()
                .map(|t| format!("{}: {}", t["name"].as_str().unwrap_or("?"), t["description"].as_str().unwrap_or("")))
                .collect();
            format!("{} tools:\n{}", lines.len(), lines.join("\n"))
        }
        Ask::Call { .. } => {
            let parts: Vec<&str> =
                result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
            let text = parts.join("\n");
            if result["isError"] == json!(true) {
                return Err(Failure::Refused(format!("the tool failed: {text}")));
            }
            text
        }
    };
    Ok(Reply { text, context: None, raw: result })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_become_a_list_or_a_call() {
        let check = |text: &str, expected: Result<Ask, ()>| {
            assert_eq!(read_ask(text).map_err(|_| ()), expected, "{text}");
        };
        check("tools", Ok(Ask::List));
        check("  LIST ", Ok(Ask::List));
        check("search", Ok(Ask::Call { name: "search".into(), arguments: json!({}) }));
        check("search {\"q\": \"tide\"}", Ok(Ask::Call { name: "search".into(), arguments: json!({"q": "tide"}) }));
        check(
            "{\"tool\": \"search\", \"arguments\": {\"q\": 1}}",
            Ok(Ask::Call { name: "search".into(), arguments: json!({"q": 1}) }),
        );
        check("search [1]", Err(()));
        check("search {oops", Err(()));
        check("{\"arguments\": {}}", Err(()));
    }
}
