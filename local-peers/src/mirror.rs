//! A small real mirror node: the topic messages endpoint over HTTP on
//! 127.0.0.1, with the paging, limits and errors of the real one, a
//! topic's info, accounts' keys and transactions by id, plus knobs a test
//! needs (added latency, injected failures, a request log). What a
//! [`crate::network::Network`] brings to consensus is recorded here.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use generator::message_sources::{Links, MirrorMessage, Page};
use shared::entity::EntityId;
use warp::http::{Response, StatusCode};
use warp::Filter;

/// A transaction id as (payer, seconds, nanoseconds).
type TransactionKey = (EntityId, u64, u32);

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
    /// Account id to its key (`_type`, raw hex), for `/api/v1/accounts/{id}`.
    accounts: Arc<Mutex<HashMap<EntityId, (String, String)>>>,
    /// Transactions by id (payer, seconds, nanoseconds), as
    /// `/api/v1/transactions/{id}` lists them.
    transactions: Arc<Mutex<HashMap<TransactionKey, Vec<serde_json::Value>>>>,
    /// Topics created on the network, as `/api/v1/topics/{id}` shows them.
    infos: Arc<Mutex<HashMap<EntityId, serde_json::Value>>>,
    lookups: Arc<AtomicUsize>,
    log: Arc<Mutex<Vec<String>>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl MirrorServer {
    /// Starts serving `topics` on a free loopback port.
    pub async fn start(topics: HashMap<EntityId, Vec<MirrorMessage>>, latency: Duration) -> MirrorServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        MirrorServer::start_at(listener, topics, latency)
    }

    /// Starts serving `topics` on `listener`.
    pub fn start_at(
        listener: tokio::net::TcpListener,
        topics: HashMap<EntityId, Vec<MirrorMessage>>,
        latency: Duration,
    ) -> MirrorServer {
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
        let accounts = Arc::new(Mutex::new(HashMap::new()));
        let known = accounts.clone();
        let account = warp::path!("api" / "v1" / "accounts" / String).and(warp::get()).map(move |id: String| {
            // The real node takes an id, an alias or an EVM address here;
            // this one knows ids only, and refuses what is none of the three
            // as it does.
            let Ok(entity) = id.parse::<EntityId>() else {
                return refusal(StatusCode::BAD_REQUEST, "Invalid parameter: idOrAliasOrEvmAddress");
            };
            match known.lock().unwrap().get(&entity) {
                Some((kind, key)) => json(
                    StatusCode::OK,
                    serde_json::json!({"account": entity.to_string(), "key": {"_type": kind, "key": key}, "deleted": false}),
                ),
                None => refusal(StatusCode::NOT_FOUND, "Not found"),
            }
        });
        let transactions = Arc::new(Mutex::new(HashMap::new()));
        let held = transactions.clone();
        let lookups = Arc::new(AtomicUsize::new(0));
        let counted = lookups.clone();
        let transaction =
            warp::path!("api" / "v1" / "transactions" / String).and(warp::get()).map(move |id: String| {
                counted.fetch_add(1, Ordering::SeqCst);
                // The real node takes a transaction id or a 48-byte hash here;
                // this one takes ids, in its form only.
                let Some(key) = transaction_id(&id) else {
                    let message = "Invalid Transaction id. Please use \"shard.realm.num-sss-nnn\" format where sss are seconds and nnn are nanoseconds";
                    return refusal(StatusCode::BAD_REQUEST, message);
                };
                match held.lock().unwrap().get(&key) {
                    Some(list) => json(StatusCode::OK, serde_json::json!({"transactions": list})),
                    None => refusal(StatusCode::NOT_FOUND, "Not found"),
                }
            });
        let infos: Arc<Mutex<HashMap<EntityId, serde_json::Value>>> = Arc::default();
        let held_infos = infos.clone();
        let info = warp::path!("api" / "v1" / "topics" / String).and(warp::get()).map(move |id: String| {
            let Ok(entity) = id.parse::<EntityId>() else {
                return refusal(StatusCode::BAD_REQUEST, "Invalid parameter: topicId");
            };
            match held_infos.lock().unwrap().get(&entity) {
                Some(info) => json(StatusCode::OK, info.clone()),
                None => refusal(StatusCode::NOT_FOUND, "Not found"),
            }
        });
        let (addr, tx) = crate::serve_listener(listener, route.or(info).or(account).or(transaction));
        MirrorServer { addr, knobs, topics, accounts, transactions, infos, lookups, log, shutdown: Some(tx) }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Transaction lookups (`/api/v1/transactions/{id}`) answered so far.
    pub fn transaction_lookups(&self) -> usize {
        self.lookups.load(Ordering::SeqCst)
    }

    /// Query strings received so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn set_topics(&self, topics: HashMap<EntityId, Vec<MirrorMessage>>) {
        *self.topics.lock().unwrap() = sorted(topics);
    }

    /// Makes `account` exist with this key (`ED25519` or
    /// `ECDSA_SECP256K1`, raw hex).
    pub fn set_account(&self, account: EntityId, kind: &str, key_hex: &str) {
        self.accounts.lock().unwrap().insert(account, (kind.to_string(), key_hex.to_string()));
    }

    /// The key `account` has here (`_type`, raw hex), if it exists.
    pub fn account_key(&self, account: EntityId) -> Option<(String, String)> {
        self.accounts.lock().unwrap().get(&account).cloned()
    }

    /// Records a transaction that reached consensus (its
    /// `transaction_id` in the mirror's form); false when one with that id
    /// is already held.
    pub fn record_transaction(&self, transaction: serde_json::Value) -> bool {
        let key = transaction_id(transaction["transaction_id"].as_str().unwrap()).expect("a transaction id");
        let mut held = self.transactions.lock().unwrap();
        if held.contains_key(&key) {
            return false;
        }
        held.insert(key, vec![transaction]);
        true
    }

    /// Whether a transaction with this id (the mirror's form) is held.
    pub fn has_transaction(&self, id: &str) -> bool {
        transaction_id(id).is_some_and(|key| self.transactions.lock().unwrap().contains_key(&key))
    }

    /// Records a topic created on the network (`info` as
    /// `/api/v1/topics/{id}` answers), with no messages yet.
    pub fn record_topic(&self, topic: EntityId, info: serde_json::Value) {
        self.infos.lock().unwrap().insert(topic, info);
        self.topics.lock().unwrap().entry(topic).or_default();
    }

    /// Records a message that reached consensus on its topic (after the
    /// topic's others).
    pub fn record_message(&self, message: MirrorMessage) {
        let topic = message.topic_id.parse().expect("a topic id");
        let mut topics = self.topics.lock().unwrap();
        let list = topics.entry(topic).or_default();
        debug_assert!(list.last().is_none_or(|m| m.sequence_number < message.sequence_number), "in sequence");
        list.push(message);
    }

    /// The messages `topic` holds, in sequence order.
    pub fn messages(&self, topic: EntityId) -> Vec<MirrorMessage> {
        self.topics.lock().unwrap().get(&topic).cloned().unwrap_or_default()
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
        return refusal(status, "try again");
    }
    let Ok(id) = topic.parse::<EntityId>() else {
        return refusal(StatusCode::BAD_REQUEST, "Invalid parameter: topic.id");
    };
    let query = match Query::parse(query) {
        Ok(query) => query,
        Err(message) => return refusal(StatusCode::BAD_REQUEST, &message),
    };
    let topics = topics.lock().unwrap();
    let Some(messages) = topics.get(&id) else {
        return refusal(StatusCode::NOT_FOUND, "No such topic id - 0.0.0");
    };
    // Messages are kept in sequence order: find the range by bisection.
    let start = messages.partition_point(|m| m.sequence_number <= query.after);
    let end = messages.partition_point(|m| m.sequence_number <= query.until);
    let selected = messages[start..end.max(start)].iter().filter(|m| query.in_time(&m.consensus_timestamp));
    let page: Vec<MirrorMessage> = match query.descending {
        true => selected.rev().take(query.limit as usize).cloned().collect(),
        false => selected.take(query.limit as usize).cloned().collect(),
    };
    let next = (page.len() as u64 == query.limit && !query.descending).then(|| {
        let last = page.last().unwrap().sequence_number;
        let bound = match query.until {
            u64::MAX => String::new(),
            until => format!("&sequencenumber=lte:{until}"),
        };
        format!("/api/v1/topics/{topic}/messages?limit={}&order=asc&sequencenumber=gt:{last}{bound}", query.limit)
    });
    json(StatusCode::OK, serde_json::to_value(Page { messages: page, links: Links { next } }).unwrap())
}

