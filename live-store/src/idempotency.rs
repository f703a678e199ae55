//! Idempotency keys and the requests they were used with, per account and
//! route (`scope`). A route's write calls [`judge`] first and [`record`]
//! once it has done what was asked, in the same transaction, so two
//! requests racing with one key cannot both act: the second finds the
//! first's digest.
//!
//! Chat keeps its keys per session (`store::chat::sent`): an anonymous
//! session has no account.

use crate::params;
use crate::sql::{Conn, Optional};

use super::Failure;

/// A request's key, as a route's write is given it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    pub account: String,
    /// The route (`inscription`, `skill-publish`, `registration`, …).
    pub scope: &'static str,
    pub key: String,
    /// SHA-256 of the request, hex.
    pub digest: String,
}

/// What a key names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claimed {
    /// Not used before.
    New,
    /// Used before with this same request: a retry.
    Retry,
    /// Used before with another request: refused, nothing recorded.
    Reused,
}

/// The digest the key was first used with, if it was.
pub fn digest(conn: &Conn, key: &Key) -> Result<Option<String>, Failure> {
    conn.query_row(
        "SELECT request_digest FROM idempotency_keys WHERE account_id = ?1 AND scope = ?2 AND key = ?3",
        params![key.account, key.scope, key.key],
        |r| r.get(0),
    )
    .optional()
}

/// What `key` names now. O(1): one indexed read.
pub fn judge(conn: &Conn, key: &Key) -> Result<Claimed, Failure> {
    Ok(match digest(conn, key)? {
        None => Claimed::New,
        Some(held) if held == key.digest => Claimed::Retry,
        Some(_) => Claimed::Reused,
    })
}

/// Records `key` with its request, in the write that did what the request
/// asked (so a refused request leaves the key unused). A key recorded
/// before is left as it was.
pub fn record(conn: &Conn, key: &Key, now: i64) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO idempotency_keys (account_id, scope, key, request_digest, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
        params![key.account, key.scope, key.key, key.digest, now],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_one_request_per_account_and_scope() {
        for engine in crate::testing::ENGINES {
            let (_scratch, conn) = crate::testing::migrated(engine);
            let key = |account: &str, scope: &'static str, digest: &str| Key {
                account: account.into(),
                scope,
                key: "k-1".into(),
                digest: digest.into(),
            };
            let cases = [
                (key("0.0.1", "inscription", "aa"), Claimed::New),
                (key("0.0.1", "inscription", "aa"), Claimed::Retry),
                (key("0.0.1", "inscription", "bb"), Claimed::Reused),
                (key("0.0.2", "inscription", "bb"), Claimed::New),
                (key("0.0.1", "skill-publish", "bb"), Claimed::New),
                (key("0.0.1", "inscription", "aa"), Claimed::Retry),
            ];
            for (i, (key, expected)) in cases.into_iter().enumerate() {
                assert_eq!(judge(&conn, &key).unwrap(), expected, "case {i}: {key:?}");
                record(&conn, &key, 1).unwrap();
            }
        }
    }
}
