//! Sign-in challenges and API keys.

use crate::params;
use crate::sql::{Conn, Optional};

use super::Failure;

/// A challenge as issued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    pub id: String,
    pub account: String,
    pub network: String,
    pub message: String,
    pub created_at: i64,
    pub expires_at: i64,
}

pub fn insert_challenge(conn: &Conn, c: &Challenge) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO challenges (id, account_id, network, message, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![c.id, c.account, c.network, c.message, c.created_at, c.expires_at],
    )?;
    Ok(())
}

/// Takes the challenge `id` for one verification: it is marked used, so
/// it can never be taken again. `None` when it is unknown or was taken.
pub fn take_challenge(conn: &Conn, id: &str, now: i64) -> Result<Option<Challenge>, Failure> {
    let found = conn
        .query_row(
            "UPDATE challenges SET used_at = ?2 WHERE id = ?1 AND used_at IS NULL
             RETURNING id, account_id, network, message, created_at, expires_at",
            params![id, now],
            |r| {
                Ok(Challenge {
                    id: r.get(0)?,
                    account: r.get(1)?,
                    network: r.get(2)?,
                    message: r.get(3)?,
                    created_at: r.get(4)?,
                    expires_at: r.get(5)?,
                })
            },
        )
        .optional()?;
    Ok(found)
}

/// Drops challenges that expired before `before`; returns how many.
pub fn prune_challenges(conn: &Conn, before: i64) -> Result<usize, Failure> {
    conn.execute("DELETE FROM challenges WHERE expires_at < ?1", [before])
}

/// An API key's record (the key itself is never stored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKey {
    pub id: String,
    /// SHA-256 of the key.
    pub hash: [u8; 32],
    pub prefix: String,
    pub last_four: String,
    pub label: Option<String>,
    pub account: String,
    pub network: String,
    pub network_canonical: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub last_used_at: Option<i64>,
}

pub fn insert_key(conn: &Conn, k: &ApiKey) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO api_keys (id, hash, prefix, last_four, label, account_id, network, network_canonical,
                               created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            k.id,
            &k.hash[..],
            k.prefix,
            k.last_four,
            k.label,
            k.account,
            k.network,
            k.network_canonical,
            k.created_at,
            k.expires_at
        ],
    )?;
    Ok(())
}

/// The live (unrevoked, unexpired at `now`) key with this hash.
pub fn find_key(conn: &Conn, hash: &[u8; 32], now: i64) -> Result<Option<ApiKey>, Failure> {
    let found = conn
        .query_row(
            "SELECT id, prefix, last_four, label, account_id, network, network_canonical, created_at, expires_at,
                    last_used_at
             FROM api_keys WHERE hash = ?1 AND revoked_at IS NULL AND expires_at > ?2",
            params![&hash[..], now],
            |r| {
                Ok(ApiKey {
                    id: r.get(0)?,
                    hash: *hash,
                    prefix: r.get(1)?,
                    last_four: r.get(2)?,
                    label: r.get(3)?,
                    account: r.get(4)?,
                    network: r.get(5)?,
                    network_canonical: r.get(6)?,
                    created_at: r.get(7)?,
                    expires_at: r.get(8)?,
                    last_used_at: r.get(9)?,
                })
            },
        )
        .optional()?;
    Ok(found)
}

/// Records that the key was used at `now`.
pub fn touch_key(conn: &Conn, id: &str, now: i64) -> Result<(), Failure> {
    conn.execute("UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1", params![id, now])?;
    Ok(())
}
