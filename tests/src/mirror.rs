//! A small real mirror node: the topic messages endpoint over HTTP on
//! 127.0.0.1, with the paging, limits and errors of the real one, plus knobs
//! a test needs (added latency, injected failures, a request log).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use almanac::entity::EntityId;
use almanac::ledger::{Links, MirrorMessage, Page};
use warp::http::{Response, StatusCode};
use warp::Filter;

#[derive(Default)]
pub struct Knobs {
    /// Added to every request.
    pub latency: Duration,
    /// The next this-many requests fail with `failure_status`.
    pub failures: AtomicUsize,
    pub failure_status: Mutex<Option<StatusCode>>,
}

pub struct MirrorServer {
    pub addr: SocketAddr,
    pub knobs: Arc<Knobs>,
    topics: Arc<Mutex<HashMap<EntityId, Vec<MirrorMessage>>>>,
    log: Arc<Mutex<Vec<String>>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl MirrorServer {
    /// Starts serving `topics` on a free loopback port.
    pub async fn start(topics: HashMap<EntityId, Vec<MirrorMessage>>, latency: Duration) -> MirrorServer {
        let topics = Arc::new(Mutex::new(sorted(topics)));
        let knobs = Arc::new(Knobs { latency, ..Knobs::default() });
        let log = Arc::new(Mutex::new(Vec::new()));
        let state = (topics.clone(), knobs.clone(), log.clone());
        let route = warp::path!("api" / "v1" / "topics" / String / "messages")
            .and(warp::get())
            .and(warp::query::raw().or(warp::any().map(String::new)).unify())
            .then(move |topic: String, query: String| {
                let (topics, knobs, log) = state.clone();
                async move { answer(&topics, &knobs, &log, &topic, &query).await }
            });
        let (addr, tx) = crate::serve_on_loopback(route).await;
        MirrorServer { addr, knobs, topics, log, shutdown: Some(tx) }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Query strings received so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn set_topics(&self, topics: HashMap<EntityId, Vec<MirrorMessage>>) {
        *self.topics.lock().unwrap() = sorted(topics);
    }

    pub fn fail_next(&self, count: usize, status: StatusCode) {
        *self.knobs.failure_status.lock().unwrap() = Some(status);
        self.knobs.failures.store(count, Ordering::SeqCst);
    }
}

impl Drop for MirrorServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

async fn answer(
    topics: &Mutex<HashMap<EntityId, Vec<MirrorMessage>>>,
    knobs: &Knobs,
    log: &Mutex<Vec<String>>,
    topic: &str,
    query: &str,
) -> warp::reply::Response {
    log.lock().unwrap().push(format!("{topic}?{query}"));
    if !knobs.latency.is_zero() {
        tokio::time::sleep(knobs.latency).await;
    }
    let failing = knobs.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
    if failing {
        let status = knobs.failure_status.lock().unwrap().unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        return json(status, serde_json::json!({"_status": {"messages": [{"message": "try again"}]}}));
    }
    let id: Option<EntityId> = topic.parse().ok();
    let topics = topics.lock().unwrap();
    let Some(messages) = id.and_then(|id| topics.get(&id)) else {
        return json(
            StatusCode::NOT_FOUND,
            serde_json::json!({"_status": {"messages": [{"message": "No such topic id - 0.0.0"}]}}),
        );
    };
    let mut limit = 25u64;
    let mut descending = false;
    let mut after = 0u64;
    let mut until = u64::MAX;
    for (key, value) in form_pairs(query) {
        match key.as_str() {
            "limit" => limit = value.parse().unwrap_or(25).clamp(1, 100),
            "order" => descending = value == "desc",
            "sequencenumber" => {
                let (op, n) = value.split_once(':').unwrap_or(("eq", &value));
                let n: u64 = n.parse().unwrap_or(0);
                match op {
                    "gt" => after = after.max(n),
                    "gte" => after = after.max(n.saturating_sub(1)),
                    "lt" => until = until.min(n.saturating_sub(1)),
                    "lte" => until = until.min(n),
                    _ => (after, until) = (n.saturating_sub(1), n),
                }
            }
            _ => {}
        }
    }
    // Messages are kept in sequence order: find the range by bisection.
    let start = messages.partition_point(|m| m.sequence_number <= after);
    let end = messages.partition_point(|m| m.sequence_number <= until);
    let selected = &messages[start..end.max(start)];
    let page: Vec<MirrorMessage> = if descending {
        selected.iter().rev().take(limit as usize).cloned().collect()
    } else {
        selected.iter().take(limit as usize).cloned().collect()
    };
    let next = (page.len() as u64 == limit && !descending).then(|| {
        let last = page.last().unwrap().sequence_number;
        let bound = if until == u64::MAX { String::new() } else { format!("&sequencenumber=lte:{until}") };
        format!("/api/v1/topics/{topic}/messages?limit={limit}&order=asc&sequencenumber=gt:{last}{bound}")
    });
    json(StatusCode::OK, serde_json::to_value(Page { messages: page, links: Links { next } }).unwrap())
}

fn sorted(mut topics: HashMap<EntityId, Vec<MirrorMessage>>) -> HashMap<EntityId, Vec<MirrorMessage>> {
    for list in topics.values_mut() {
        list.sort_by_key(|m| m.sequence_number);
    }
    topics
}

fn form_pairs(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

fn json(status: StatusCode, value: serde_json::Value) -> warp::reply::Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(value.to_string().into())
        .unwrap()
}