/// A topic messages request's parameters, validated as the Hedera (Hiero)
/// mirror node's REST API validates them, so that a request the real node
/// refuses fails here too:
///
/// - only `encoding`, `limit`, `order`, `sequencenumber` and `timestamp`;
///   any other parameter is refused;
/// - a value is `op:value` or `value` (`eq`), the operator one of `gt`,
///   `gte`, `lt`, `lte`, `eq`, `ne`; at most 100 values per parameter;
/// - `sequencenumber` and `limit` are positive longs (1 to 2^63 - 1, at most
///   19 digits): `sequencenumber=gt:0` is refused; `limit` above 100 is
///   capped at 100, and is 25 when absent;
/// - `order` is `asc` or `desc` in any case; `timestamp` is seconds with up
///   to 9 decimals (`^\d{1,10}(\.\d{1,9})?$`).
///
/// What the real node accepts but this one does not model (`ne`, UTF-8
/// encoding) is refused with a message saying so, never silently ignored.
#[derive(Debug, PartialEq, Eq)]
pub struct Query {
    pub limit: u64,
    pub descending: bool,
    /// Sequence numbers in `(after, until]`.
    pub after: u64,
    pub until: u64,
    /// Consensus times in `[from, to]`, as (seconds, nanoseconds).
    pub from: (u64, u32),
    pub to: (u64, u32),
}

