//! An OpenAI-compatible chat completions client (`POST {base}/chat/
//! completions`): for the summarisation provider that compacts histories,
//! and for model-routing provider agents. Whole answers and streams
//! (`data:` chunks of `choices[0].delta.content`, then `data: [DONE]`),
//! with the provider's reported token usage.

use futures_util::{Stream, StreamExt};
use serde_json::{json, Value};

use super::sse;
use super::turn::{read_bounded, Chunk, Failure, Reply};
use crate::egress::{Answer, Call, Gate, Trust};
use warp::http::{HeaderMap, HeaderValue, Method};

/// Where and how to call a provider.
#[derive(Clone, Debug)]
pub struct Provider {
    /// Its API base (`https://openrouter.ai/api/v1`).
    pub base: String,
    pub key: Option<String>,
    pub model: String,
    /// Configured by the operator (the summariser, a provider origin it
    /// named), or taken from an agent's record (judged by the gate).
    pub trust: Trust,
}

/// The model-routing providers the deployment pays: their origins
/// (`https://openrouter.ai`), and the key sent to them. An agent whose
/// `openrouter` endpoint is elsewhere is called through the gate without
/// the key: anyone may register such an agent.
#[derive(Clone, Debug, Default)]
pub struct Providers {
    pub key: Option<String>,
    pub origins: Vec<url::Origin>,
}

impl Providers {
    /// Whether `url` is at the origin of a provider the operator named.
    pub fn lists(&self, url: &str) -> bool {
        url::Url::parse(url).is_ok_and(|url| self.origins.contains(&url.origin()))
    }

    /// How a provider agent at `base` is called: as configured and with
    /// the key when its origin is one the operator named, else judged and
    /// without it.
    pub fn provider(&self, base: &str, model: &str) -> Provider {
        let listed = self.lists(base);
        Provider {
            base: base.to_string(),
            key: self.key.clone().filter(|_| listed),
            model: model.to_string(),
            trust: if listed { Trust::Configured } else { Trust::Judged },
        }
    }
}

/// A completion and its token usage.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub text: String,
    pub total_tokens: u64,
    pub raw: Value,
}

fn request<'g>(gate: &'g Gate, provider: &Provider, body: &Value, answer: Answer) -> Call<'g> {
    let url = format!("{}/chat/completions", provider.base.trim_end_matches('/'));
    let mut credentials = HeaderMap::new();
    if let Some(value) = provider.key.as_ref().and_then(|key| HeaderValue::from_str(&format!("Bearer {key}")).ok()) {
        credentials.insert("authorization", value);
    }
    let call = gate.call(Method::POST, &url, provider.trust).header("content-type", "application/json");
    call.credentials(&credentials).body(body.to_string()).answer(answer)
}

/// The provider's error, in words.
fn refusal(status: reqwest::StatusCode, body: &[u8]) -> Failure {
    let detail: Value = serde_json::from_slice(body).unwrap_or_default();
    let message = detail["error"]["message"].as_str().unwrap_or("no reason given");
    Failure::Refused(format!("the provider answered {status}: {message}"))
}

/// One completion of `messages` (`[{role, content}]`).
pub async fn complete(
    gate: &Gate,
    provider: &Provider,
    messages: &[Value],
    max_bytes: usize,
) -> Result<Completion, Failure> {
    let body = json!({"model": provider.model, "messages": messages});
    let response = request(gate, provider, &body, Answer::Whole).send().await?;
    let status = response.status();
    let bytes = read_bounded(response, max_bytes).await?;
    if !status.is_success() {
        return Err(refusal(status, &bytes));
    }
    let answer: Value =
        serde_json::from_slice(&bytes).map_err(|_| Failure::Garbage("the provider's answer is not JSON".into()))?;
    let text = answer["choices"][0]["message"]["content"]
        .as_str()
        .ok_or_else(|| Failure::Garbage("the provider's answer has no choices[0].message.content".into()))?;
    Ok(Completion {
        text: text.to_string(),
        total_tokens: answer["usage"]["total_tokens"].as_u64().unwrap_or(0),
        raw: answer,
    })
}

/// One completion, streamed: text chunks, then the whole reply; the
/// usage, asked for with `stream_options.include_usage`, arrives with the
/// last chunk and is in the reply's `raw.usage`.
pub async fn stream(
    gate: &Gate,
    provider: &Provider,
    messages: &[Value],
    max_bytes: usize,
) -> Result<impl Stream<Item = Result<Chunk, Failure>> + Send + 'static + use<>, Failure> {
    let body = json!({"model": provider.model, "messages": messages, "stream": true,
        "stream_options": {"include_usage": true}});
    let response = request(gate, provider, &body, Answer::Streamed).send().await?;
    let status = response.status();
    if !status.is_success() {
        let bytes = read_bounded(response, max_bytes).await?;
        return Err(refusal(status, &bytes));
    }
    let state = (sse::events(response, max_bytes, "provider"), String::new(), Value::Null, false);
    Ok(futures_util::stream::unfold(state, |(mut events, mut said, mut usage, finished)| async move {
        if finished {
            return None;
        }
        loop {
            let data = match events.next().await {
                Some(Ok(data)) => data,
                Some(Err(failure)) => return Some((Err(failure), (events, said, usage, true))),
                None => {
                    let failure = Failure::Cut("the provider's stream ended without [DONE]".into());
                    return Some((Err(failure), (events, said, usage, true)));
                }
            };
            if data.trim() == "[DONE]" {
                let reply = Reply { text: said.clone(), context: None, raw: json!({"usage": usage}) };
                return Some((Ok(Chunk::Done(reply)), (events, said, usage, true)));
            }
            let Ok(chunk) = serde_json::from_str::<Value>(&data) else {
                let failure = Failure::Garbage("the provider's stream carried a chunk that is not JSON".into());
                return Some((Err(failure), (events, said, usage, true)));
            };
            if chunk["usage"].is_object() {
                usage = chunk["usage"].clone();
            }
            if let Some(text) = chunk["choices"][0]["delta"]["content"].as_str().filter(|t| !t.is_empty()) {
                said.push_str(text);
                let text = text.to_string();
                return Some((Ok(Chunk::Text(text)), (events, said, usage, false)));
            }
        }
    }))
}
