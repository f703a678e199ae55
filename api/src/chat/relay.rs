//! Relaying a chat turn to an agent: which adapter speaks to it (the one
//! table [`ADAPTERS`] the code dispatches on and `/adapters/details`
//! describes), the turn and its reply, and how a relay fails.
//!
//! Adapters here: A2A ([`super::a2a`]) and plain HTTP JSON agents
//! ([`plain`]). An agent reachable only by a protocol no adapter speaks
//! (HCS-10 without a ledger client, XMTP, …) cannot be chatted with.

use futures_util::StreamExt;
use serde_json::{json, Value};
use warp::http::{HeaderMap, HeaderName, HeaderValue};

use super::a2a;
use super::openai::Providers;
pub use super::turn::{read_bounded, Chunk, Failure, Reply, Turn};
use crate::egress::Gate;

/// How the broker reaches an agent.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    A2a(a2a::Card),
    /// POST a message, read a reply.
    Plain {
        url: String,
    },
    /// A model-routing provider's OpenAI-compatible API and the model.
    OpenAi {
        base: String,
        model: String,
    },
    /// An MCP server: a turn is a `tools/list` or `tools/call`.
    Mcp(super::mcp::Server),
}

impl Target {
    /// Its adapter's endpoint name in the table.
    pub fn adapter(&self) -> &'static str {
        match self {
            Target::A2a(_) => "a2a",
            Target::Plain { .. } => "http",
            Target::OpenAi { .. } => "openrouter",
            Target::Mcp(_) => "mcp",
        }
    }

    /// Whether its messages are billed from usage (a payer is needed).
    pub fn metered(&self) -> bool {
        matches!(self, Target::OpenAi { .. })
    }

    /// As stored with a session (and shown, in part, by a connection's
    /// status).
    pub fn to_json(&self) -> Value {
        match self {
            Target::A2a(card) => json!({"adapter": "a2a", "url": card.url, "protocolVersion": card.version.as_str(),
                "streaming": card.streaming, "name": card.name, "description": card.description, "skills": card.skills}),
            Target::Plain { url } => json!({"adapter": "http", "url": url}),
            Target::OpenAi { base, model } => json!({"adapter": "openrouter", "url": base, "model": model}),
            Target::Mcp(server) => json!({"adapter": "mcp", "url": server.url,
                "protocolVersion": if server.stateless { super::mcp::STATELESS } else { super::mcp::STATEFUL }}),
        }
    }

    /// Read back from [`Target::to_json`]; `None` for anything else.
    pub fn from_json(value: &Value) -> Option<Target> {
        let text = |k: &str| value[k].as_str().unwrap_or_default().to_string();
        Some(match value["adapter"].as_str()? {
            "a2a" => Target::A2a(a2a::Card {
                name: text("name"),
                description: text("description"),
                streaming: value["streaming"].as_bool().unwrap_or(false),
                skills: value["skills"].as_array()?.iter().filter_map(Value::as_str).map(String::from).collect(),
                url: text("url"),
                version: a2a::Version::parse(&text("protocolVersion"))?,
            }),
            "http" => Target::Plain { url: text("url") },
            "openrouter" => Target::OpenAi { base: text("url"), model: text("model") },
            "mcp" => Target::Mcp(super::mcp::Server {
                url: text("url"),
                stateless: text("protocolVersion") == super::mcp::STATELESS,
            }),
            _ => return None,
        })
    }
}

/// The adapters, in the order an agent's endpoints are tried: the
/// generator's table, from which the build marks agents chattable and
/// describes `/adapters/details`.
pub use broker_model::chat::{ChatAdapter, CHAT_ADAPTERS as ADAPTERS};

