//! Encrypted chat (`broker-live.md` section 2): the session's encryption
//! summary and the handshake through which its two parties exchange
//! ephemeral secp256k1 keys. The broker only relays public keys and
//! stores each message's `cipherEnvelope` unchanged: it never sees a
//! plaintext, so an encrypted session's messages are kept for the other
//! party to read in the history, not relayed to an agent.
//!
//! The handshake is `pending` until both roles have submitted, then
//! `complete` with both keys echoed; a submission after it expired starts
//! it again.

use serde::Deserialize;
use serde_json::{json, Value};
use warp::http::StatusCode;

use crate::app::App;
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::{self, chat as stored, keys};

pub const ALGORITHM: &str = "aes-256-gcm";
/// How long a handshake may take, in milliseconds.
const HANDSHAKE_MS: i64 = 10 * 60 * 1000;

/// The state of a session just made encrypted.
pub fn initial(now: i64) -> Value {
    json!({"requireCiphertext": true, "createdAt": now, "expiresAt": now + HANDSHAKE_MS,
        "requester": null, "responder": null})
}

fn disabled() -> Error {
    Error::new(StatusCode::SERVICE_UNAVAILABLE, "encryption_disabled", "encrypted chat is turned off here")
}

/// A party as the summary shows it: its long-term key (registered with
/// `POST /encryption/keys`, else the one it sent in the handshake; empty
/// when neither) and who it is.
async fn peer(app: &App, uaid: Option<String>, account: Option<String>, submitted: &Value) -> Value {
    let uaid = uaid.filter(|u| !u.is_empty()).or_else(|| submitted["uaid"].as_str().map(String::from));
    let subjects: Vec<String> =
        uaid.iter().map(|u| format!("uaid:{u}")).chain(account.iter().map(|a| format!("account:{a}"))).collect();
    let registered = app
        .store
        .read(move |conn| {
            for subject in &subjects {
                if let Some(key) = keys::of_subject(conn, subject)? {
                    return Ok(Some(key.public_key));
                }
            }
            Ok(None)
        })
        .await
        .unwrap_or(None);
    let key = registered.or_else(|| submitted["longTermPublicKey"].as_str().map(String::from)).unwrap_or_default();
    let mut peer = json!({"keyType": "secp256k1", "publicKey": key});
    if let Some(uaid) = uaid {
        peer["uaid"] = json!(uaid);
    }
    if let Some(account) = account {
        peer["ledgerAccountId"] = json!(account);
    }
    peer
}

/// The handshake record as answered.
fn record(session: &str, state: &Value) -> Value {
    let complete = state["requester"].is_object() && state["responder"].is_object();
    let mut record = json!({
        "sessionId": session,
        "algorithm": ALGORITHM,
        "createdAt": store::rfc3339(state["createdAt"].as_i64().unwrap_or_default()),
        "expiresAt": state["expiresAt"],
        "status": if complete { "complete" } else { "pending" },
    });
    for role in ["requester", "responder"] {
        if state[role].is_object() {
            record[role] = state[role].clone();
        }
    }
    record
}

/// The summary of an encrypted session.
pub async fn summary(app: &App, session: &stored::Session, state: &Value) -> Value {
    let requester = peer(app, session.sender_uaid.clone(), session.account.clone(), &state["requester"]).await;
    let responder = peer(app, Some(session.uaid.clone()), None, &state["responder"]).await;
    let handshake = state["requester"].is_object() || state["responder"].is_object();
    json!({
        "enabled": true,
        "requireCiphertext": state["requireCiphertext"].as_bool().unwrap_or(true),
        "algorithm": ALGORITHM,
        "requester": requester,
        "responder": responder,
        "handshake": if handshake { record(&session.id, state) } else { Value::Null },
    })
}

/// The session of the path and its encryption state; 404 when unknown.
async fn load(request: &Request) -> Result<(stored::Session, Option<Value>), Error> {
    let session = super::held(request, request.params.get("sessionId")).await?;
    let state = session.encryption.as_deref().and_then(|s| serde_json::from_str(s).ok());
    Ok((session, state))
}

