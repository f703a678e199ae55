//! Chat with agents (spec section 4, Chat; `broker-live.md` sections 1
//! and 2): sessions opened by UAID or agent URL, messages relayed to the
//! agent ([`relay`]) and answered as JSON or, when asked for, as an event
//! stream, history within the session's window, and ending a session.
//!
//! A message runs through named steps, as a request runs through the
//! pipeline, so each bound and each check has one place:
//!
//! ```text
//! Outgoing::read (the body: message, auth and key bounded before anything is looked up)
//!   -> Outgoing::session (the session named, with the caller's part in it; or one opened)
//!   -> replay (a key seen before: its answer, or 409; else claimed while in flight)
//!   -> encrypted_send (an encrypted session: stored for the other party, not relayed)
//!   -> Relay::prepare (target, authentication, history, payer, a slot for the call)
//!   -> Relay::answer | Relay::stream (the agent called)
//!   -> finish (the turn stored, billed, and the send's authentication held)
//! ```
//!
//! A turn is stored once the agent has answered it: a stream the client
//! leaves is dropped, which closes the agent's connection and stores
//! nothing; a turn that fails stores nothing either, the authentication
//! it brought included.

pub mod a2a;
pub mod access;
pub mod compact;
pub mod encryption;
pub mod mcp;
pub mod members;
pub mod openai;
pub mod relay;
pub mod routing;
pub mod sessions;
pub mod sse;
pub mod turn;

use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};
use std::borrow::Cow;
use warp::http::StatusCode;

use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::{self, chat as stored, credits};
use relay::{Chunk, Failure, Target, Turn};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SessionRequest {
    uaid: Option<String>,
    agent_url: Option<String>,
    auth: Option<Value>,
    history_ttl_seconds: Option<f64>,
    encryption_requested: Option<bool>,
    sender_uaid: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MessageRequest {
    message: String,
    streaming: Option<bool>,
    auth: Option<Value>,
    uaid: Option<String>,
    session_id: Option<String>,
    agent_url: Option<String>,
    cipher_envelope: Option<Value>,
    /// A retry with the same key gets the first answer; the agent is not
    /// called twice (also as the `Idempotency-Key` header).
    idempotency_key: Option<String>,
}

/// A send's idempotency key and the digest of what it relays (the
/// message and its envelope): a retry with both gets the first answer, the
/// key with another message 409 (`crate::idempotency`'s rule, per session).
#[derive(Clone)]
struct Idempotency {
    key: String,
    digest: String,
}

impl Idempotency {
    /// As the store keeps it with the send's `answer`.
    fn sent<'a>(&'a self, answer: &'a str) -> stored::Sent<'a> {
        stored::Sent { key: &self.key, digest: Some(&self.digest), answer }
    }
}

pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", shared::http::hex(&store::random::<16>()))
}