/// Finds how to reach an agent from its endpoints (name to URL), in the
/// order of [`ADAPTERS`]: an A2A agent's card is fetched now.
pub async fn target(gate: &Gate, agent: &broker_model::Agent, max_bytes: usize) -> Result<Target, Failure> {
    let endpoints = &agent.endpoints;
    if let Some(adapter) = broker_model::chat::adapter_for(endpoints.keys().map(String::as_str)) {
        let url = &endpoints[adapter.endpoint];
        return match adapter.endpoint {
            "a2a" => Ok(Target::A2a(a2a::discover(gate, url, max_bytes).await?)),
            "http" => {
                gate.judge(url)?;
                Ok(Target::Plain { url: url.clone() })
            }
            "mcp" => Ok(Target::Mcp(super::mcp::connect(gate, url, max_bytes).await?)),
            "openrouter" => {
                // The model: the agent's metadata, else its profile's.
                let model = agent.metadata.get("model").and_then(|m| m.as_str()).map(String::from);
                let model = model.or_else(|| agent.profile.ai_agent.as_ref().map(|a| a.model.clone()));
                let model = model.ok_or_else(|| Failure::Unsupported("the provider agent names no model".into()))?;
                Ok(Target::OpenAi { base: url.clone(), model })
            }
            other => Err(Failure::Unsupported(format!("the {other} adapter is in the table but not here"))),
        };
    }
    let names: Vec<&str> = endpoints.keys().map(String::as_str).collect();
    Err(Failure::Unsupported(format!(
        "the agent is reachable only by {} here; this broker chats over {}",
        if names.is_empty() { "no endpoint".to_string() } else { names.join(", ") },
        ADAPTERS.iter().map(|a| a.protocol).collect::<Vec<_>>().join(" and ")
    )))
}

/// The target of an agent URL: an A2A agent if it has a card, else a
/// plain HTTP agent.
pub async fn target_of_url(gate: &Gate, url: &str, max_bytes: usize) -> Result<Target, Failure> {
    match a2a::discover(gate, url, max_bytes).await {
        Ok(card) => Ok(Target::A2a(card)),
        Err(failure @ (Failure::Unreachable(_) | Failure::Unsupported(_) | Failure::NotAllowed)) => Err(failure),
        Err(_) => Ok(Target::Plain { url: url.to_string() }),
    }
}

/// One turn, answered whole.
pub async fn send(
    gate: &Gate,
    providers: &Providers,
    target: &Target,
    turn: &Turn<'_>,
    max_bytes: usize,
) -> Result<Reply, Failure> {
    match target {
        Target::A2a(card) => a2a::send(gate, card, turn, max_bytes).await,
        Target::Plain { url } => plain::send(gate, url, turn, max_bytes).await,
        Target::Mcp(server) => super::mcp::send(gate, server, turn, max_bytes).await,
        Target::OpenAi { base, model } => {
            let provider = providers.provider(base, model);
            let completion = super::openai::complete(gate, &provider, &messages(turn), max_bytes).await?;
            Ok(Reply { text: completion.text, context: None, raw: completion.raw })
        }
    }
}

/// A turn as chat completion messages: the history, then the message.
fn messages(turn: &Turn<'_>) -> Vec<Value> {
    let earlier = turn
        .history
        .iter()
        .map(|(role, text)| json!({"role": if role == "agent" { "assistant" } else { "user" }, "content": text}));
    earlier.chain([json!({"role": "user", "content": turn.text})]).collect()
}

/// One turn, streamed where the agent streams (else one chunk).
pub async fn stream(
    gate: &Gate,
    providers: &Providers,
    target: &Target,
    turn: &Turn<'_>,
    max_bytes: usize,
) -> Result<futures_util::stream::BoxStream<'static, Result<Chunk, Failure>>, Failure> {
    Ok(match target {
        Target::A2a(card) if card.streaming => a2a::stream(gate, card, turn, max_bytes).await?.boxed(),
        Target::OpenAi { base, model } => {
            let provider = providers.provider(base, model);
            super::openai::stream(gate, &provider, &messages(turn), max_bytes).await?.boxed()
        }
        _ => {
            let reply = send(gate, providers, target, turn, max_bytes).await?;
            futures_util::stream::iter([Ok(Chunk::Text(reply.text.clone())), Ok(Chunk::Done(reply))]).boxed()
        }
    })
}

/// How much authentication a session may bring and the api hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuthBounds {
    /// Headers one session's `auth` may make.
    pub max_headers: usize,
    /// Bytes of names and values one session's `auth` may make.
    pub max_bytes: usize,
    /// Bytes held for all sessions together.
    pub max_held_bytes: usize,
}

/// The bytes `headers` hold: names and values (what the bounds count).
pub fn auth_size(headers: &HeaderMap) -> usize {
    headers.iter().map(|(name, value)| name.as_str().len() + value.len()).sum()
}

