//! Who may do what with a chat session, decided here, once, for every
//! session route (spec section 5 and section 3's rule 5):
//!
//! - **Owner.** A session belongs to the account whose key opened it; the
//!   operator acts for any owner. A session opened without a key is
//!   anonymous: it stays private, and its id, which only its opener was
//!   given (never listed, never sent to the agent: see [`relay_id`]), is
//!   what controls it.
//! - **Member.** A UAID in the session: its agent, the `senderUaid` it was
//!   opened with, and those invited. A member is held by the account that
//!   held its UAID when it joined (`held_by`: the owner for its
//!   `senderUaid`, the registrant for an agent registered here), and only
//!   that account acts for it, by naming it as `senderUaid`. A later
//!   registration of the same UAID by another account takes over nothing.
//! - **Responder.** In an encrypted session, the holder of the agent's
//!   member: the other party of the handshake.
//!
//! | what | owner | member's holder (as `senderUaid`) | responder | anyone |
//! | --- | --- | --- | --- | --- |
//! | send a message | yes | no | encrypted only | no |
//! | end, compact | yes | no | no | no |
//! | make public, invite, re-scope | yes, naming a member it holds | no | no | no |
//! | make private | yes | no | no | no |
//! | read history, encryption | yes | within its scope | yes | public: yes |
//! | read metadata | yes | yes | yes | public: yes |
//!
//! An ended session is the owner's alone: it is no longer listed, and
//! reading it otherwise is 404 `session_ended`.

use sha2::Digest as _;
use warp::http::StatusCode;

use crate::reply::Error;
use crate::request::Request;
use crate::store::chat as stored;

/// The caller's part in a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Party {
    Owner,
    /// The holder of an encrypted session's agent.
    Responder,
}

/// Whether the caller owns `session` (its opener's account, the operator,
/// or anyone holding an anonymous session's id). Reads nothing.
pub fn owns(request: &Request, session: &stored::Session) -> bool {
    let Some(owner) = &session.account else { return true };
    request.principal.as_ref().is_some_and(|p| p.operator || p.account.as_ref() == Some(owner))
}

/// The caller's part in `session`, or `None`.
pub async fn party(request: &Request, session: &stored::Session) -> Result<Option<Party>, Error> {
    if owns(request, session) {
        return Ok(Some(Party::Owner));
    }
    let Some(principal) = request.principal.as_ref() else { return Ok(None) };
    match (&principal.account, session.encryption.is_some()) {
        (Some(account), true) => {
            let holder = responder(request, session).await?;
            Ok(holder.filter(|h| h == account).map(|_| Party::Responder))
        }
        _ => Ok(None),
    }
}

/// The account that holds an encrypted session's agent (the responder),
/// if one does.
pub async fn responder(request: &Request, session: &stored::Session) -> Result<Option<String>, Error> {
    if session.uaid.is_empty() {
        return Ok(None);
    }
    let members = members(request, session).await?;
    Ok(members.into_iter().find(|m| m.uaid == session.uaid).and_then(|m| m.held_by))
}

async fn members(request: &Request, session: &stored::Session) -> Result<Vec<stored::Member>, Error> {
    let key = session.id.clone();
    Ok(request.app.store.read(move |conn| stored::members(conn, &key)).await?)
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

/// The owner only (ending, compaction, visibility, invitations, a
/// plaintext session's messages).
pub async fn require_owner(request: &Request, session: &stored::Session) -> Result<(), Error> {
    if owns(request, session) {
        return Ok(());
    }
    match party(request, session).await? {
        Some(_) => Err(Error::forbidden("only the session's owner may do this")),
        None => Err(refusal(request)),
    }
}

/// 404 `session_ended` for an ended session, unless the caller owns it.
pub fn unless_ended(request: &Request, session: &stored::Session) -> Result<(), Error> {
    match session.ended_at {
        Some(_) if !owns(request, session) => Err(ended(&session.id)),
        _ => Ok(()),
    }
}

pub fn ended(id: &str) -> Error {
    Error::new(StatusCode::NOT_FOUND, "session_ended", format!("session {id} has ended"))
}

/// 401 without a key; 403 unless `sender` is a member of the session
/// held by the caller's account (the operator holds all).
pub fn acting_for(request: &Request, members: &[stored::Member], sender: &str) -> Result<(), Error> {
    let principal = request.principal.as_ref().ok_or_else(crate::auth::sign_in_required)?;
    if principal.operator {
        return Ok(());
    }
    let Some(member) = members.iter().find(|m| m.uaid == sender) else {
        return Err(Error::forbidden("senderUaid is not a member of the session"));
    };
    match (&member.held_by, &principal.account) {
        (Some(holder), Some(account)) if holder == account => Ok(()),
        _ => Err(Error::forbidden("senderUaid is not a member held by the signed-in account")),
    }
}

/// How much of a session's history the caller may read: from when (ms).
/// A member named by `senderUaid` reads within its history scope (a
/// private session's member must be the caller's own); the owner and the
/// responder read it all, and so does anyone while it is public.
pub async fn readable_since(request: &Request, session: &stored::Session) -> Result<i64, Error> {
    unless_ended(request, session)?;
    let public = session.visibility == "public";
    let Some(sender) = request.query_value("senderUaid")? else {
        return match public || party(request, session).await?.is_some() {
            true => Ok(i64::MIN),
            false => Err(refusal(request)),
        };
    };
    let members = members(request, session).await?;
    if !public {
        acting_for(request, &members, &sender)?;
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
