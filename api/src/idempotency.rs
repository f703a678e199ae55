//! One rule for every route that takes an idempotency key (a chat send,
//! content inscription, a skill publish, registration and update, a card
//! purchase):
//!
//! - The key is the `Idempotency-Key` header, or the body's
//!   `idempotencyKey` where the route's body has one (both, when they
//!   differ: 400). Surrounding spaces are trimmed; an empty key is none.
//! - A key is at most [`MAX_KEY_BYTES`] bytes of ASCII: a longer one is
//!   400, never ignored, since ignoring it would make a retry a second
//!   request, done and charged twice.
//! - The key is stored with a digest of the request (SHA-256 over the
//!   method, the path and the body's canonical JSON); the same key with
//!   the same request is a retry and answered with what the first made,
//!   with another request 409 `idempotency_key_reused`, nothing done.
//!
//! Keys are the account's per route (`store::idempotency`); a chat send's
//! are its session's, and its digest covers what is relayed (the message
//! and its envelope), not the session's authentication.

use sha2::Digest as _;
use warp::http::{HeaderMap, StatusCode};

use crate::reply::Error;
use crate::request::Request;
use crate::store::idempotency as stored;

/// The longest key taken, in bytes.
pub const MAX_KEY_BYTES: usize = 255;

/// The request's idempotency key, if it names one: the header, or
/// `from_body` (the body's `idempotencyKey`). 400 for a key past
/// [`MAX_KEY_BYTES`], not ASCII, or given twice differently.
pub fn key(headers: &HeaderMap, from_body: Option<&str>) -> Result<Option<String>, Error> {
    let mut headers = headers.get_all("idempotency-key").iter();
    let header = match (headers.next(), headers.next()) {
        (_, Some(_)) => return Err(refused("Idempotency-Key: sent more than once")),
        (None, None) => None,
        (Some(value), None) => {
            let text = value.to_str().map_err(|_| refused("Idempotency-Key: expected ASCII"))?;
            Some(text.trim()).filter(|k| !k.is_empty())
        }
    };
    let body = from_body.map(str::trim).filter(|k| !k.is_empty());
    let key = match (header, body) {
        (Some(a), Some(b)) if a != b => {
            return Err(refused("idempotencyKey: differs from the Idempotency-Key header; send one"))
        }
        (Some(key), _) | (None, Some(key)) => key,
        (None, None) => return Ok(None),
    };
    if key.len() > MAX_KEY_BYTES {
        return Err(refused(&format!("idempotencyKey: at most {MAX_KEY_BYTES} bytes (this one has {})", key.len())));
    }
    if !key.is_ascii() {
        return Err(refused("idempotencyKey: expected ASCII"));
    }
    Ok(Some(key.to_string()))
}

fn refused(message: &str) -> Error {
    Error::new(StatusCode::BAD_REQUEST, "invalid_idempotency_key", message.to_string()).naming("idempotencyKey")
}

/// SHA-256 of `text`, hex.
pub fn digest(text: &str) -> String {
    shared::http::hex(&sha2::Sha256::digest(text.as_bytes()))
}

/// The digest of the request: its method, path and body as canonical JSON
/// (keys sorted, no spaces), so a retry that spells the same body another
/// way is the same request. A body that is not JSON is taken as its bytes.
pub fn digest_of(request: &Request) -> String {
    let body = match serde_json::from_slice::<serde_json::Value>(&request.body) {
        Ok(value) => value.to_string(),
        Err(_) => String::from_utf8_lossy(&request.body).into_owned(),
    };
    digest(&format!("{} {}\n{body}", request.method, request.path))
}

/// 409: the key was used before with another request.
pub fn reused() -> Error {
    let message = "idempotencyKey: used before with another request; a retry sends the same request";
    Error::new(StatusCode::CONFLICT, "idempotency_key_reused", message).naming("idempotencyKey")
}

/// The route's key as the store keeps it (`None` without a key): the
/// `account`'s, in `scope`, with the request's digest.
pub fn for_route(
    request: &Request,
    scope: &'static str,
    account: &str,
    from_body: Option<&str>,
) -> Result<Option<stored::Key>, Error> {
    Ok(key(&request.headers, from_body)?.map(|key| stored::Key {
        account: account.to_string(),
        scope,
        key,
        digest: digest_of(request),
    }))
}

/// Before a route does its work: 409 when the key names another request.
/// The route's write judges the key again ([`stored::judge`]), which
/// settles two requests that race past this check.
pub async fn check(request: &Request, key: Option<&stored::Key>) -> Result<(), Error> {
    let Some(key) = key.cloned() else { return Ok(()) };
    let digest = key.digest.clone();
    match request.app.store.read(move |conn| stored::digest(conn, &key)).await? {
        Some(held) if held != digest => Err(reused()),
        _ => Ok(()),
    }
}
