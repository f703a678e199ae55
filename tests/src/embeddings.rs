//! A small real OpenAI-compatible embedding server on 127.0.0.1:
//! `POST /v1/embeddings` with `{model, input: string | string[]}` answers
//! `{object: "list", data: [{object: "embedding", index, embedding}], model}`.
//! Vectors are hashed bags of words (deterministic, so texts sharing words
//! are close), and the server counts what it is asked and can fail on
//! demand.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use warp::http::StatusCode;
use warp::Filter;

pub const DIMENSIONS: usize = 64;

#[derive(Default)]
pub struct Counters {
    pub requests: AtomicUsize,
    pub texts: AtomicUsize,
    /// The next this-many requests answer 500.
    pub failures: AtomicUsize,
}

pub struct EmbeddingServer {
    pub addr: SocketAddr,
    pub counters: Arc<Counters>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

/// The embedding of `text`: each lower-case word adds ±1 to a dimension
/// picked by its FNV-1a hash.
pub fn embed(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIMENSIONS];
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let hash = word
            .to_lowercase()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        v[(hash % DIMENSIONS as u64) as usize] += if hash >> 63 == 0 { 1.0 } else { -1.0 };
    }
    v
}

impl EmbeddingServer {
    pub async fn start() -> EmbeddingServer {
        let counters = Arc::new(Counters::default());
        let state = counters.clone();
        let route =
            warp::path!("v1" / "embeddings").and(warp::post()).and(warp::body::json()).map(move |body: Value| {
                state.requests.fetch_add(1, Ordering::SeqCst);
                let failing =
                    state.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
                if failing {
                    return warp::reply::with_status(
                        warp::reply::json(&json!({"error": {"message": "overloaded"}})),
                        StatusCode::INTERNAL_SERVER_ERROR,
                    );
                }
                let inputs: Vec<String> = match &body["input"] {
                    Value::String(s) => vec![s.clone()],
                    Value::Array(items) => items.iter().filter_map(|i| i.as_str().map(str::to_string)).collect(),
                    _ => Vec::new(),
                };
                state.texts.fetch_add(inputs.len(), Ordering::SeqCst);
                let data: Vec<Value> = inputs
                    .iter()
                    .enumerate()
                    .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": embed(text)}))
                    .collect();
                let answer = json!({"object": "list", "data": data, "model": body["model"],
                "usage": {"prompt_tokens": 0, "total_tokens": 0}});
                warp::reply::with_status(warp::reply::json(&answer), StatusCode::OK)
            });
        let (addr, tx) = crate::serve_on_loopback(route).await;
        EmbeddingServer { addr, counters, shutdown: Some(tx) }
    }

    /// The API base to configure (`.../v1`).
    pub fn base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for EmbeddingServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