/// A relay failure as answered: 422 when nothing here speaks the agent's
/// protocol, 403 when the gate refuses its address, 500 otherwise (the
/// spec's "cannot connect").
fn failed(failure: &Failure) -> Error {
    let status = match failure {
        Failure::NotAllowed => return crate::egress::refusal(),
        Failure::Unsupported(_) => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    Error::new(status, failure.code(), failure.message().to_string())
}

/// The stored target, read back.
fn target_of(json: &str) -> Result<Target, Error> {
    let value: Value = serde_json::from_str(json).unwrap_or_default();
    Target::from_json(&value)
        .ok_or_else(|| Error::from(store::Failure::Corrupt(format!("a chat session's target: {json}"))))
}

/// The agent as the session answer shows it: `capabilities` is an object.
fn agent_json(name: &str, description: &str, target: &Target, skills: &[String]) -> Value {
    let (protocol, streaming) = match target {
        Target::A2a(card) => ("a2a", card.streaming),
        Target::Plain { .. } => ("http", false),
        Target::OpenAi { .. } => ("openrouter", true),
        Target::Mcp(_) => ("mcp", false),
    };
    let mut agent = json!({"name": name, "capabilities": {"protocol": protocol, "streaming": streaming}});
    if !description.is_empty() {
        agent["description"] = json!(description);
    }
    if !skills.is_empty() {
        agent["skills"] = json!(skills);
    }
    agent
}

/// A history entry on the wire: roles `user` and `agent` only; no nulls.
pub(crate) fn entry(m: &stored::Message) -> Value {
    let mut entry = json!({"messageId": m.message_id, "role": m.role, "content": m.content,
        "timestamp": store::rfc3339(m.created_at)});
    if let Some(envelope) = m.cipher_envelope.as_deref().and_then(|e| serde_json::from_str::<Value>(e).ok()) {
        entry["cipherEnvelope"] = envelope;
    }
    entry
}

/// Opens a session (shared by `POST /chat/session` and a message that
/// names no session) holding `headers` for its agent (its `auth`, already
/// read within the bounds): resolves the agent, bills extended history.
async fn open(
    request: &Request,
    body: SessionRequest,
    headers: warp::http::HeaderMap,
) -> Result<(stored::Session, Value), Error> {
    let chat = &request.app.chat;
    if request.principal.is_none() {
        request.app.anonymous_chat_limit.check(request.client).map_err(crate::limit::rate_limited)?;
    }
    let default_ttl = chat.history_ttl.as_secs() as i64;
    let ttl = match body.history_ttl_seconds {
        None => default_ttl,
        Some(t) if t.is_finite() && t >= 1.0 && t <= chat.max_history_ttl.as_secs() as f64 => t.ceil() as i64,
        Some(_) => {
            let message = format!("historyTtlSeconds: must be from 1 to {}", chat.max_history_ttl.as_secs());
            return Err(Error::invalid_body(message).naming("historyTtlSeconds"));
        }
    };
    let (uaid, url, target, agent) = match (&body.uaid, &body.agent_url) {
        (Some(uaid), _) => {
            let uaid = uaid.trim().to_string();
            if uaid.parse::<shared::uaid::Uaid>().is_err() {
                return Err(Error::new(StatusCode::BAD_REQUEST, "invalid_uaid", "uaid: not a UAID").naming("uaid"));
            }
            let view = request.app.overlay.view();
            let record =
                crate::broker::register::lookup(request, &view, &uaid)?.map(Cow::into_owned).ok_or_else(|| {
                    Error::new(StatusCode::NOT_FOUND, "uaid_not_found", format!("no agent {uaid} is indexed here"))
                })?;
            let target = relay::target(&chat.gate, &record, chat.max_answer_bytes).await.map_err(|f| failed(&f))?;
            let skills = match &target {
                Target::A2a(card) => card.skills.clone(),
                _ => record.capability_labels.clone(),
            };
            let agent = agent_json(&record.name, &record.description, &target, &skills);
            (uaid, None, target, agent)
        }
        (None, Some(url)) => {
            let url = url.trim().to_string();
            let parsed =
                reqwest::Url::parse(&url).ok().filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
            if parsed.is_none() {
                return Err(Error::invalid_body("agentUrl: must be an http or https URL").naming("agentUrl"));
            }
            let target = relay::target_of_url(&chat.gate, &url, chat.max_answer_bytes).await.map_err(|f| failed(&f))?;
            let agent = match &target {
                Target::A2a(card) => agent_json(&card.name, &card.description, &target, &card.skills),
                _ => agent_json(&url, "", &target, &[]),
            };
            (String::new(), Some(url), target, agent)
        }
        (None, None) => return Err(Error::invalid_body("uaid or agentUrl: one is required").naming("uaid")),
    };
    if body.sender_uaid.as_deref().is_some_and(|s| s.parse::<shared::uaid::Uaid>().is_err()) {
        return Err(Error::invalid_body("senderUaid: not a UAID").naming("senderUaid"));
    }
    let account = request.principal.as_ref().and_then(|p| p.account.clone());
    if target.metered() && account.is_none() {
        return Err(Error::unauthorized("auth_required", "a model-routing provider agent needs a signed-in payer"));
    }
    // History past the free window is billed: a signed-in payer, and
    // credits for each day begun beyond it.
    let extra_days = ((ttl - default_ttl).max(0) + 86_399) / 86_400;
    let price = extra_days * request.app.pricing.chat.extended_history_per_day;
    if extra_days > 0 && account.is_none() {
        let message = format!("historyTtlSeconds above {default_ttl} is billed: sign in first");
        return Err(Error::unauthorized("auth_required", message));
    }
    if let Some(account) = &account {
        let (key, max) = (account.clone(), chat.max_sessions);
        let open = request.app.store.read(move |conn| stored::open_sessions(conn, &key)).await?;
        if open >= max {
            let message = format!("{max} sessions are open for this account: end one first");
            return Err(Error::new(StatusCode::TOO_MANY_REQUESTS, "too_many_sessions", message));
        }
    }
    let session = stored::Session {
        id: new_id("sess_"),
        uaid: uaid.clone(),
        agent_url: url,
        target: target.to_json().to_string(),
        agent: agent.to_string(),
        account: account.clone(),
        context: None,
        history_ttl: ttl,
        visibility: "private".into(),
        sender_uaid: body.sender_uaid.clone(),
        title: agent["name"].as_str().map(String::from),
        created_at: store::now_ms(),
        last_activity_at: store::now_ms(),
        ended_at: None,
        encryption: None,
    };
    // Held before the session is stored, so a full store refuses the
    // session rather than leave it without its authentication.
    chat.hold_auth(&session.id, headers).map_err(|_| auth_full())?;
    let (held, bill) = (session.clone(), (price > 0).then(|| account.clone()).flatten());
    let encrypted = (body.encryption_requested == Some(true) && chat.encryption_enabled)
        .then(|| encryption::initial(session.created_at));
    let state = encrypted.as_ref().map(Value::to_string);
    let outcome = request
        .app
        .store
        .write(move |conn| {
            if let Some(account) = bill.clone() {
                let change = credits::Change {
                    account,
                    kind: credits::Kind::Debit,
                    credits: price,
                    idempotency_key: format!("chat-history:{}", held.id),
                    reason: "chat history".into(),
                    reference: Some(held.id.clone()),
                };
                if let credits::Posted::Short { balance, shortfall } = credits::post(conn, &change, held.created_at)? {
                    return Ok(Err((balance, shortfall)));
                }
            }
            stored::open(conn, &held)?;
            if let Some(state) = &state {
                stored::set_encryption(conn, &held.id, state)?;
            }
            Ok(Ok(()))
        })
        .await
        .inspect_err(|_| chat.forget(&session.id))?;
    if let Err((balance, shortfall)) = outcome {
        chat.forget(&session.id);
        return Err(crate::broker::register::short(price, balance, shortfall));
    }
    let mut answer = json!({
        "sessionId": session.id,
        "uaid": if uaid.is_empty() { Value::Null } else { json!(uaid) },
        "agent": agent,
        "history": [],
        "historyTtlSeconds": ttl,
        "encryption": Value::Null,
    });
    if let Some(state) = &encrypted {
        answer["encryption"] = encryption::summary(&request.app, &session, state).await;
    }
    Ok((session, answer))
}

/// `POST /api/v1/chat/session`.
pub async fn create(request: Request) -> Answer {
    let body: SessionRequest = parse_body(&request.body)?;
    let headers = body.auth.as_ref().map(|auth| session_auth(request.app.chat.auth_bounds, auth)).transpose()?;
    let (_, answer) = open(&request, body, headers.unwrap_or_default()).await?;
    Ok(reply::json(&answer))
}

/// The session a message names; 404 for an unknown or ended one.
async fn session(request: &Request, id: &str) -> Result<stored::Session, Error> {
    let session = held(request, id).await?;
    match session.ended_at {
        None => Ok(session),
        Some(_) => Err(access::ended(id)),
    }
}

/// The session `id`, ended or not; 404 `session_not_found` when unknown.
pub(crate) async fn held(request: &Request, id: &str) -> Result<stored::Session, Error> {
    let key = id.to_string();
    let found = request.app.store.read(move |conn| stored::session(conn, &key)).await?;
    found.ok_or_else(|| Error::new(StatusCode::NOT_FOUND, "session_not_found", format!("no session {id}")))
}

/// Whether the request admits an event stream (`Accept` names
/// `text/event-stream`, `text/*` or `*/*` with a q above 0, and not only as
/// one of several types that JSON would also satisfy).
fn wants_events(headers: &warp::http::HeaderMap) -> bool {
    let accept = headers.get_all("accept").iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>().join(",");
    accept.split(',').any(|item| {
        let mut parts = item.split(';');
        let kind = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let q =
            parts.filter_map(|p| p.trim().strip_prefix("q=")).find_map(|q| q.trim().parse::<f32>().ok()).unwrap_or(1.0);
        kind == "text/event-stream" && q > 0.0
    })
}

/// A session's authentication (`auth`) as its headers, within the bounds
/// (400 naming `auth`).
fn session_auth(bounds: relay::AuthBounds, auth: &Value) -> Result<warp::http::HeaderMap, Error> {
    relay::auth_headers(auth, bounds).map_err(|bad| {
        let code = match bad {
            relay::BadAuth::TooLarge(_) => "auth_too_large",
            relay::BadAuth::Invalid(_) => "invalid_body",
        };
        Error::new(StatusCode::BAD_REQUEST, code, format!("auth: {bad}")).naming("auth")
    })
}

/// 503: the authentication held for all sessions is at its bound.
fn auth_full() -> Error {
    let message = "the broker holds as much session authentication as it may; try again later";
    Error::new(StatusCode::SERVICE_UNAVAILABLE, "auth_store_full", message)
}

/// The bounds a send's body is read within.
#[derive(Clone, Copy, Debug)]
pub struct SendBounds {
    pub max_message_bytes: usize,
    pub auth: relay::AuthBounds,
}

/// A send as read from its body: everything bounded and checked before
/// a session is looked up or an agent called.
pub struct Outgoing {
    body: MessageRequest,
    /// The send's own authentication, used for its turn and held once the
    /// turn is stored (a send that opens a session holds it at once).
    auth: Option<warp::http::HeaderMap>,
    key: Option<Idempotency>,
    /// Answered as an event stream.
    streaming: bool,
}

impl Outgoing {
    fn read(request: &Request) -> Result<Outgoing, Error> {
        let chat = &request.app.chat;
        let bounds = SendBounds { max_message_bytes: chat.max_message_bytes, auth: chat.auth_bounds };
        Outgoing::parse(&request.body, &request.headers, bounds)
    }

    /// Reads a send's body and headers within `bounds`, every collection
    /// bounded before it is built. Pure (the fuzz target `chat_message`
    /// drives it).
    pub fn parse(body: &bytes::Bytes, headers: &warp::http::HeaderMap, bounds: SendBounds) -> Result<Outgoing, Error> {
        let body: MessageRequest = parse_body(body)?;
        if body.message.trim().is_empty() && body.cipher_envelope.is_none() {
            return Err(Error::invalid_body("message: must not be empty").naming("message"));
        }
        if body.message.len() > bounds.max_message_bytes {
            let message = format!("message: larger than {} bytes", bounds.max_message_bytes);
            return Err(Error::new(StatusCode::PAYLOAD_TOO_LARGE, "message_too_large", message).naming("message"));
        }
        if let Some(envelope) = &body.cipher_envelope {
            encryption::check_envelope(envelope)?;
        }
        let auth = body.auth.as_ref().map(|auth| session_auth(bounds.auth, auth)).transpose()?;
        let key = crate::idempotency::key(headers, body.idempotency_key.as_deref())?.map(|key| {
            let sent = json!([body.message, body.cipher_envelope]).to_string();
            Idempotency { key, digest: crate::idempotency::digest(&sent) }
        });
        let streaming = body.streaming == Some(true) && wants_events(headers);
        Ok(Outgoing { body, auth, key, streaming })
    }

    pub fn message(&self) -> &str {
        &self.body.message
    }

    /// The send's own authentication for its agent, if it brings one.
    pub fn auth(&self) -> Option<&warp::http::HeaderMap> {
        self.auth.as_ref()
    }

    pub fn idempotency_key(&self) -> Option<&str> {
        self.key.as_ref().map(|k| k.key.as_str())
    }

    /// The session the send names, which the caller may write into (404
    /// for an unknown or ended one, 401 or 403 for another's), or one
    /// opened for its `uaid` or `agentUrl`.
    async fn session(&mut self, request: &Request) -> Result<stored::Session, Error> {
        if let Some(id) = &self.body.session_id {
            let session = session(request, id).await?;
            access::require(request, &session).await?;
            return Ok(session);
        }
        let opening = SessionRequest {
            uaid: self.body.uaid.clone(),
            agent_url: self.body.agent_url.clone(),
            auth: None,
            history_ttl_seconds: None,
            encryption_requested: None,
            sender_uaid: None,
        };
        // The session holds the send's authentication from its opening.
        let headers = self.auth.take().unwrap_or_default();
        Ok(open(request, opening, headers).await?.0)
    }
}

/// What a key already names in a session.
enum Replay {
    /// A retry: the first send's answer.
    Answered(Value),
    /// Not seen: claimed until the send ends (`None` without a key).
    Claimed(Option<sessions::Claim>),
}

/// A key's first answer, 409 for the key with another message or while
/// its first send is in flight, or the key claimed.
async fn replay(request: &Request, session: &stored::Session, key: Option<&Idempotency>) -> Result<Replay, Error> {
    let Some(idempotency) = key else { return Ok(Replay::Claimed(None)) };
    let (id, k) = (session.id.clone(), idempotency.key.clone());
    if let Some((answer, digest)) = request.app.store.read(move |conn| stored::sent(conn, &id, &k)).await? {
        if digest.is_some_and(|d| d != idempotency.digest) {
            return Err(crate::idempotency::reused());
        }
        return Ok(Replay::Answered(serde_json::from_str(&answer).unwrap_or_default()));
    }
    let claim = request.app.chat.claim(&session.id, &idempotency.key).ok_or_else(|| {
        Error::new(StatusCode::CONFLICT, "send_in_progress", "a send with this idempotency key is in progress")
    })?;
    Ok(Replay::Claimed(Some(claim)))
}

/// `POST /api/v1/chat/message`: routed by `sessionId` first, else a
/// session is opened for `uaid` or `agentUrl`.
pub async fn message(request: Request) -> Answer {
    let mut send = Outgoing::read(&request)?;
    let session = send.session(&request).await?;
    let claim = match replay(&request, &session, send.key.as_ref()).await? {
        Replay::Answered(answer) => return Ok(reply::json(&answer)),
        Replay::Claimed(claim) => claim,
    };
    if session.encryption.is_some() {
        return encrypted_send(&request, &session, &send.body, send.key.as_ref()).await;
    }
    let relay = Relay::prepare(&request, session, send).await?;
    match relay.send.streaming {
        false => relay.answer(&request).await,
        true => relay.stream(&request, claim).await,
    }
}

/// A turn ready to be relayed: the agent, what it is sent, who pays, and a
/// slot among the calls in flight.
struct Relay {
    session: stored::Session,
    send: Outgoing,
    target: Target,
    headers: warp::http::HeaderMap,
    history: Vec<(String, String)>,
    user: stored::Message,
    bill: Option<(String, f64)>,
    permit: tokio::sync::OwnedSemaphorePermit,
}

impl Relay {
    async fn prepare(request: &Request, session: stored::Session, send: Outgoing) -> Result<Relay, Error> {
        let chat = &request.app.chat;
        let target = target_of(&session.target)?;
        // The send's own authentication stands for the session's this turn.
        let headers = send.auth.clone().unwrap_or_else(|| chat.auth(&session.id));
        let now = store::now_ms();
        let since = now - session.history_ttl * 1000;
        let (id, limit) = (session.id.clone(), chat.max_history_entries);
        // A2A agents keep the conversation themselves (its contextId); the
        // others are sent the history.
        let earlier = match target {
            Target::A2a(_) => Vec::new(),
            _ => request.app.store.read(move |conn| stored::history(conn, &id, since, limit)).await?,
        };
        let history = earlier.into_iter().map(|m| (m.role, m.content)).collect();
        let user = stored::Message {
            message_id: new_id("msg_"),
            role: "user".into(),
            content: send.body.message.clone(),
            cipher_envelope: send.body.cipher_envelope.as_ref().map(Value::to_string),
            created_at: now,
        };
        let bill = payer(request, &target).await?;
        let permit = chat.upstream.clone().try_acquire_owned().map_err(|_| {
            Error::new(StatusCode::SERVICE_UNAVAILABLE, "too_busy", "too many agent calls are in flight; try again")
        })?;
        Ok(Relay { session, send, target, headers, history, user, bill, permit })
    }

    fn turn<'a>(&'a self, relay_id: &'a str) -> Turn<'a> {
        Turn {
            text: &self.send.body.message,
            session: relay_id,
            context: self.session.context.as_deref(),
            history: &self.history,
            headers: &self.headers,
        }
    }

    /// The agent's whole reply, stored and answered as JSON.
    async fn answer(self, request: &Request) -> Answer {
        let chat = &request.app.chat;
        let relay_id = access::relay_id(&self.session.id);
        let reply =
            relay::send(&chat.gate, &chat.providers, &self.target, &self.turn(&relay_id), chat.max_answer_bytes)
                .await
                .map_err(|f| failed(&f))?;
        let Relay { session, send, user, bill, permit, .. } = self;
        drop(permit);
        let stored = Stored { session: &session, send: &send, bill: bill.as_ref() };
        let answer = finish(&request.app, &stored, user, &reply, new_id("msg_")).await?;
        Ok(reply::json(&answer))
    }

    /// The agent's reply relayed as events while it streams. The turn runs
    /// on a task of its own that sends each event as the agent's chunks
    /// arrive; the last one closes the turn. When the client leaves, the
    /// channel closes: the task drops the agent's stream (its connection
    /// closes), returns the permit, and stores nothing.
    async fn stream(self, request: &Request, claim: Option<sessions::Claim>) -> Answer {
        let chat = &request.app.chat;
        let relay_id = access::relay_id(&self.session.id);
        let upstream =
            relay::stream(&chat.gate, &chat.providers, &self.target, &self.turn(&relay_id), chat.max_answer_bytes)
                .await
                .map_err(|f| failed(&f))?;
        let app = request.app.clone();
        let message_id = new_id("msg_");
        let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(16);
        let Relay { session, send, user, bill, permit, .. } = self;
        tokio::spawn(async move {
            let (_permit, _claim) = (permit, claim);
            let mut upstream = upstream;
            let mut user = Some(user);
            loop {
                let next = tokio::select! {
                    _ = tx.closed() => return,
                    next = upstream.next() => next,
                };
                let (event, last) = match next {
                    Some(Ok(Chunk::Text(text))) => (
                        json!({"type": "event", "content": {"kind": "message", "sessionId": session.id,
                            "messageId": message_id, "role": "agent", "text": text, "final": false}}),
                        false,
                    ),
                    Some(Ok(Chunk::Done(reply))) => {
                        if tx.is_closed() {
                            return;
                        }
                        let user = user.take().expect("one reply per turn");
                        let stored = Stored { session: &session, send: &send, bill: bill.as_ref() };
                        let event = match finish(&app, &stored, user, &reply, message_id.clone()).await {
                            Ok(mut answer) => {
                                answer["kind"] = json!("message");
                                answer["messageId"] = json!(message_id);
                                answer["final"] = json!(true);
                                json!({"type": "event", "content": answer})
                            }
                            Err(e) => {
                                json!({"type": "error", "content": {"kind": "error", "code": e.code, "message": e.message}})
                            }
                        };
                        (event, true)
                    }
                    Some(Err(failure)) => (
                        json!({"type": "error", "content": {"kind": "error", "code": failure.code(), "message": failure.message()}}),
                        true,
                    ),
                    None => (
                        json!({"type": "error", "content": {"kind": "error", "code": "agent_stream_cut",
                            "message": "the agent's stream ended before its reply"}}),
                        true,
                    ),
                };
                if tx.send(sse::event(&event)).await.is_err() || last {
                    return;
                }
            }
        });
        let events = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|event| (Ok::<_, std::convert::Infallible>(event), rx))
        });
        Ok(reply::stream("text/event-stream", "no-store", events))
    }
}

