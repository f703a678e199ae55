//! The A2A client (`../shared/contracts/a2a.md`): agent card discovery,
//! then JSON-RPC `SendMessage` / `SendStreamingMessage` (v1.0) or
//! `message/send` / `message/stream` (v0.3, for older agents), whichever
//! the card's JSON-RPC interface speaks, v1.0 first.
//!
//! An answer's text is the text parts of its message, or of its task's
//! artifacts and status message. A stream is relayed part by part as it
//! arrives; dropping it closes the agent's connection.

use futures_util::{Stream, StreamExt};
use serde_json::{json, Value};

use super::sse;
use super::turn::{read_json, Chunk, Failure, Reply, Turn};
use crate::egress::{self, Gate};

/// The protocol version of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V03,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "1.0",
            Version::V03 => "0.3",
        }
    }

    pub fn parse(text: &str) -> Option<Version> {
        match text {
            "1.0" => Some(Version::V1),
            "0.3" => Some(Version::V03),
            _ => None,
        }
    }
}

/// What a card says of an agent and where to call it.
#[derive(Clone, Debug, PartialEq)]
pub struct Card {
    pub name: String,
    pub description: String,
    pub streaming: bool,
    pub skills: Vec<String>,
    pub url: String,
    pub version: Version,
}

/// The card's URL for an agent's base URL (or the card's own URL).
pub fn card_url(base: &str) -> String {
    if base.ends_with(".json") {
        return base.to_string();
    }
    format!("{}/.well-known/agent-card.json", base.trim_end_matches('/'))
}

/// Fetches and reads the agent card of `base`.
pub async fn discover(gate: &Gate, base: &str, max_bytes: usize) -> Result<Card, Failure> {
    let url = card_url(base);
    let response = gate.get(&url).header("a2a-version", "1.0").header("accept", "application/json").send().await?;
    if !response.status().is_success() {
        return Err(Failure::Refused(format!("the agent card at {url} answered {}", response.status())));
    }
    let card = read_json(response, max_bytes, &format!("the agent card at {url}")).await?;
    let card = read_card(&card, &url)?;
    // Judged now as well as when called: a session is not opened to a
    // card that points inside.
    gate.judge(&card.url)?;
    Ok(card)
}

/// A card's interface: a JSON-RPC one of version 1.0 if offered, else 0.3.
pub fn read_card(card: &Value, url: &str) -> Result<Card, Failure> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let mut interfaces: Vec<(String, Version)> = Vec::new();
    for interface in card["supportedInterfaces"].as_array().into_iter().flatten() {
        if interface["protocolBinding"] == "JSONRPC" {
            if let Some(version) = interface["protocolVersion"].as_str().and_then(Version::parse) {
                interfaces.push((text(&interface["url"]), version));
            }
        }
    }
    // A v0.3 card: `url` with its preferred transport (JSON-RPC unless
    // named), and more in `additionalInterfaces`.
    if card["url"].is_string() {
        let transport = card["preferredTransport"].as_str().unwrap_or("JSONRPC");
        if transport == "JSONRPC" {
            interfaces.push((text(&card["url"]), Version::V03));
        }
        for interface in card["additionalInterfaces"].as_array().into_iter().flatten() {
            if interface["transport"] == "JSONRPC" {
                interfaces.push((text(&interface["url"]), Version::V03));
            }
        }
    }
    interfaces.retain(|(url, _)| url.starts_with("http://") || url.starts_with("https://"));
    let chosen =
        interfaces.iter().find(|(_, v)| *v == Version::V1).or_else(|| interfaces.first()).cloned().ok_or_else(
            || {
                Failure::Unsupported(format!(
                    "the agent card at {url} offers no JSON-RPC interface of A2A 1.0 or 0.3 this broker speaks"
                ))
            },
        )?;
    let skills = card["skills"].as_array().into_iter().flatten().filter_map(|s| s["name"].as_str()).map(String::from);
    Ok(Card {
        name: text(&card["name"]),
        description: text(&card["description"]),
        streaming: card["capabilities"]["streaming"].as_bool().unwrap_or(false),
        skills: skills.collect(),
        url: chosen.0,
        version: chosen.1,
    })
}

