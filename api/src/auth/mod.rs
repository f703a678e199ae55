//! Who is asking (spec section 5): ledger sign-in (challenge, verify), the
//! API keys it issues, the operator key, and the principal a request acts
//! as.
//!
//! A key travels in `x-api-key`, the legacy `x-ledger-api-key`, or
//! `Authorization` (`Bearer <key>` or the bare key), read in that order:
//! the first one present is the one checked (a client may send a default
//! `x-ledger-api-key` beside a newer `x-api-key`). Only the SHA-256 of an
//! issued key is stored.
//!
//! `x-account-id` names the account a request bills and owns as. It may
//! only name the principal's own account (the operator's may name any);
//! otherwise 403.

pub mod ledger;
pub mod login;
pub mod signature;
pub mod signin;

use std::time::Duration;

use sha2::{Digest, Sha256};
use warp::http::{HeaderMap, StatusCode};

use crate::reply::Error;
use crate::store::{self, auth as keys, Store};
use ledger::{KeySource, Network};

/// Sign-in settings.
pub struct Settings {
    /// The Hedera network this deployment's key source serves.
    pub network: Network,
    pub keys: KeySource,
    /// How long a challenge may be answered.
    pub challenge_ttl: Duration,
    /// Longest (and default) lifetime of an issued key, in minutes.
    pub key_max_minutes: u64,
    /// SHA-256 of the operator key, when one is configured.
    pub operator: Option<[u8; 32]>,
    /// Keys found recently, so that a request need not ask the store.
    pub cache: KeyCache,
}

/// Issued keys found in the store, by hash, each for at most `ttl`: a key
/// revoked in the store (by another replica, say) stops working within
/// it, and an expired key at once. Unknown keys are not kept, so random
/// keys cannot fill it.
pub struct KeyCache {
    keys: quick_cache::sync::Cache<[u8; 32], std::sync::Arc<Cached>>,
    ttl_ms: i64,
}

struct Cached {
    principal: Principal,
    id: String,
    /// Until when the entry may be used (the key's expiry, or the TTL).
    until: i64,
    /// When its use was last recorded in the store.
    touched: std::sync::atomic::AtomicI64,
}

impl KeyCache {
    /// At most `entries` keys, each kept for `ttl` (zero keeps none).
    pub fn new(entries: usize, ttl: Duration) -> KeyCache {
        KeyCache { keys: quick_cache::sync::Cache::new(entries.max(1)), ttl_ms: ttl.as_millis() as i64 }
    }
}

/// Who may call an operation (spec section 5), as the route table names
/// it: the pipeline reads the key ([`resolve`]) for every kind but
/// `Public`, before the body, and [`admit`] answers 401 or 403.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// Anyone; no key is read.
    Public,
    /// Anyone; a key, when sent, must be valid and names the principal.
    Optional,
    /// A valid API key (or the operator's).
    Key,
    /// The operator key.
    Operator,
}

/// Who a request acts as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The signed-in ledger account (the operator has none).
    pub account: Option<String>,
    /// Holds the operator key.
    pub operator: bool,
    /// The network the account signed in on, canonical (`hedera:testnet`,
    /// `eip155:1`); empty for the operator.
    pub network: String,
}

impl Principal {
    /// The account the request bills and owns as: `x-account-id` when the
    /// principal controls it (403 otherwise), else its own. 400 when the
    /// operator names none.
    pub fn billing(&self, headers: &HeaderMap) -> Result<String, Error> {
        let named = header(headers, "x-account-id").map(str::to_string);
        match (named, &self.account) {
            (Some(named), _) if self.operator => Ok(named),
            (Some(named), Some(own)) if named == *own => Ok(named),
            (Some(_), _) => Err(Error::forbidden("x-account-id names an account this API key does not control")),
            (None, Some(own)) => Ok(own.clone()),
            (None, None) => Err(Error::new(
                StatusCode::BAD_REQUEST,
                "account_id_required",
                "name the account to act as in x-account-id",
            )),
        }
    }
}

/// 401 for an operation that needs a key and got none.
pub fn sign_in_required() -> Error {
    Error::unauthorized("auth_required", "sign in first: send an API key in x-api-key")
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty())
}