/// Who pays a metered agent's turn: a signed-in payer with credits, at the
/// pricing's rate (`None` for an agent that is not metered).
async fn payer(request: &Request, target: &Target) -> Result<Option<(String, f64)>, Error> {
    if !target.metered() {
        return Ok(None);
    }
    let principal = request.principal.as_ref().ok_or_else(|| {
        Error::unauthorized("auth_required", "a model-routing provider agent needs a signed-in payer")
    })?;
    let account = principal.billing(&request.headers)?;
    let owner = account.clone();
    let balance = request.app.store.read(move |conn| credits::balance(conn, &owner)).await?;
    if balance < 1 {
        return Err(crate::broker::register::short(1, balance, 1 - balance));
    }
    Ok(Some((account, request.app.pricing.chat.credits_per_thousand_tokens)))
}

/// A message of an encrypted session: its envelope is required and kept
/// unchanged for the other party, who reads it in the history; nothing
/// is relayed (the broker cannot read it).
async fn encrypted_send(
    request: &Request,
    session: &stored::Session,
    body: &MessageRequest,
    key: Option<&Idempotency>,
) -> Answer {
    let Some(envelope) = &body.cipher_envelope else {
        let message = "cipherEnvelope: this session is encrypted; send the message encrypted";
        return Err(Error::new(StatusCode::BAD_REQUEST, "ciphertext_required", message).naming("cipherEnvelope"));
    };
    encryption::check_envelope(envelope)?;
    let now = store::now_ms();
    let message = stored::Message {
        message_id: new_id("msg_"),
        role: "user".into(),
        content: body.message.clone(),
        cipher_envelope: Some(envelope.to_string()),
        created_at: now,
    };
    let mut answer = json!({"sessionId": session.id, "message": body.message, "timestamp": store::rfc3339(now),
        "historyTtlSeconds": session.history_ttl, "encrypted": true});
    if !session.uaid.is_empty() {
        answer["uaid"] = json!(session.uaid);
    }
    let (id, sent) = (session.id.clone(), key.map(|k| (k.clone(), answer.to_string())));
    let keep = request.app.chat.keep();
    let stored = request
        .app
        .store
        .write(move |conn| {
            let sent = sent.as_ref().map(|(k, answer)| k.sent(answer));
            stored::turn(conn, &id, std::slice::from_ref(&message), None, sent, keep)
        })
        .await?;
    if !stored {
        return Err(access::ended(&session.id));
    }
    Ok(reply::json(&answer))
}