impl Query {
    pub fn parse(query: &str) -> Result<Query, String> {
        let mut q = Query { limit: 25, descending: false, after: 0, until: u64::MAX, from: (0, 0), to: (u64::MAX, 0) };
        let pairs = form_pairs(query);
        for key in pairs.iter().map(|(k, _)| k) {
            if pairs.iter().filter(|(k, _)| k == key).count() > 100 {
                return Err(format!("Too many values for parameter: {key}"));
            }
        }
        for (key, value) in &pairs {
            let invalid = || format!("Invalid parameter: {key}");
            let (op, value) = match value.split(':').collect::<Vec<_>>()[..] {
                [value] => ("eq", value),
                [op, value] => (op, value),
                _ => return Err(invalid()),
            };
            if !matches!(op, "gt" | "gte" | "lt" | "lte" | "eq" | "ne") {
                return Err(invalid());
            }
            match key.as_str() {
                "limit" => q.limit = positive_long(value).ok_or_else(invalid)?.min(100),
                "order" => match value.to_ascii_lowercase().as_str() {
                    "asc" => q.descending = false,
                    "desc" => q.descending = true,
                    _ => return Err(invalid()),
                },
                "encoding" => match value.to_ascii_lowercase().as_str() {
                    "base64" => {}
                    "utf-8" | "utf8" => return Err("encoding=utf-8 is not modelled by this test mirror".into()),
                    _ => return Err(invalid()),
                },
                "sequencenumber" => {
                    let n = positive_long(value).ok_or_else(invalid)?;
                    match op {
                        "gt" => q.after = q.after.max(n),
                        "gte" => q.after = q.after.max(n - 1),
                        "lt" => q.until = q.until.min(n - 1),
                        "lte" => q.until = q.until.min(n),
                        "eq" => (q.after, q.until) = (q.after.max(n - 1), q.until.min(n)),
                        _ => return Err("sequencenumber=ne is not modelled by this test mirror".into()),
                    }
                }
                "timestamp" => {
                    let at = timestamp(value).ok_or_else(invalid)?;
                    let after = |t: (u64, u32)| if t.1 == 999_999_999 { (t.0 + 1, 0) } else { (t.0, t.1 + 1) };
                    let before =
                        |t: (u64, u32)| if t.1 == 0 { (t.0.saturating_sub(1), 999_999_999) } else { (t.0, t.1 - 1) };
                    match op {
                        "gt" => q.from = q.from.max(after(at)),
                        "gte" => q.from = q.from.max(at),
                        "lt" => q.to = q.to.min(before(at)),
                        "lte" => q.to = q.to.min(at),
                        "eq" => (q.from, q.to) = (q.from.max(at), q.to.min(at)),
                        _ => return Err("timestamp=ne is not modelled by this test mirror".into()),
                    }
                }
                _ => return Err(format!("Unknown query parameter: {key}")),
            }
        }
        Ok(q)
    }

    /// Whether a message's consensus time (`seconds.nanoseconds`) is in range.
    fn in_time(&self, consensus: &str) -> bool {
        timestamp(consensus).is_some_and(|t| self.from <= t && t <= self.to)
    }
}

/// A transaction id in the mirror node's form, `shard.realm.num-sss-nnn`
/// (seconds, then nanoseconds of up to 9 digits), as (payer, seconds,
/// nanoseconds).
fn transaction_id(text: &str) -> Option<TransactionKey> {
    let mut parts = text.splitn(3, '-');
    let (payer, seconds, nanos) = (parts.next()?, parts.next()?, parts.next()?);
    let digits = |s: &str, max: usize| (1..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(seconds, 19) || !digits(nanos, 9) {
        return None;
    }
    Some((payer.parse().ok()?, seconds.parse().ok()?, nanos.parse().ok()?))
}

/// 1 to 2^63 - 1, written with 1 to 19 ASCII digits.
fn positive_long(value: &str) -> Option<u64> {
    let digits = (1..=19).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_digit());
    value.parse::<u64>().ok().filter(|n| digits && (1..=i64::MAX as u64).contains(n))
}

