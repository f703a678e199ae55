//! ERC-8004 feedback through the api: `POST /agents/{uaid}/feedback/
//! eligibility` and `POST /agents/{uaid}/feedback`.
//!
//! **The rule.** A chat session may give feedback on its agent once, when
//! it holds at least `--feedback-min-messages` messages and the request is
//! signed in as the account that opened it. Eligibility answers the same
//! rule the submission applies, so `eligible: true` means a submission
//! now would be taken.
//!
//! Feedback is recorded by this broker (it has no chain writer): the entry
//! is stored, shown at once by `GET /agents/{uaid}/feedback`, and
//! journaled, so the next build publishes it (summary, detail and the
//! feedback index included). Its `client` is the signed-in account.

use broker_model::catalog::{FeedbackEntry, FEEDBACK_REGISTRY, NETWORKS};
use broker_model::Agent;
use serde::Deserialize;
use serde_json::{json, Value};
use std::borrow::Cow;
use warp::http::StatusCode;

use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::feedback::{self as stored, Given, Session};
use crate::store::{self};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EligibilityRequest {
    session_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SubmitRequest {
    session_id: String,
    score: f64,
    tag1: Option<String>,
    tag2: Option<String>,
    file_uri: Option<String>,
    file_hash: Option<String>,
}

/// Why a session may not give feedback now, if it may not: the rule of
/// the module's doc. Pure.
pub fn refusal(session: &Session, uaid: &str, min_messages: u64, account: Option<&str>) -> Option<String> {
    if session.uaid != uaid {
        return Some("the session is with another agent".into());
    }
    if session.given {
        return Some("feedback was already given in this session".into());
    }
    if session.messages < min_messages {
        return Some(format!("the session has {} messages; feedback needs {min_messages}", session.messages));
    }
    match (&session.account, account) {
        (None, _) => Some("the session was opened without signing in".into()),
        (Some(owner), Some(account)) if owner == account => None,
        (Some(_), _) => Some("sign in as the account that opened the session".into()),
    }
}

/// The agent (an ERC-8004 one: 400 otherwise, 404 unknown) and the
/// session (404 unknown).
async fn judged(request: &Request, session: &str) -> Result<(Agent, Session), Error> {
    let uaid = request.params.get("uaid");
    let view = request.app.overlay.view();
    let agent = super::register::lookup(request, &view, uaid)?
        .map(Cow::into_owned)
        .ok_or_else(|| super::unknown_agent(uaid))?;
    if agent.registry != FEEDBACK_REGISTRY {
        let message = format!("agent {uaid} is not in the {FEEDBACK_REGISTRY} registry and takes no ERC-8004 feedback");
        return Err(Error::new(StatusCode::BAD_REQUEST, "feedback_unsupported", message));
    }
    let id = session.to_string();
    let found = request.app.store.read(move |conn| stored::session(conn, &id)).await?;
    let session = found
        .ok_or_else(|| Error::new(StatusCode::NOT_FOUND, "session_not_found", format!("no chat session {session}")))?;
    Ok((agent, session))
}

fn account(request: &Request) -> Option<&str> {
    request.principal.as_ref().and_then(|p| p.account.as_deref())
}

/// `POST /agents/{uaid}/feedback/eligibility`.
pub async fn eligibility(request: Request) -> Answer {
    let body: EligibilityRequest = parse_body(&request.body)?;
    let (agent, session) = judged(&request, &body.session_id).await?;
    let min = request.app.feedback_min_messages;
    let reason = refusal(&session, &agent.uaid, min, account(&request));
    let mut answer = json!({
        "uaid": agent.uaid,
        "sessionId": session.id,
        "eligible": reason.is_none(),
        "messageCount": session.messages,
        "minimumMessages": min,
    });
    if let Some(reason) = reason {
        answer["reason"] = json!(reason);
    }
    Ok(reply::json(&answer))
}

/// An optional text field: trimmed, non-empty, at most `max` bytes.
fn text(field: &'static str, value: Option<String>, max: usize) -> Result<Option<String>, Error> {
    let Some(value) = value.map(|v| v.trim().to_string()) else { return Ok(None) };
    if value.is_empty() || value.len() > max {
        return Err(Error::invalid_body(format!("{field}: from 1 to {max} bytes")).naming(field));
    }
    Ok(Some(value))
}

/// The chain of an ERC-8004 agent, from its UAID's `nativeId`
/// (`eip155:<chainId>:<agentId>`).
fn chain(agent: &Agent) -> Option<(u64, &'static str)> {
    let native = agent.uaid.parse::<shared::uaid::Uaid>().ok()?.param("nativeId")?.to_string();
    let chain: u64 = native.strip_prefix("eip155:")?.split(':').next()?.parse().ok()?;
    NETWORKS.iter().find(|(id, _)| *id == chain).copied()
}

/// `POST /agents/{uaid}/feedback`: 200 with the entry as recorded; 403
/// when the session may not give feedback (the reason says why).
pub async fn submit(request: Request) -> Answer {
    let body: SubmitRequest = parse_body(&request.body)?;
    if !(0.0..=100.0).contains(&body.score) || body.score.fract() != 0.0 {
        return Err(Error::invalid_body("score: an integer from 0 to 100").naming("score"));
    }
    let (tag1, tag2) = (text("tag1", body.tag1, 32)?, text("tag2", body.tag2, 32)?);
    let file_uri = text("fileUri", body.file_uri, 2048)?;
    let file_hash = text("fileHash", body.file_hash, 66)?;
    if let Some(hash) = &file_hash {
        let hex = hash.strip_prefix("0x").unwrap_or_default();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::invalid_body("fileHash: 0x and 32 bytes in hex").naming("fileHash"));
        }
    }
    let (agent, session) = judged(&request, &body.session_id).await?;
    let min = request.app.feedback_min_messages;
    if let Some(reason) = refusal(&session, &agent.uaid, min, account(&request)) {
        return Err(Error::new(StatusCode::FORBIDDEN, "not_eligible", reason));
    }
    let client = account(&request).expect("checked by the rule").to_string();
    let (Some((chain_id, network)), Ok(agent_id)) = (chain(&agent), agent.original_id.parse::<u64>()) else {
        let message = format!("agent {} has no ERC-8004 chain and token id", agent.uaid);
        return Err(Error::new(StatusCode::SERVICE_UNAVAILABLE, "feedback_unavailable", message));
    };
    let now = store::now_ms();
    let entry = FeedbackEntry {
        uaid: agent.uaid.to_string(),
        network: network.to_string(),
        chain_id,
        agent_id,
        client: client.clone(),
        feedback_index: 0,
        score: body.score as u8,
        tag1,
        tag2,
        file_uri,
        file_hash,
        revoked: false,
        created_at: store::rfc3339(now),
        revoked_at: None,
        tx_hash: None,
    };
    let broker = request.build.as_deref().and_then(|b| b.broker.as_deref());
    let published = match broker {
        Some(b) => b.feedback(agent.uaid.as_str()).map_err(|e| Error::damaged_record(&e))?,
        None => Vec::new(),
    };
    let published = published.iter().filter(|e| e.client == client).count() as u64;
    let journal_seq = broker.map_or(0, |b| b.journal_seq);
    let id = session.id.clone();
    let given = request
        .app
        .store
        .write(move |conn| stored::give(conn, &id, entry.clone(), published, journal_seq, now))
        .await?;
    let entry = match given {
        Given::Done { seq, entry } => {
            request.app.feedback_changes.saw(seq);
            request.app.journal.wake.notify_one();
            entry
        }
        Given::Already => {
            return Err(Error::new(StatusCode::FORBIDDEN, "not_eligible", "feedback was already given in this session"))
        }
    };
    let mut answer = json!({
        "uaid": entry.uaid,
        "registry": FEEDBACK_REGISTRY,
        "agentId": entry.agent_id,
        "score": entry.score,
        "submittedAt": entry.created_at,
        "network": entry.network,
        "feedbackIndex": entry.feedback_index,
    });
    for (key, value) in
        [("tag1", &entry.tag1), ("tag2", &entry.tag2), ("fileUri", &entry.file_uri), ("fileHash", &entry.file_hash)]
    {
        if let Some(value) = value {
            answer[key] = json!(value);
        }
    }
    Ok(reply::json(&answer))
}

/// `GET /agents/{uaid}/feedback` when feedback was given since the build:
/// the build's entries and the stored ones, as the next build will
/// publish them; `None` when the build has them all.
pub async fn live(request: &Request, agent: &Agent, include_revoked: bool) -> Result<Option<Value>, Error> {
    let broker = request.build()?.broker.as_deref().ok_or_else(|| Error::not_found(&request.path))?;
    if request.app.feedback_changes.get() <= broker.journal_seq {
        return Ok(None);
    }
    let (uaid, seq) = (agent.uaid.to_string(), broker.journal_seq);
    let fresh = request.app.store.read(move |conn| stored::after(conn, &uaid, seq)).await?;
    if fresh.is_empty() {
        return Ok(None);
    }
    let published = broker.feedback(agent.uaid.as_str()).map_err(|e| Error::damaged_record(&e))?;
    let entries: Vec<&FeedbackEntry> = published.iter().chain(&fresh).collect();
    Ok(Some(broker_site::render::feedback_live(agent, &entries, include_revoked)))
}