/// The key a request presents, if any: the same key in however many of
/// `x-api-key`, `x-ledger-api-key` and `Authorization` (bearer) carry one;
/// 400 when they carry different keys (which would the request act as?).
fn presented(headers: &HeaderMap) -> Result<Option<&str>, Error> {
    let values = |name| headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::trim);
    let bearer = values("authorization").filter_map(|value| match value.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => Some(rest.trim()),
        Some(_) => None,
        None => Some(value),
    });
    let mut keys = values("x-api-key").chain(values("x-ledger-api-key")).chain(bearer).filter(|k| !k.is_empty());
    let first = keys.next();
    if keys.any(|other| Some(other) != first) {
        let message = "x-api-key, x-ledger-api-key and Authorization name different keys: send one";
        return Err(Error::new(StatusCode::BAD_REQUEST, "conflicting_keys", message));
    }
    Ok(first)
}

/// `x-account-id` as a request states it: at most once, printable ASCII
/// (400 otherwise), and an account the principal controls (403): checked
/// on every operation that reads keys, so no route ignores it.
pub fn account_header(headers: &HeaderMap, principal: Option<&Principal>) -> Result<(), Error> {
    let mut values = headers.get_all("x-account-id").iter();
    let Some(value) = values.next() else { return Ok(()) };
    let malformed = |message: &str| Error::parameter("x-account-id", message.to_string());
    if values.next().is_some() {
        return Err(malformed("x-account-id: sent more than once"));
    }
    let named = value.to_str().ok().map(str::trim).filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_graphic()));
    let named = named.ok_or_else(|| malformed("x-account-id: expected an account id in ASCII"))?;
    match principal {
        Some(p) if !p.operator && p.account.as_deref() != Some(named) => {
            Err(Error::forbidden("x-account-id names an account this API key does not control"))
        }
        _ => Ok(()),
    }
}

pub(crate) fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// The principal a request's key names: `None` without a key; 401 for a
/// key that is unknown, revoked or expired.
pub async fn resolve(settings: &Settings, store: &Store, headers: &HeaderMap) -> Result<Option<Principal>, Error> {
    let Some(key) = presented(headers)? else { return Ok(None) };
    let hash = digest(key);
    if settings.operator.is_some_and(|operator| constant_eq(&operator, &hash)) {
        return Ok(Some(Principal { account: None, operator: true, network: String::new() }));
    }
    let now = store::now_ms();
    let cache = &settings.cache;
    let cached = match cache.keys.get(&hash).filter(|c| now < c.until) {
        Some(cached) => cached,
        None => {
            let reader = store.clone();
            let found = reader.read(move |conn| keys::find_key(conn, &hash, now)).await?;
            let found = found
                .ok_or_else(|| Error::unauthorized("invalid_api_key", "the API key is unknown, revoked or expired"))?;
            let principal =
                Principal { account: Some(found.account), operator: false, network: found.network_canonical };
            let until = found.expires_at.min(now + cache.ttl_ms);
            let touched = std::sync::atomic::AtomicI64::new(found.last_used_at.unwrap_or(i64::MIN / 2));
            let cached = std::sync::Arc::new(Cached { principal, id: found.id, until, touched });
            if cache.ttl_ms > 0 {
                cache.keys.insert(hash, cached.clone());
            }
            cached
        }
    };
    // Recorded at most once a minute per key, off the request's path.
    let last = cached.touched.load(std::sync::atomic::Ordering::Relaxed);
    if now - last > 60_000
        && cached
            .touched
            .compare_exchange(last, now, std::sync::atomic::Ordering::Relaxed, std::sync::atomic::Ordering::Relaxed)
            .is_ok()
    {
        let (store, id) = (store.clone(), cached.id.clone());
        tokio::spawn(async move { store.write(move |conn| keys::touch_key(conn, &id, now)).await });
    }
    Ok(Some(cached.principal.clone()))
}

/// What an operation's [`Auth`] asks of its principal: 401 without one
/// where one is needed, 403 for a non-operator on an operator's route.
pub fn admit(auth: Auth, principal: Option<&Principal>) -> Result<(), Error> {
    match (auth, principal) {
        (Auth::Public | Auth::Optional, _) => Ok(()),
        (Auth::Key | Auth::Operator, None) => Err(sign_in_required()),
        (Auth::Key, Some(_)) => Ok(()),
        (Auth::Operator, Some(p)) if p.operator => Ok(()),
        (Auth::Operator, Some(_)) => Err(Error::forbidden("only the operator may do this")),
    }
}