/// Seconds (1 to 10 digits) with an optional fraction of 1 to 9 digits.
fn timestamp(value: &str) -> Option<(u64, u32)> {
    let (seconds, fraction) = value.split_once('.').unwrap_or((value, ""));
    let digits = |s: &str, max: usize| (1..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(seconds, 10) || (value.contains('.') && !digits(fraction, 9)) {
        return None;
    }
    let nanos = format!("{fraction:0<9}").parse().ok()?;
    Some((seconds.parse().ok()?, nanos))
}

/// The real node's refusal: `status`, and `message` in its `_status`.
fn refusal(status: StatusCode, message: &str) -> warp::reply::Response {
    json(status, serde_json::json!({"_status": {"messages": [{"message": message}]}}))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// (query, the range it selects as (limit, descending, after, until), or
    /// the start of the real node's refusal)
    fn check(query: &str, expected: Result<(u64, bool, u64, u64), &str>) {
        let got = Query::parse(query).map(|q| (q.limit, q.descending, q.after, q.until));
        match (&got, expected) {
            (Ok(got), Ok(want)) => assert_eq!(*got, want, "{query}"),
            (Err(message), Err(prefix)) => assert!(message.starts_with(prefix), "{query}: {message}"),
            _ => panic!("{query}: got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn the_real_nodes_parameter_rules() {
        const MAX: u64 = u64::MAX;
        check("", Ok((25, false, 0, MAX)));
        check("limit=100&order=asc&sequencenumber=gt:5&sequencenumber=lte:105", Ok((100, false, 5, 105)));
        check("limit=1&order=desc", Ok((1, true, 0, MAX)));
        check("order=DESC", Ok((25, true, 0, MAX)));
        check("limit=1000", Ok((100, false, 0, MAX))); // capped, not refused
        check("sequencenumber=gte:1", Ok((25, false, 0, MAX)));
        check("sequencenumber=7", Ok((25, false, 6, 7)));
        check("sequencenumber=lt:7", Ok((25, false, 0, 6)));
        check("timestamp=gte:1700000000.000000001&timestamp=lt:1800000000", Ok((25, false, 0, MAX)));
        check("encoding=base64", Ok((25, false, 0, MAX)));
        // Sequence numbers and limits are positive: zero is refused.
        check("sequencenumber=gt:0", Err("Invalid parameter: sequencenumber"));
        check("sequencenumber=0", Err("Invalid parameter: sequencenumber"));
        check("sequencenumber=gt:-1", Err("Invalid parameter: sequencenumber"));
        check("sequencenumber=gt:+1", Err("Invalid parameter: sequencenumber"));
        check("sequencenumber=gt:9223372036854775808", Err("Invalid parameter: sequencenumber"));
        check("sequencenumber=gt:9223372036854775807", Ok((25, false, 9223372036854775807, MAX)));
        check("sequencenumber=gt:01", Ok((25, false, 1, MAX))); // digits, so valid
        check("limit=0", Err("Invalid parameter: limit"));
        check("limit=", Err("Invalid parameter: limit"));
        check("limit=ten", Err("Invalid parameter: limit"));
        check("order=up", Err("Invalid parameter: order"));
        check("sequencenumber=between:1", Err("Invalid parameter: sequencenumber"));
        check("sequencenumber=gt:1:2", Err("Invalid parameter: sequencenumber"));
        check("timestamp=1700000000.0000000001", Err("Invalid parameter: timestamp"));
        check("timestamp=17000000000", Err("Invalid parameter: timestamp"));
        check("timestamp=1700000000.", Err("Invalid parameter: timestamp"));
        check("encoding=hex", Err("Invalid parameter: encoding"));
        check("page=2", Err("Unknown query parameter: page"));
        check("Limit=5", Err("Unknown query parameter: Limit"));
        check(&"sequencenumber=gt:1&".repeat(101), Err("Too many values for parameter: sequencenumber"));
        // Accepted by the real node, not modelled here: refused, not ignored.
        check("sequencenumber=ne:5", Err("sequencenumber=ne is not modelled"));
        check("encoding=utf-8", Err("encoding=utf-8 is not modelled"));
    }

    #[test]
    fn consensus_times_compare_as_seconds_and_nanoseconds() {
        let q = Query::parse("timestamp=gt:1700000000.5&timestamp=lte:1700000001").unwrap();
        assert!(!q.in_time("1700000000.500000000"));
        assert!(q.in_time("1700000000.500000001"));
        assert!(q.in_time("1700000001.000000000"));
        assert!(!q.in_time("1700000001.000000001"));
    }
}
