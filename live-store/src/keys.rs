//! Encryption keys: one long-term public key per subject (an agent or a
//! ledger account) and key type. Registering the held key again changes
//! nothing, so a client that registers on every start is harmless; a
//! different key replaces it under the same id (rotation).

use crate::params;
use crate::sql::{Conn, Optional, Row};

use super::Failure;

/// A key as stored and answered.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    pub id: String,
    pub key_type: String,
    pub public_key: String,
    pub uaid: Option<String>,
    pub ledger_account_id: Option<String>,
    pub ledger_network: Option<String>,
    pub email: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A key to register for `subject` (`uaid:<uaid>` or `account:<id>`), by
/// the signed-in `account`.
pub struct Registration {
    pub subject: String,
    pub account: String,
    pub key: Key,
}

const COLUMNS: &str =
    "id, key_type, public_key, uaid, ledger_account_id, ledger_network, email, created_at, updated_at";

fn read(r: &Row<'_>) -> Result<Key, Failure> {
    Ok(Key {
        id: r.get(0)?,
        key_type: r.get(1)?,
        public_key: r.get(2)?,
        uaid: r.get(3)?,
        ledger_account_id: r.get(4)?,
        ledger_network: r.get(5)?,
        email: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

/// Stores the key (its `id`, `created_at` and `updated_at` are set here)
/// and returns it as held now.
pub fn register(conn: &Conn, registration: &Registration, now: i64) -> Result<Key, Failure> {
    let Registration { subject, account, key } = registration;
    let held = conn
        .query_row(
            &format!("SELECT {COLUMNS} FROM encryption_keys WHERE subject = ?1 AND key_type = ?2"),
            params![subject, key.key_type],
            read,
        )
        .optional()?;
    match held {
        Some(held) if held.public_key == key.public_key && (key.email.is_none() || held.email == key.email) => Ok(held),
        Some(held) => {
            let email = key.email.clone().or(held.email.clone());
            conn.execute(
                "UPDATE encryption_keys SET public_key = ?2, email = ?3, account_id = ?4, updated_at = ?5 WHERE id = ?1",
                params![held.id, key.public_key, email, account, now],
            )?;
            Ok(Key { public_key: key.public_key.clone(), email, updated_at: now, ..held })
        }
        None => {
            let id = format!("ek_{}", shared::http::hex(&super::random::<12>()));
            conn.execute(
                "INSERT INTO encryption_keys (id, subject, key_type, public_key, uaid, ledger_account_id,
                     ledger_network, email, account_id, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)",
                params![
                    id,
                    subject,
                    key.key_type,
                    key.public_key,
                    key.uaid,
                    key.ledger_account_id,
                    key.ledger_network,
                    key.email,
                    account,
                    now
                ],
            )?;
            Ok(Key { id, created_at: now, updated_at: now, ..key.clone() })
        }
    }
}

/// The subject's secp256k1 key, if one is registered (`uaid:<uaid>` or
/// `account:<id>`).
pub fn of_subject(conn: &Conn, subject: &str) -> Result<Option<Key>, Failure> {
    let sql = format!("SELECT {COLUMNS} FROM encryption_keys WHERE subject = ?1 AND key_type = 'secp256k1'");
    conn.query_row(&sql, [subject], read).optional()
}