/// What a finished turn is stored with: its session, its send (the key
/// and the authentication to hold), and its payer.
struct Stored<'a> {
    session: &'a stored::Session,
    send: &'a Outgoing,
    bill: Option<&'a (String, f64)>,
}

/// Stores the turn and answers it as a `ChatMessageResponse`; once it is
/// stored, the send's authentication (if it brought one) is the session's.
async fn finish(
    app: &crate::app::App,
    turn: &Stored<'_>,
    user: stored::Message,
    reply: &relay::Reply,
    message_id: String,
) -> Result<Value, Error> {
    let session = turn.session;
    let agent = stored::Message {
        message_id,
        role: "agent".into(),
        content: reply.text.clone(),
        cipher_envelope: None,
        created_at: store::now_ms().max(user.created_at),
    };
    let mut answer = json!({
        "sessionId": session.id,
        "message": reply.text,
        "content": reply.text,
        "timestamp": store::rfc3339(agent.created_at),
        "historyTtlSeconds": session.history_ttl,
    });
    if !session.uaid.is_empty() {
        answer["uaid"] = json!(session.uaid);
    }
    if !reply.raw.is_null() {
        answer["rawResponse"] = reply.raw.clone();
    }
    // Metered: the provider's token usage, in credits (at least one).
    let charge = turn.bill.map(|(account, per_thousand)| {
        let tokens = reply.raw["usage"]["total_tokens"].as_u64().unwrap_or(0);
        let credits = ((tokens as f64 / 1000.0 * per_thousand).ceil() as i64).max(1);
        answer["creditsDebited"] = json!(credits);
        credits::Change {
            account: account.clone(),
            kind: credits::Kind::Debit,
            credits,
            idempotency_key: format!("chat:{}", agent.message_id),
            reason: format!("chat message ({tokens} tokens)"),
            reference: Some(session.id.clone()),
        }
    });
    let (id, context, messages) = (session.id.clone(), reply.context.clone(), vec![user, agent.clone()]);
    let sent = turn.send.key.clone().map(|k| (k, answer.to_string()));
    let keep = app.chat.keep();
    let outcome = app
        .store
        .write(move |conn| {
            if let Some(change) = &charge {
                if let credits::Posted::Short { balance, shortfall } = credits::post(conn, change, store::now_ms())? {
                    return Ok(Err((change.credits, balance, shortfall)));
                }
            }
            let sent = sent.as_ref().map(|(k, answer)| k.sent(answer));
            Ok(Ok(stored::turn(conn, &id, &messages, context.as_deref(), sent, keep)?))
        })
        .await?;
    let stored = match outcome {
        Ok(stored) => stored,
        Err((required, balance, shortfall)) => {
            return Err(crate::broker::register::short(required, balance, shortfall))
        }
    };
    if !stored {
        return Err(access::ended(&session.id));
    }
    if let Some(headers) = &turn.send.auth {
        // Full: the turn stands, and the session keeps what it held.
        let _ = app.chat.hold_auth(&session.id, headers.clone());
    }
    Ok(answer)
}

