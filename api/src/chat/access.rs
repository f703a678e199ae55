//! Who may do what with a chat session. The spec names the rules for
//! metadata, visibility and invitations (section 5); the rest is decided
//! here, once, for every session route:
//!
//! - **Owner.** A session belongs to the account whose key opened it. A
//!   session opened without a key is anonymous: it stays private, and its
//!   id, which only its opener was given (never listed, never sent to the
//!   agent: see [`relay_id`]), is what controls it. The operator acts for
//!   any owner.
//! - **Responder.** In an encrypted session, the account that registered
//!   the session's agent here is the other party: it submits the
//!   responder's handshake key, writes its encrypted messages and reads
//!   the history. (An agent not registered here has no responder but its
//!   session's owner.)
//! - **Writing** (a message, ending, compaction): the owner; in an
//!   encrypted session, the responder's messages too. Visibility and
//!   invitations: a member the caller owns (`members::acting_for`), as
//!   the spec says; an anonymous session cannot be made public.
//! - **Reading** a private session's history or encryption: its owner, its
//!   responder, or the owner of a member named by `senderUaid` (within
//!   that member's history scope). A public session is readable by
//!   anyone, and writable only as above.

use sha2::Digest as _;
use warp::http::StatusCode;

use crate::reply::Error;
use crate::request::Request;
use crate::store::{chat as stored, registry};

/// The caller's part in a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Party {
    Owner,
    /// The registrant of an encrypted session's agent.
    Responder,
}

/// The caller's part in `session`, or `None`.
pub async fn party(request: &Request, session: &stored::Session) -> Result<Option<Party>, Error> {
    let principal = request.principal.as_ref();
    let Some(owner) = &session.account else { return Ok(Some(Party::Owner)) };
    let Some(principal) = principal else { return Ok(None) };
    if principal.operator || principal.account.as_ref() == Some(owner) {
        return Ok(Some(Party::Owner));
    }
    match (&principal.account, session.encryption.is_some() && !session.uaid.is_empty()) {
        (Some(account), true) => {
            Ok(registrant(request, &session.uaid).await?.filter(|r| r == account).map(|_| Party::Responder))
        }
        _ => Ok(None),
    }
}

/// The account that registered `uaid` here, if one did (and has not
/// deleted it).
pub async fn registrant(request: &Request, uaid: &str) -> Result<Option<String>, Error> {
    let key = uaid.to_string();
    Ok(request.app.store.read(move |conn| registry::registrant(conn, &key)).await?)
}

/// The refusal of a caller with no part: 401 without a key, else 403.
pub fn refusal(request: &Request) -> Error {
    match request.principal {
        None => crate::auth::sign_in_required(),
        Some(_) => Error::forbidden("this chat session belongs to another account"),
    }
}

/// The caller's part, or the refusal.
pub async fn require(request: &Request, session: &stored::Session) -> Result<Party, Error> {
    party(request, session).await?.ok_or_else(|| refusal(request))
}

/// The owner only (ending, compaction, a plaintext session's messages).
pub async fn require_owner(request: &Request, session: &stored::Session) -> Result<(), Error> {
    match require(request, session).await? {
        Party::Owner => Ok(()),
        Party::Responder => Err(Error::forbidden("only the session's owner may do this")),
    }
}

/// How much of a session's history the caller may read: from when (ms).
/// A member named by `senderUaid` reads within its history scope (a
/// private session's member must be the caller's own).
pub async fn readable_since(request: &Request, session: &stored::Session) -> Result<i64, Error> {
    let public = session.visibility == "public";
    let Some(sender) = request.query_value("senderUaid")? else {
        return match public || party(request, session).await?.is_some() {
            true => Ok(i64::MIN),
            false => Err(refusal(request)),
        };
    };
    let key = session.id.clone();
    let members = request.app.store.read(move |conn| stored::members(conn, &key)).await?;
    if !public {
        super::members::acting_for(request, session, &members, &sender).await?;
    }
    match members.iter().find(|m| m.uaid == sender) {
        Some(m) if m.history_scope == "since_invite" => Ok(m.invited_at),
        Some(_) => Ok(i64::MIN),
        None => Err(Error::forbidden("senderUaid is not a member of the session")),
    }
}

/// The id an agent is given for a session: stable for the session, and
/// not the id that controls it (a plain agent sees it in every call).
pub fn relay_id(session: &str) -> String {
    let digest = sha2::Sha256::digest(format!("almanac chat relay id\0{session}").as_bytes());
    format!("conv_{}", shared::http::hex(&digest[..16]))
}

/// 409 for an idempotency key used before with another body.
pub fn reused_key() -> Error {
    let message = "idempotencyKey: used before in this session with another message";
    Error::new(StatusCode::CONFLICT, "idempotency_key_reused", message).naming("idempotencyKey")
}