fn constant_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use warp::http::HeaderValue;

    fn check(headers: &[(&'static str, &'static str)], expected: Option<&str>) {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(*name, HeaderValue::from_static(value));
        }
        assert_eq!(presented(&map).map_err(|e| e.code), Ok(expected), "{headers:?}");
    }

    /// Each case: key headers naming different keys.
    #[test]
    fn two_different_keys_are_refused() {
        for headers in [
            &[("x-api-key", "a"), ("x-ledger-api-key", "b")][..],
            &[("x-api-key", "a"), ("x-api-key", "b")],
            &[("x-api-key", "a"), ("authorization", "Bearer b")],
        ] {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                map.append(*name, HeaderValue::from_static(value));
            }
            assert_eq!(presented(&map).map_err(|e| e.code), Err("conflicting_keys"), "{headers:?}");
        }
    }

    /// Each case: the `x-account-id` headers sent, who asks, and the status.
    #[test]
    fn x_account_id_is_checked_once_wherever_keys_are_read() {
        let user = Principal { account: Some("0.0.1001".into()), operator: false, network: "hedera:testnet".into() };
        let operator = Principal { account: None, operator: true, network: String::new() };
        type Case<'a> = (&'a [&'a [u8]], Option<&'a Principal>, Result<(), u16>);
        let cases: &[Case] = &[
            (&[], Some(&user), Ok(())),
            (&[&b"0.0.1001"[..]], Some(&user), Ok(())),
            (&[&b"0.0.1002"[..]], Some(&user), Err(403)),
            (&[&b"0.0.1002"[..]], Some(&operator), Ok(())),
            (&[&b"0.0.1002"[..]], None, Ok(())),
            (&[&b"0.0.1001"[..], &b"0.0.1001"[..]], Some(&user), Err(400)),
            (&[&b"0.0.1001"[..], &b"0.0.1002"[..]], Some(&user), Err(400)),
            (&[&b"0.0.\xc3\xa91001"[..]], Some(&user), Err(400)),
            (&[&b"\xff\xfe"[..]], Some(&user), Err(400)),
            (&[&b" "[..]], Some(&user), Err(400)),
        ];
        for (values, principal, expected) in cases {
            let mut map = HeaderMap::new();
            for value in *values {
                map.append("x-account-id", HeaderValue::from_bytes(value).unwrap());
            }
            let got = account_header(&map, *principal).map_err(|e| e.status.as_u16());
            assert_eq!(got, *expected, "{values:?} {principal:?}");
        }
    }

    #[test]
    fn the_key_is_read_from_whichever_header_carries_it() {
        check(&[], None);
        check(&[("x-api-key", "a")], Some("a"));
        check(&[("x-ledger-api-key", "b")], Some("b"));
        check(&[("x-ledger-api-key", "a"), ("x-api-key", "a")], Some("a"));
        check(&[("x-api-key", "a"), ("authorization", "Bearer a")], Some("a"));
        check(&[("authorization", "Bearer c")], Some("c"));
        check(&[("authorization", "bearer  c ")], Some("c"));
        check(&[("authorization", "c")], Some("c"));
        check(&[("authorization", "Basic Zm9vOmJhcg==")], None);
        check(&[("x-api-key", " "), ("authorization", "Bearer c")], Some("c"));
    }

    fn billing(principal: &Principal, header: Option<&'static str>) -> Result<String, u16> {
        let mut map = HeaderMap::new();
        if let Some(value) = header {
            map.insert("x-account-id", HeaderValue::from_static(value));
        }
        principal.billing(&map).map_err(|e| e.status.as_u16())
    }

    #[test]
    fn x_account_id_names_only_an_account_the_principal_controls() {
        let user = Principal { account: Some("0.0.1001".into()), operator: false, network: "hedera:testnet".into() };
        let operator = Principal { account: None, operator: true, network: String::new() };
        assert_eq!(billing(&user, None), Ok("0.0.1001".into()));
        assert_eq!(billing(&user, Some("0.0.1001")), Ok("0.0.1001".into()));
        assert_eq!(billing(&user, Some("0.0.1002")), Err(403));
        assert_eq!(billing(&operator, Some("0.0.1002")), Ok("0.0.1002".into()));
        assert_eq!(billing(&operator, None), Err(400));
    }
}