/// The JSON-RPC request of a turn.
fn request(version: Version, turn: &Turn<'_>, streaming: bool, id: u64) -> Value {
    let message_id = format!("msg-{}", shared::http::hex(&crate::store::random::<8>()));
    let (method, mut message) = match (version, streaming) {
        (Version::V1, false) => {
            ("SendMessage", json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": turn.text}]}))
        }
        (Version::V1, true) => (
            "SendStreamingMessage",
            json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": turn.text}]}),
        ),
        (Version::V03, streaming) => (
            if streaming { "message/stream" } else { "message/send" },
            json!({"kind": "message", "messageId": message_id, "role": "user", "parts": [{"kind": "text", "text": turn.text}]}),
        ),
    };
    if let Some(context) = turn.context {
        message["contextId"] = json!(context);
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"message": message}})
}

/// The card's `url` is a destination like any other: the gate judges it.
fn post<'g>(gate: &'g Gate, card: &Card, turn: &Turn<'_>, body: &Value, accept: &str) -> egress::Call<'g> {
    let mut call = gate.post(&card.url).header("content-type", "application/json").header("accept", accept);
    if card.version == Version::V1 {
        call = call.header("a2a-version", "1.0");
    }
    call.credentials(turn.headers).body(body.to_string())
}

/// The text parts of `parts`, joined.
fn parts_text(parts: &Value) -> String {
    parts.as_array().into_iter().flatten().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("")
}

/// What one result (of a send, or one streamed event) holds.
#[derive(Debug, Default, PartialEq)]
struct Read {
    text: String,
    context: Option<String>,
    /// A task's artifacts' text, apart: a stream's closing task repeats
    /// what its updates said.
    task_text: String,
    /// The task ended: completed, or stopped with why.
    done: Option<Result<(), String>>,
}

