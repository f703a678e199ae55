//! Who is in a session and who may see it (spec section 4, Chat; section
//! 5's access rules, decided in [`super::access`]): session metadata,
//! visibility, invitations with a history scope, and the listing of
//! public sessions.
//!
//! Only the owner (or the operator) changes a session's visibility, its
//! members or their scope. Making it public or inviting names a member
//! the owner holds (`senderUaid`), as the spec's rule 5 asks; making it
//! private needs only the owner, who can always take a session back.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

use super::access;
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::{self, chat as stored};

/// Why an anonymous session is not shared.
const ANONYMOUS: &str = "a session opened without a key stays private to its opener: its id is what controls it";

/// Most public sessions one page lists.
const MAX_PUBLIC: usize = 100;
const DEFAULT_PUBLIC: usize = 20;

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Visibility {
    Private,
    Public,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Scope {
    All,
    SinceInvite,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct VisibilityRequest {
    sender_uaid: String,
    visibility: Visibility,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InviteRequest {
    sender_uaid: String,
    uaid: String,
    history_scope: Option<Scope>,
}

/// The session of the path and its members; 404 when unknown.
async fn load(request: &Request) -> Result<(stored::Session, Vec<stored::Member>), Error> {
    let session = super::held(request, request.params.get("sessionId")).await?;
    let key = session.id.clone();
    let members = request.app.store.read(move |conn| stored::members(conn, &key)).await?;
    Ok((session, members))
}

/// The metadata answer.
fn metadata(session: &stored::Session, members: &[stored::Member]) -> Value {
    let members: Vec<Value> = members
        .iter()
        .map(|m| json!({"uaid": m.uaid, "invitedAt": store::rfc3339(m.invited_at), "historyScope": m.history_scope}))
        .collect();
    let mut answer = json!({
        "sessionId": session.id,
        "visibility": session.visibility,
        "members": members,
        "createdAt": store::rfc3339(session.created_at),
        "updatedAt": store::rfc3339(session.last_activity_at),
        "lastActivityAt": store::rfc3339(session.last_activity_at),
    });
    if let Some(title) = &session.title {
        answer["title"] = json!(title);
    }
    answer
}

/// A UAID field, or 400 naming it.
fn uaid_field(value: &str, field: &'static str) -> Result<String, Error> {
    let value = value.trim();
    value
        .parse::<shared::uaid::Uaid>()
        .map_err(|_| Error::invalid_body(format!("{field}: not a UAID")).naming(field))?;
    Ok(value.to_string())
}

/// `GET /api/v1/chat/session/{sessionId}/meta[?senderUaid]`: a public
/// session's for anyone; a private one's for its owner, or the holder of
/// the member `senderUaid` names.
pub async fn meta(request: Request) -> Answer {
    let (session, members) = load(&request).await?;
    access::unless_ended(&request, &session)?;
    if session.visibility != "public" && !access::owns(&request, &session) {
        let Some(sender) = request.query_value("senderUaid")? else {
            let message = "senderUaid: a private session's metadata needs the member asking";
            return Err(Error::parameter("senderUaid", message));
        };
        access::acting_for(&request, &members, &sender)?;
    }
    Ok(reply::json(&metadata(&session, &members)))
}

/// `PATCH /api/v1/chat/session/{sessionId}`: public or private, by the
/// owner only.
pub async fn visibility(request: Request) -> Answer {
    let body: VisibilityRequest = parse_body(&request.body)?;
    let sender = uaid_field(&body.sender_uaid, "senderUaid")?;
    let (session, members) = load(&request).await?;
    access::require_owner(&request, &session).await?;
    let visibility = match body.visibility {
        Visibility::Private => "private",
        Visibility::Public if session.account.is_none() => return Err(Error::forbidden(ANONYMOUS)),
        Visibility::Public if session.ended_at.is_some() => return Err(access::ended(&session.id)),
        Visibility::Public => {
            access::acting_for(&request, &members, &sender)?;
            "public"
        }
    };
    let id = session.id.clone();
    request.app.store.write(move |conn| stored::set_visibility(conn, &id, visibility, store::now_ms())).await?;
    let (session, members) = load(&request).await?;
    Ok(reply::json(&metadata(&session, &members)))
}

/// `POST /api/v1/chat/session/{sessionId}/invite`: the owner adds a
/// member, who sees all the history or only what follows the invite, or
/// changes a member's scope.
pub async fn invite(request: Request) -> Answer {
    let body: InviteRequest = parse_body(&request.body)?;
    let sender = uaid_field(&body.sender_uaid, "senderUaid")?;
    let invitee = uaid_field(&body.uaid, "uaid")?;
    let (session, members) = load(&request).await?;
    access::require_owner(&request, &session).await?;
    if session.account.is_none() {
        return Err(Error::forbidden(ANONYMOUS));
    }
    access::acting_for(&request, &members, &sender)?;
    if session.ended_at.is_some() {
        return Err(access::ended(&session.id));
    }
    let scope = match body.history_scope.unwrap_or(Scope::All) {
        Scope::All => "all",
        Scope::SinceInvite => "since_invite",
    };
    let (id, now) = (session.id.clone(), store::now_ms());
    request.app.store.write(move |conn| stored::invite(conn, &id, &invitee, scope, now)).await?;
    let (session, members) = load(&request).await?;
    Ok(reply::json(&metadata(&session, &members)))
}

/// A cursor: the last session's activity time and id, opaque.
fn cursor_of(session: &stored::Session) -> String {
    let raw = format!("{}:{}", session.last_activity_at, session.id);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn read_cursor(text: &str) -> Option<(i64, String)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok()?;
    let raw = String::from_utf8(raw).ok()?;
    let (at, id) = raw.split_once(':')?;
    Some((at.parse().ok()?, id.to_string()))
}

/// `GET /api/v1/chat/public?limit&cursor&q`.
pub async fn public(request: Request) -> Answer {
    let limit = match request.query_value("limit")? {
        Some(raw) => shared::http::number("limit", &raw, 1, MAX_PUBLIC)?,
        None => DEFAULT_PUBLIC,
    };
    let after = match request.query_value("cursor")? {
        Some(raw) => {
            Some(read_cursor(&raw).ok_or_else(|| Error::parameter("cursor", "cursor: not one this api gave"))?)
        }
        None => None,
    };
    let q = request.query_value("q")?.map(|q| q.trim().to_string()).filter(|q| !q.is_empty());
    let page = request.app.store.read(move |conn| stored::public(conn, q.as_deref(), after, limit + 1)).await?;
    let more = page.len() > limit;
    let shown = &page[..page.len().min(limit)];
    let sessions: Vec<Value> = shown
        .iter()
        .map(|(s, uaids)| {
            let mut summary = json!({"sessionId": s.id, "createdAt": store::rfc3339(s.created_at),
                "lastActivityAt": store::rfc3339(s.last_activity_at), "memberUaids": uaids});
            if let Some(title) = &s.title {
                summary["title"] = json!(title);
            }
            summary
        })
        .collect();
    let mut answer = json!({"sessions": sessions});
    if let (true, Some((last, _))) = (more, shown.last()) {
        answer["nextCursor"] = json!(cursor_of(last));
    }
    Ok(reply::json(&answer))
}