/// Session authentication (the request's `auth`) as the headers sent to
/// the agent, within `bounds`: the number of headers is checked before
/// any is made (a `HeaderMap` panics past 32,768 entries), their bytes
/// once made. The error says which rule the `auth` broke.
pub fn auth_headers(auth: &Value, bounds: AuthBounds) -> Result<HeaderMap, BadAuth> {
    let too_many = || BadAuth::TooLarge(format!("at most {} headers", bounds.max_headers));
    // Those listed, then (with the named form's one) those made.
    if auth["headers"].as_object().map_or(0, |h| h.len()) > bounds.max_headers {
        return Err(too_many());
    }
    let headers = auth_header_map(auth).map_err(BadAuth::Invalid)?;
    if headers.len() > bounds.max_headers {
        return Err(too_many());
    }
    let size = auth_size(&headers);
    if size > bounds.max_bytes {
        let rule = format!("at most {} bytes of header names and values (these are {size})", bounds.max_bytes);
        return Err(BadAuth::TooLarge(rule));
    }
    Ok(headers)
}

/// Why a session's `auth` is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadAuth {
    /// Past the bounds.
    #[error("{0}")]
    TooLarge(String),
    /// Not a form the broker reads.
    #[error("{0}")]
    Invalid(&'static str),
}

fn auth_header_map(auth: &Value) -> Result<HeaderMap, &'static str> {
    /// Headers that frame or route the request: the broker's to set.
    const RESERVED: &[&str] = &[
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "upgrade",
        "te",
        "trailer",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
    ];
    if !auth.is_object() {
        return Err("must be an object");
    }
    let mut headers = HeaderMap::new();
    let text = |name: &str| auth[name].as_str().filter(|s| !s.is_empty());
    let mut put = |name: &str, value: String| -> Result<(), &'static str> {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| "a header name is not valid")?;
        if RESERVED.contains(&name.as_str()) {
            return Err("a header the broker sets itself cannot be sent");
        }
        let value = HeaderValue::from_str(&value).map_err(|_| "a header value is not valid")?;
        headers.insert(name, value);
        Ok(())
    };
    match text("type") {
        None if text("token").is_some() => put("authorization", format!("Bearer {}", text("token").unwrap()))?,
        None => {}
        Some("bearer") => put("authorization", format!("Bearer {}", text("token").ok_or("bearer auth needs token")?))?,
        Some("basic") => {
            use base64::Engine as _;
            let user = text("username").ok_or("basic auth needs username")?;
            let pair = format!("{user}:{}", text("password").unwrap_or_default());
            put("authorization", format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair)))?
        }
        Some("header") => {
            let name = text("headerName").ok_or("header auth needs headerName")?;
            put(name, text("headerValue").or(text("token")).ok_or("header auth needs headerValue")?.to_string())?
        }
        Some("apiKey") => {
            let name = text("headerName").unwrap_or("x-api-key");
            put(name, text("token").or(text("headerValue")).ok_or("apiKey auth needs token")?.to_string())?
        }
        Some(_) => return Err("type must be bearer, basic, header or apiKey"),
    }
    for (name, value) in auth["headers"].as_object().into_iter().flatten() {
        put(name, value.as_str().ok_or("headers values must be strings")?.to_string())?;
    }
    Ok(headers)
}

/// Plain HTTP JSON agents: `POST {url}` with `{message, sessionId,
/// history: [{role, content}]}`; the reply's text is the first string of
/// `message`, `reply`, `response`, `content`, `text` or `output` in a JSON
/// object, or a `text/plain` body.
pub mod plain {
    use serde_json::{json, Value};

    // By its full path: this module's `super` is the relay.
    use crate::chat::turn::{read_bounded, Failure, Reply, Turn};
    use crate::egress::Gate;

    const FIELDS: &[&str] = &["message", "reply", "response", "content", "text", "output"];