/// `GET /api/v1/chat/session/{sessionId}/encryption`: `{sessionId,
/// encryption}` (`null` for a plaintext session).
pub async fn status(request: Request) -> Answer {
    if !request.app.chat.encryption_enabled {
        return Err(disabled());
    }
    let (session, state) = load(&request).await?;
    super::access::readable_since(&request, &session).await?;
    let encryption = match &state {
        Some(state) => summary(&request.app, &session, state).await,
        None => Value::Null,
    };
    Ok(reply::json(&json!({"sessionId": session.id, "encryption": encryption})))
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Role {
    Requester,
    Responder,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Submission {
    role: Role,
    key_type: String,
    ephemeral_public_key: String,
    long_term_public_key: Option<String>,
    signature: Option<String>,
    uaid: Option<String>,
    user_id: Option<String>,
    ledger_account_id: Option<String>,
    metadata: Option<serde_json::Map<String, Value>>,
}

/// A compressed secp256k1 point in hex, or why not.
fn point(text: &str) -> Result<String, &'static str> {
    let bytes = crate::auth::signature::decode_hex(text).ok_or("must be hex")?;
    if bytes.len() != 33 || k256::PublicKey::from_sec1_bytes(&bytes).is_err() {
        return Err("must be a compressed secp256k1 point (33 bytes, 66 hex digits)");
    }
    Ok(shared::http::hex(&bytes))
}

/// `POST /api/v1/chat/session/{sessionId}/encryption-handshake`.
pub async fn handshake(request: Request) -> Answer {
    if !request.app.chat.encryption_enabled {
        return Err(disabled());
    }
    let body: Submission = parse_body(&request.body)?;
    if body.key_type != "secp256k1" {
        return Err(Error::invalid_body("keyType: only secp256k1 is exchanged").naming("keyType"));
    }
    let ephemeral = point(&body.ephemeral_public_key)
        .map_err(|rule| Error::invalid_body(format!("ephemeralPublicKey: {rule}")).naming("ephemeralPublicKey"))?;
    if let Some(long_term) = &body.long_term_public_key {
        point(long_term)
            .map_err(|rule| Error::invalid_body(format!("longTermPublicKey: {rule}")).naming("longTermPublicKey"))?;
    }
    let (session, state) = load(&request).await?;
    if session.ended_at.is_some() {
        return Err(super::access::ended(&session.id));
    }
    if state.is_none() {
        let message = format!("session {} is not encrypted (open it with encryptionRequested: true)", session.id);
        return Err(Error::new(StatusCode::NOT_FOUND, "encrypted_session_not_found", message));
    }
    let now = store::now_ms();
    let role = match body.role {
        Role::Requester => "requester",
        Role::Responder => "responder",
    };
    submitter(&request, &session, &body.role).await?;
    let mut participant = json!({"role": role, "keyType": body.key_type, "ephemeralPublicKey": ephemeral,
        "submittedAt": store::rfc3339(now)});
    for (field, value) in [
        ("uaid", &body.uaid),
        ("userId", &body.user_id),
        ("ledgerAccountId", &body.ledger_account_id),
        ("longTermPublicKey", &body.long_term_public_key),
        ("signature", &body.signature),
    ] {
        if let Some(value) = value {
            participant[field] = json!(value);
        }
    }
    if let Some(metadata) = body.metadata {
        participant["metadata"] = Value::Object(metadata);
    }
    // Read, change and write in one step of the store's single writer: the
    // two parties submit at the same moment, and neither may undo the other.
    let id = session.id.clone();
    let state = request
        .app
        .store
        .write(move |conn| {
            let held = stored::session(conn, &id)?
                .and_then(|s| s.encryption)
                .and_then(|s| serde_json::from_str::<Value>(&s).ok());
            let mut state = held.unwrap_or_else(|| initial(now));
            if now > state["expiresAt"].as_i64().unwrap_or_default() {
                state = initial(now);
            }
            // Each party's key is set once: a second submission would let
            // whoever sends it stand between the parties.
            if state[role].is_object() {
                return Ok(Err(()));
            }
            state[role] = participant.clone();
            stored::set_encryption(conn, &id, &state.to_string())?;
            Ok(Ok(state))
        })
        .await?
        .map_err(|()| {
            let message = format!("the {role}'s key is already set for this handshake");
            Error::new(StatusCode::CONFLICT, "handshake_key_set", message)
        })?;
    Ok(reply::json(&json!({"sessionId": session.id, "handshake": record(&session.id, &state)})))
}

/// 401 or 403 unless the caller is the party `role` names: the requester
/// is the session's owner; the responder the account that held the
/// session's agent when it was opened (`access::responder`), or the owner
/// when none did.
async fn submitter(request: &Request, session: &stored::Session, role: &Role) -> Result<(), Error> {
    use super::access;
    let owner = access::owns(request, session);
    let allowed = match role {
        Role::Requester => owner,
        Role::Responder => {
            let principal = request.principal.as_ref();
            match access::responder(request, session).await? {
                Some(holder) => principal.is_some_and(|p| p.operator || p.account.as_ref() == Some(&holder)),
                None => owner,
            }
        }
    };
    let rule = match role {
        Role::Requester => "the requester's key is submitted by the session's owner",
        Role::Responder => "the responder's key is submitted by the account that registered the agent",
    };
    match (allowed, &request.principal) {
        (true, _) => Ok(()),
        (false, None) => Err(crate::auth::sign_in_required()),
        (false, Some(_)) => Err(Error::forbidden(rule)),
    }
}

/// A `cipherEnvelope` as the client sends it: the fields the other party
/// needs, checked for presence only (the broker cannot read it).
pub fn check_envelope(envelope: &Value) -> Result<(), Error> {
    let text = |k: &str| envelope[k].as_str().is_some_and(|s| !s.is_empty());
    if !(text("algorithm") && text("ciphertext") && text("nonce") && envelope["recipients"].is_array()) {
        let message = "cipherEnvelope: needs algorithm, ciphertext, nonce and recipients";
        return Err(Error::invalid_body(message).naming("cipherEnvelope"));
    }
    Ok(())
}