/// `GET /api/v1/chat/session/{sessionId}/history`: the messages within
/// the session's window (503 when history is off).
pub async fn history(request: Request) -> Answer {
    let chat = &request.app.chat;
    if !chat.history_enabled {
        return Err(Error::new(StatusCode::SERVICE_UNAVAILABLE, "history_disabled", "chat history is not kept here"));
    }
    let id = request.params.get("sessionId").to_string();
    let session = held(&request, &id).await?;
    // A member invited to see only what followed the invite sees that.
    let since = (store::now_ms() - session.history_ttl * 1000).max(access::readable_since(&request, &session).await?);
    let limit = chat.max_history_entries;
    let messages = request.app.store.read(move |conn| stored::history(conn, &id, since, limit)).await?;
    Ok(reply::json(&json!({
        "sessionId": session.id,
        "history": messages.iter().map(entry).collect::<Vec<_>>(),
        "historyTtlSeconds": session.history_ttl,
    })))
}

/// `DELETE /api/v1/chat/session/{sessionId}`: ends it and forgets its
/// authentication.
pub async fn end(request: Request) -> Answer {
    let id = request.params.get("sessionId").to_string();
    access::require_owner(&request, &held(&request, &id).await?).await?;
    request.app.chat.forget(&id);
    let key = id.clone();
    let ended = request.app.store.write(move |conn| stored::end(conn, &key, store::now_ms())).await?;
    if !ended {
        // Ended before, or never opened (404).
        held(&request, &id).await?;
    }
    Ok(reply::json(&json!({"sessionId": id, "message": "the session has ended"})))
}