    pub async fn send(gate: &Gate, url: &str, turn: &Turn<'_>, max_bytes: usize) -> Result<Reply, Failure> {
        let history: Vec<Value> =
            turn.history.iter().map(|(role, text)| json!({"role": role, "content": text})).collect();
        let body = json!({"message": turn.text, "sessionId": turn.session, "history": history});
        let call = gate
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/plain")
            .credentials(turn.headers);
        let response = call.body(body.to_string()).send().await?;
        if !response.status().is_success() {
            return Err(Failure::Refused(format!("the agent answered {}", response.status())));
        }
        let plain_text = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/plain"));
        let bytes = read_bounded(response, max_bytes).await?;
        if plain_text {
            let text = String::from_utf8(bytes.to_vec())
                .map_err(|_| Failure::Garbage("the agent's text is not UTF-8".into()))?;
            return Ok(Reply { text, context: None, raw: Value::Null });
        }
        let answer: Value =
            serde_json::from_slice(&bytes).map_err(|_| Failure::Garbage("the agent's answer is not JSON".into()))?;
        let text = FIELDS
            .iter()
            .find_map(|f| answer[*f].as_str())
            .ok_or_else(|| Failure::Garbage(format!("the agent's answer has none of {} as text", FIELDS.join(", "))))?;
        Ok(Reply { text: text.to_string(), context: None, raw: answer })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case: a session's `auth`, and the headers sent (or why not).
    #[test]
    fn auth_becomes_the_headers_sent() {
        let bounds = AuthBounds { max_headers: 3, max_bytes: 64, max_held_bytes: 1 << 20 };
        let check = |auth: Value, expected: Result<Vec<(&str, &str)>, &str>| {
            let got = auth_headers(&auth, bounds).map_err(|e| e.to_string()).map(|h| {
                let mut pairs: Vec<(String, String)> =
                    h.iter().map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_string())).collect();
                pairs.sort();
                pairs
            });
            let expected = expected
                .map(|e| e.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect::<Vec<_>>())
                .map_err(String::from);
            assert_eq!(got, expected, "{auth}");
        };
        check(json!({}), Ok(vec![]));
        check(json!({"type": "bearer", "token": "t"}), Ok(vec![("authorization", "Bearer t")]));
        check(json!({"token": "t"}), Ok(vec![("authorization", "Bearer t")]));
        check(json!({"type": "basic", "username": "u", "password": "p"}), Ok(vec![("authorization", "Basic dTpw")]));
        check(json!({"type": "header", "headerName": "X-Key", "headerValue": "v"}), Ok(vec![("x-key", "v")]));
        check(json!({"type": "apiKey", "token": "k"}), Ok(vec![("x-api-key", "k")]));
        check(json!({"headers": {"X-A": "1", "X-B": "2"}}), Ok(vec![("x-a", "1"), ("x-b", "2")]));
        check(json!({"type": "bearer"}), Err("bearer auth needs token"));
        check(json!({"type": "digest", "token": "t"}), Err("type must be bearer, basic, header or apiKey"));
        check(
            json!({"type": "header", "headerName": "bad name", "headerValue": "v"}),
            Err("a header name is not valid"),
        );
        check(json!({"headers": {"X-A": "line\nbreak"}}), Err("a header value is not valid"));
        check(json!(true), Err("must be an object"));
        check(json!(123), Err("must be an object"));
        check(json!("Bearer t"), Err("must be an object"));
        check(json!({"headers": {"Host": "inside"}}), Err("a header the broker sets itself cannot be sent"));
        check(
            json!({"type": "header", "headerName": "Transfer-Encoding", "headerValue": "chunked"}),
            Err("a header the broker sets itself cannot be sent"),
        );
        // The bounds: three headers, 64 bytes of names and values.
        check(json!({"headers": {"a": "1", "b": "2", "c": "3"}}), Ok(vec![("a", "1"), ("b", "2"), ("c", "3")]));
        check(json!({"headers": {"a": "1", "b": "2", "c": "3", "d": "4"}}), Err("at most 3 headers"));
        check(json!({"token": "t", "headers": {"a": "1", "b": "2", "c": "3"}}), Err("at most 3 headers"));
        check(
            json!({"token": "t", "headers": {"a": "1", "b": "2"}}),
            Ok(vec![("a", "1"), ("authorization", "Bearer t"), ("b", "2")]),
        );
        check(
            json!({"headers": {"x-long": "v".repeat(59)}}),
            Err("at most 64 bytes of header names and values (these are 65)"),
        );
        check(json!({"headers": {"x-long": "v".repeat(58)}}), Ok(vec![("x-long", &"v".repeat(58))]));
        // Far past the bound, refused before a header is made: a
        // `HeaderMap` would panic past 32,768 of them.
        let many: serde_json::Map<String, Value> = (0..40_000).map(|i| (format!("x-{i}"), json!("v"))).collect();
        check(json!({ "headers": many }), Err("at most 3 headers"));
    }
}
