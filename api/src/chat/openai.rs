//! An OpenAI-compatible chat completions client (`POST {base}/chat/
//! completions`): for the summarisation provider that compacts histories,
//! and for model-routing provider agents. Whole answers and streams
//! (`data:` chunks of `choices[0].delta.content`, then `data: [DONE]`),
//! with the provider's reported token usage.

use futures_util::{Stream, StreamExt};
use serde_json::{json, Value};

use super::sse;
use super::turn::{read_bounded, Chunk, Failure, Reply};

/// Where and how to call a provider.
#[derive(Clone, Debug)]
pub struct Provider {
    /// Its API base (`https://openrouter.ai/api/v1`).
    pub base: String,
    pub key: Option<String>,
    pub model: String,
}

/// A completion and its token usage.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub text: String,
    pub total_tokens: u64,
    pub raw: Value,
}

fn request(client: &reqwest::Client, provider: &Provider, body: &Value) -> reqwest::RequestBuilder {
    let builder = client
        .post(format!("{}/chat/completions", provider.base.trim_end_matches('/')))
        .header("content-type", "application/json");
    let builder = match &provider.key {
        Some(key) => builder.bearer_auth(key),
        None => builder,
    };
    builder.body(body.to_string())
}

/// The provider's error, in words.
fn refusal(status: reqwest::StatusCode, body: &[u8]) -> Failure {
    let detail: Value = serde_json::from_slice(body).unwrap_or_default();
    let message = detail["error"]["message"].as_str().unwrap_or("no reason given");
    Failure::Refused(format!("the provider answered {status}: {message}"))
}

/// One completion of `messages` (`[{role, content}]`).
pub async fn complete(
    client: &reqwest::Client,
    provider: &Provider,
    messages: &[Value],
    max_bytes: usize,
) -> Result<Completion, Failure> {
    let body = json!({"model": provider.model, "messages": messages});
    let response =
        request(client, provider, &body).send().await.map_err(|e| Failure::unreachable(&provider.base, &e))?;
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
    client: &reqwest::Client,
    provider: &Provider,
    messages: &[Value],
    max_bytes: usize,
) -> Result<impl Stream<Item = Result<Chunk, Failure>> + Send + 'static + use<>, Failure> {
    let body = json!({"model": provider.model, "messages": messages, "stream": true,
        "stream_options": {"include_usage": true}});
    let response =
        request(client, provider, &body).send().await.map_err(|e| Failure::unreachable(&provider.base, &e))?;
    let status = response.status();
    if !status.is_success() {
        let bytes = read_bounded(response, max_bytes).await?;
        return Err(refusal(status, &bytes));
    }
    struct State {
        bytes: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
        decoder: sse::Decoder,
        pending: std::collections::VecDeque<Result<Chunk, Failure>>,
        said: String,
        usage: Value,
        received: usize,
        max_bytes: usize,
        finished: bool,
    }
    let state = State {
        bytes: response.bytes_stream().boxed(),
        decoder: sse::Decoder::new(max_bytes),
        pending: Default::default(),
        said: String::new(),
        usage: Value::Null,
        received: 0,
        max_bytes,
        finished: false,
    };
    Ok(futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(next) = state.pending.pop_front() {
                return Some((next, state));
            }
            if state.finished {
                return None;
            }
            let fail = |state: &mut State, failure: Failure| {
                state.finished = true;
                state.pending.push_back(Err(failure));
            };
            let bytes = match state.bytes.next().await {
                Some(Ok(bytes)) => bytes,
                Some(Err(e)) => {
                    fail(&mut state, Failure::Cut(format!("the provider's stream broke: {e}")));
                    continue;
                }
                None => {
                    fail(&mut state, Failure::Cut("the provider's stream ended without [DONE]".into()));
                    continue;
                }
            };
            state.received += bytes.len();
            if state.received > state.max_bytes {
                let why = format!("the provider's stream passed {} bytes", state.max_bytes);
                fail(&mut state, Failure::Garbage(why));
                continue;
            }
            let Ok(events) = state.decoder.feed(&bytes) else {
                fail(&mut state, Failure::Garbage("the provider's stream has an overlong line".into()));
                continue;
            };
            for data in events {
                if data.trim() == "[DONE]" {
                    state.finished = true;
                    let raw = json!({"usage": state.usage});
                    state.pending.push_back(Ok(Chunk::Done(Reply { text: state.said.clone(), context: None, raw })));
                    break;
                }
                let Ok(chunk) = serde_json::from_str::<Value>(&data) else {
                    fail(&mut state, Failure::Garbage("the provider's stream carried a chunk that is not JSON".into()));
                    break;
                };
                if chunk["usage"].is_object() {
                    state.usage = chunk["usage"].clone();
                }
                if let Some(text) = chunk["choices"][0]["delta"]["content"].as_str().filter(|t| !t.is_empty()) {
                    state.said.push_str(text);
                    state.pending.push_back(Ok(Chunk::Text(text.to_string())));
                }
            }
        }
    }))
}