/// Reads a result of either version.
fn read_result(result: &Value) -> Read {
    let mut read = Read::default();
    let context = |v: &Value| v["contextId"].as_str().map(String::from);
    // v1.0 names the variant by key, v0.3 by `kind`.
    let (kind, body) = match result["kind"].as_str() {
        Some(kind) => (kind.to_string(), result),
        None => {
            match ["message", "task", "statusUpdate", "artifactUpdate"].iter().find(|k| result.get(**k).is_some()) {
                Some(key) => (key.to_string(), &result[*key]),
                None => return read,
            }
        }
    };
    read.context = context(body);
    let status = |read: &mut Read, status: &Value| {
        let message = parts_text(&status["message"]["parts"]);
        let state = status["state"].as_str().unwrap_or_default().to_ascii_lowercase();
        let state = state.trim_start_matches("task_state_").replace('_', "-");
        read.done = match state.as_str() {
            "completed" | "input-required" | "auth-required" => Some(Ok(())),
            "failed" | "canceled" | "cancelled" | "rejected" => {
                Some(Err(if message.is_empty() { format!("the agent's task {state}") } else { message.clone() }))
            }
            _ => None,
        };
        message
    };
    match kind.as_str() {
        "message" => read.text = parts_text(&body["parts"]),
        "task" => {
            read.task_text = body["artifacts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| parts_text(&a["parts"]))
                .collect::<Vec<_>>()
                .join("");
            let message = status(&mut read, &body["status"]);
            if read.task_text.is_empty() {
                read.task_text = message;
            }
        }
        "statusUpdate" | "status-update" => {
            read.text = status(&mut read, &body["status"]);
            if body["final"] == json!(true) && read.done.is_none() {
                read.done = Some(Ok(()));
            }
        }
        "artifactUpdate" | "artifact-update" => read.text = parts_text(&body["artifact"]["parts"]),
        _ => {}
    }
    read
}

/// The JSON-RPC error of an answer, in words.
fn rpc_error(answer: &Value) -> Option<String> {
    let error = answer.get("error")?;
    let message = error["message"].as_str().unwrap_or("an error");
    Some(format!("the agent answered JSON-RPC error {}: {message}", error["code"]))
}

/// The reply in a whole JSON-RPC answer.
fn reply(answer: &Value) -> Result<Reply, Failure> {
    if let Some(error) = rpc_error(answer) {
        return Err(Failure::Refused(error));
    }
    let Some(result) = answer.get("result") else {
        return Err(Failure::Garbage("the agent's answer has no JSON-RPC result".into()));
    };
    let read = read_result(result);
    if let Some(Err(why)) = read.done {
        return Err(Failure::Refused(why));
    }
    let text = if read.text.is_empty() { read.task_text } else { read.text };
    Ok(Reply { text, context: read.context, raw: result.clone() })
}

/// Posts a turn; the response, once its status says success.
async fn call(gate: &Gate, card: &Card, turn: &Turn<'_>, streaming: bool) -> Result<reqwest::Response, Failure> {
    let body = request(card.version, turn, streaming, 1);
    let (accept, answer) = match streaming {
        true => ("text/event-stream", egress::Answer::Streamed),
        false => ("application/json", egress::Answer::Whole),
    };
    let response = post(gate, card, turn, &body, accept).answer(answer).send().await?;
    if !response.status().is_success() {
        return Err(Failure::Refused(format!("the agent answered {}", response.status())));
    }
    Ok(response)
}

/// One turn, answered whole.
pub async fn send(gate: &Gate, card: &Card, turn: &Turn<'_>, max_bytes: usize) -> Result<Reply, Failure> {
    let response = call(gate, card, turn, false).await?;
    reply(&read_json(response, max_bytes, "the agent's answer").await?)
}

/// What a stream has said so far.
struct Said {
    text: String,
    task_text: String,
    context: Option<String>,
}

impl Said {
    /// The whole reply once the stream ends well: what it said, or, when it
    /// said nothing but in its task, the task's text (sent as a chunk too).
    fn close(&mut self, pending: &mut std::collections::VecDeque<Result<Chunk, Failure>>) {
        if self.text.is_empty() && !self.task_text.is_empty() {
            self.text = self.task_text.clone();
            pending.push_back(Ok(Chunk::Text(self.text.clone())));
        }
        let reply = Reply { text: self.text.clone(), context: self.context.clone(), raw: Value::Null };
        pending.push_back(Ok(Chunk::Done(reply)));
    }

    /// Reads one event: its chunk of text, and whether (and how) it ends
    /// the turn.
    fn event(&mut self, data: &str) -> (Option<String>, Option<Result<(), Failure>>) {
        let Ok(answer) = serde_json::from_str::<Value>(data) else {
            let failure = Failure::Garbage("the agent's stream carried an event that is not JSON".into());
            return (None, Some(Err(failure)));
        };
        if let Some(error) = rpc_error(&answer) {
            return (None, Some(Err(Failure::Refused(error))));
        }
        let read = read_result(&answer["result"]);
        if read.context.is_some() {
            self.context = read.context;
        }
        if !read.task_text.is_empty() {
            self.task_text = read.task_text;
        }
        let chunk = (!read.text.is_empty()).then(|| {
            self.text.push_str(&read.text);
            read.text
        });
        (chunk, read.done.map(|done| done.map_err(Failure::Refused)))
    }
}

/// One turn, streamed: text chunks as the agent sends them, then the
/// whole reply. Dropping the stream closes the agent's connection.
pub async fn stream(
    gate: &Gate,
    card: &Card,
    turn: &Turn<'_>,
    max_bytes: usize,
) -> Result<impl Stream<Item = Result<Chunk, Failure>> + Send + 'static + use<>, Failure> {
    let response = call(gate, card, turn, true).await?;
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if !is_sse {
        // Some agents answer a stream request with one JSON answer.
        let reply = reply(&read_json(response, max_bytes, "the agent's answer").await?)?;
        let chunks = vec![Ok(Chunk::Text(reply.text.clone())), Ok(Chunk::Done(reply))];
        return Ok(futures_util::stream::iter(chunks).left_stream());
    }
    let said = Said { text: String::new(), task_text: String::new(), context: None };
    let state = (sse::events(response, max_bytes, "agent"), said, std::collections::VecDeque::new(), false);
    let chunks = futures_util::stream::unfold(state, |(mut events, mut said, mut pending, mut finished)| async move {
        loop {
            if let Some(next) = pending.pop_front() {
                return Some((next, (events, said, pending, finished)));
            }
            if finished {
                return None;
            }
            let ending = match events.next().await {
                // The agent closed the stream: what it said is the reply.
                None => Some(Ok(())),
                Some(Err(failure)) => Some(Err(failure)),
                Some(Ok(data)) => {
                    let (chunk, ending) = said.event(&data);
                    pending.extend(chunk.map(|text| Ok(Chunk::Text(text))));
                    ending
                }
            };
            finished = ending.is_some();
            match ending {
                None => {}
                Some(Ok(())) => said.close(&mut pending),
                Some(Err(failure)) => pending.push_back(Err(failure)),
            }
        }
    });
    Ok(chunks.right_stream())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_gives_its_json_rpc_interface_of_1_0_first() {
        let v1 = json!({"name": "A", "description": "d", "capabilities": {"streaming": true},
            "skills": [{"id": "s", "name": "Echo"}],
            "supportedInterfaces": [
                {"url": "http://h/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
                {"url": "http://h/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": "http://h/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]});
        let card = read_card(&v1, "u").unwrap();
        assert_eq!((card.url.as_str(), card.version, card.streaming), ("http://h/v1", Version::V1, true));
        assert_eq!(card.skills, vec!["Echo"]);
        let v03 = json!({"name": "B", "url": "http://h/rpc", "protocolVersion": "0.3"});
        let card = read_card(&v03, "u").unwrap();
        assert_eq!((card.url.as_str(), card.version, card.streaming), ("http://h/rpc", Version::V03, false));
        let grpc_only = json!({"name": "C", "supportedInterfaces": [{"url": "http://h", "protocolBinding": "GRPC", "protocolVersion": "1.0"}]});
        assert!(matches!(read_card(&grpc_only, "u"), Err(Failure::Unsupported(_))));
        assert!(matches!(read_card(&json!({"name": "D", "url": "ftp://h"}), "u"), Err(Failure::Unsupported(_))));
    }

    /// Each case: a result of either version, and what is read from it.
    #[test]
    fn results_of_both_versions_are_read() {
        let check = |result: Value, text: &str, task_text: &str, done: Option<Result<(), &str>>| {
            let read = read_result(&result);
            assert_eq!(
                (read.text.as_str(), read.task_text.as_str(), read.done),
                (text, task_text, done.map(|d| d.map_err(String::from))),
                "{result}"
            );
        };
        check(
            json!({"message": {"role": "ROLE_AGENT", "parts": [{"text": "hi "}, {"data": {}}, {"text": "there"}]}}),
            "hi there",
            "",
            None,
        );
        check(json!({"kind": "message", "role": "agent", "parts": [{"kind": "text", "text": "old"}]}), "old", "", None);
        check(
            json!({"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}, "artifacts": [{"parts": [{"text": "done"}]}]}}),
            "",
            "done",
            Some(Ok(())),
        );
        check(
            json!({"kind": "task", "status": {"state": "failed", "message": {"parts": [{"kind": "text", "text": "no"}]}}}),
            "",
            "no",
            Some(Err("no")),
        );
        check(
            json!({"statusUpdate": {"status": {"state": "TASK_STATE_WORKING", "message": {"parts": [{"text": "…"}]}}}}),
            "…",
            "",
            None,
        );
        check(json!({"kind": "status-update", "status": {"state": "working"}, "final": true}), "", "", Some(Ok(())));
        check(
            json!({"artifactUpdate": {"artifact": {"artifactId": "a", "parts": [{"text": "chunk"}]}, "append": true}}),
            "chunk",
            "",
            None,
        );
        check(
            json!({"kind": "artifact-update", "artifact": {"parts": [{"kind": "text", "text": "c"}]}}),
            "c",
            "",
            None,
        );
        check(json!({"unknown": 1}), "", "", None);
    }
}
