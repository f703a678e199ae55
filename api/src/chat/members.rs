//! Who is in a session and who may see it (spec section 4, Chat; section
//! 5's access rules): session metadata, visibility, invitations with a
//! history scope, and the listing of public sessions.
//!
//! A sender acts for a member UAID it owns: one its account registered
//! here, or the `senderUaid` the account opened the session with (the
//! operator owns all). A public session's metadata is readable by anyone;
//! a private one's needs `senderUaid`, a key, and that ownership.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};
use warp::http::StatusCode;

use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::{self, chat as stored, registry};

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

/// 401 without a key; 403 unless `sender` is a member the principal owns.
pub(crate) async fn acting_for(
    request: &Request,
    session: &stored::Session,
    members: &[stored::Member],
    sender: &str,
) -> Result<(), Error> {
    let principal = request.principal.as_ref().ok_or_else(crate::auth::sign_in_required)?;
    if principal.operator {
        return Ok(());
    }
    if !members.iter().any(|m| m.uaid == sender) {
        return Err(Error::forbidden("senderUaid is not a member of the session"));
    }
    let account = principal.account.clone().unwrap_or_default();
    if session.account.as_deref() == Some(account.as_str()) && session.sender_uaid.as_deref() == Some(sender) {
        return Ok(());
    }
    let uaid = sender.to_string();
    let registered = request.app.store.read(move |conn| registry::find(conn, &uaid)).await?;
    match registered.filter(|r| r.deleted_at.is_none()) {
        Some(r) if r.account == account => Ok(()),
        _ => Err(Error::forbidden("senderUaid is not an agent of the signed-in account")),
    }
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

/// `GET /api/v1/chat/session/{sessionId}/meta[?senderUaid]`.
pub async fn meta(request: Request) -> Answer {
    let (session, members) = load(&request).await?;
    if session.visibility != "public" {
        let Some(sender) = request.query_value("senderUaid")? else {
            let message = "senderUaid: a private session's metadata needs the member asking";
            return Err(Error::parameter("senderUaid", message));
        };
        acting_for(&request, &session, &members, &sender).await?;
    }
    Ok(reply::json(&metadata(&session, &members)))
}

/// `PATCH /api/v1/chat/session/{sessionId}`: public or private.
pub async fn visibility(request: Request) -> Answer {
    let body: VisibilityRequest = parse_body(&request.body)?;
    let sender = uaid_field(&body.sender_uaid, "senderUaid")?;
    let (session, members) = load(&request).await?;
    acting_for(&request, &session, &members, &sender).await?;
    let visibility = match body.visibility {
        Visibility::Public if session.account.is_none() => return Err(Error::forbidden(ANONYMOUS)),
        Visibility::Public => "public",
        Visibility::Private => "private",
    };
    let id = session.id.clone();
    request.app.store.write(move |conn| stored::set_visibility(conn, &id, visibility, store::now_ms())).await?;
    let (session, members) = load(&request).await?;
    Ok(reply::json(&metadata(&session, &members)))
}

/// `POST /api/v1/chat/session/{sessionId}/invite`: adds a member, who
/// sees all the history or only what follows the invite.
pub async fn invite(request: Request) -> Answer {
    let body: InviteRequest = parse_body(&request.body)?;
    let sender = uaid_field(&body.sender_uaid, "senderUaid")?;
    let invitee = uaid_field(&body.uaid, "uaid")?;
    let (session, members) = load(&request).await?;
    acting_for(&request, &session, &members, &sender).await?;
    if session.account.is_none() {
        return Err(Error::forbidden(ANONYMOUS));
    }
    if session.ended_at.is_some() {
        return Err(Error::new(StatusCode::NOT_FOUND, "session_ended", format!("session {} has ended", session.id)));
    }
    let member = stored::Member {
        uaid: invitee,
        invited_at: store::now_ms(),
        history_scope: match body.history_scope.unwrap_or(Scope::All) {
            Scope::All => "all".into(),
            Scope::SinceInvite => "since_invite".into(),
        },
    };
    let id = session.id.clone();
    request.app.store.write(move |conn| stored::invite(conn, &id, &member)).await?;
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
