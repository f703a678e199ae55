//! `POST /api/v1/encryption/keys`: a long-term public key for encrypted
//! chat, registered for an agent the signed-in account registered here, or
//! for the signed-in account itself (spec section 5, rule 3).
//!
//! The key is validated and normalised: secp256k1 as its 33-byte
//! compressed point, ed25519 and x25519 as their 32 bytes, all lower-case
//! hex; raw hex (with or without `0x`) and Hedera's DER hex are read. The
//! reference client registers its agent's key on every start, so the same
//! key again answers the stored record unchanged (201 each time).

use serde::Deserialize;
use serde_json::{json, Value};
use warp::http::StatusCode;

use crate::auth::signature::PublicKey;
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::keys::{self, Key, Registration};
use crate::store::{self, registry};

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
enum KeyType {
    Secp256k1,
    Ed25519,
    X25519,
}

impl KeyType {
    fn as_str(self) -> &'static str {
        match self {
            KeyType::Secp256k1 => "secp256k1",
            KeyType::Ed25519 => "ed25519",
            KeyType::X25519 => "x25519",
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KeyRequest {
    key_type: KeyType,
    public_key: String,
    uaid: Option<String>,
    ledger_account_id: Option<String>,
    ledger_network: Option<String>,
    email: Option<String>,
}

/// The DER prefix (SubjectPublicKeyInfo) of an X25519 key.
const X25519_DER: &str = "302a300506032b656e032100";

/// `text` as the normalised public key of `kind`, or why it is not one.
fn normalise(kind: KeyType, text: &str) -> Result<String, &'static str> {
    let text = text.trim();
    let bare = text.strip_prefix("0x").unwrap_or(text).to_ascii_lowercase();
    if bare.is_empty() || !bare.bytes().all(|b| b.is_ascii_hexdigit()) || bare.len() % 2 == 1 {
        return Err("must be a key in hex");
    }
    let is_der = bare.starts_with("30");
    match kind {
        KeyType::Secp256k1 => {
            let key = match is_der {
                true => PublicKey::from_der_hex(&bare),
                false => PublicKey::from_raw("ECDSA_SECP256K1", &bare),
            };
            match key {
                Ok(PublicKey::Secp256k1(key)) => Ok(shared::http::hex(key.to_encoded_point(true).as_bytes())),
                _ => Err("must be a secp256k1 point: 33 bytes compressed, 65 uncompressed, or DER"),
            }
        }
        KeyType::Ed25519 => {
            let key = match is_der {
                true => PublicKey::from_der_hex(&bare),
                false => PublicKey::from_raw("ED25519", &bare),
            };
            match key {
                Ok(PublicKey::Ed25519(key)) => Ok(shared::http::hex(key.as_bytes())),
                _ => Err("must be an ed25519 point: 32 bytes, or DER"),
            }
        }
        KeyType::X25519 => {
            let raw = bare.strip_prefix(X25519_DER).unwrap_or(&bare);
            match raw.len() {
                64 => Ok(raw.to_string()),
                _ => Err("must be 32 bytes, or DER"),
            }
        }
    }
}

/// A plausible address: one `@`, a dot in the domain, no spaces.
fn email(text: &str) -> bool {
    let Some((local, domain)) = text.split_once('@') else { return false };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !text.contains(char::is_whitespace)
        && !domain.contains('@')
        && text.len() <= 254
}

fn answer(key: &Key) -> Value {
    json!({
        "id": key.id,
        "keyType": key.key_type,
        "publicKey": key.public_key,
        "uaid": key.uaid,
        "ledgerAccountId": key.ledger_account_id,
        "ledgerNetwork": key.ledger_network,
        "userId": Value::Null,
        "email": key.email,
        "createdAt": store::rfc3339(key.created_at),
        "updatedAt": store::rfc3339(key.updated_at),
    })
}

/// `POST /encryption/keys` (signed in): 201 with the key as held.
pub async fn register(request: Request) -> Answer {
    let principal = request.principal()?.clone();
    let body: KeyRequest = parse_body(&request.body)?;
    let public_key = normalise(body.key_type, &body.public_key)
        .map_err(|rule| Error::invalid_body(format!("publicKey: {rule}")).naming("publicKey"))?;
    if let Some(address) = body.email.as_deref().filter(|e| !email(e)) {
        let message = format!("email: {:?} is not an email address", crate::reply::excerpt(address));
        return Err(Error::invalid_body(message).naming("email"));
    }
    let own = principal.billing(&request.headers)?;
    let network = crate::auth::ledger::Network::parse(&principal.network).map(|n| n.wire());
    let (subject, uaid, account, ledger_network) = match (&body.uaid, &body.ledger_account_id) {
        (Some(uaid), _) => {
            // An agent's key: the agent must be one this account registered.
            let uaid = uaid.trim().to_string();
            if uaid.parse::<shared::uaid::Uaid>().is_err() {
                return Err(Error::invalid_body("uaid: not a UAID").naming("uaid"));
            }
            let id = uaid.clone();
            let registered = request.app.store.read(move |conn| registry::find(conn, &id)).await?;
            match registered.filter(|r| r.deleted_at.is_none()) {
                Some(r) if principal.operator || r.account == own => {}
                Some(_) => return Err(Error::forbidden("the agent was registered by another account")),
                None => {
                    let message = format!("no agent {uaid} registered here: register it first");
                    return Err(Error::new(StatusCode::NOT_FOUND, "agent_not_found", message));
                }
            }
            (format!("uaid:{uaid}"), Some(uaid), body.ledger_account_id.clone(), body.ledger_network.clone())
        }
        (None, Some(account)) => {
            if account.trim() != own {
                return Err(Error::forbidden("ledgerAccountId is not the signed-in account"));
            }
            (format!("account:{own}"), None, Some(own.clone()), body.ledger_network.clone().or(network))
        }
        (None, None) => (format!("account:{own}"), None, Some(own.clone()), body.ledger_network.clone().or(network)),
    };
    let registration = Registration {
        subject,
        account: own,
        key: Key {
            id: String::new(),
            key_type: body.key_type.as_str().to_string(),
            public_key,
            uaid,
            ledger_account_id: account,
            ledger_network,
            email: body.email,
            created_at: 0,
            updated_at: 0,
        },
    };
    let key = request.app.store.write(move |conn| keys::register(conn, &registration, store::now_ms())).await?;
    Ok(reply::json_with(StatusCode::CREATED, &answer(&key)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case: key type, text, the normalised key or `None` (refused).
    #[test]
    fn keys_are_read_in_their_forms_and_normalised() {
        let secp = "02b4632d08485ff1df2db55b9dafd23347d1c47a457072a1e87be26896549a8737";
        let ed = "f7d4e0f6a5c9b1d3e2a4c6b8d0f2e4a6c8b0d2f4e6a8c0b2d4f6e8a0c2b4d6f8";
        let check = |kind: KeyType, text: &str, expected: Option<&str>| {
            assert_eq!(normalise(kind, text).ok().as_deref(), expected, "{kind:?} {text}");
        };
        check(KeyType::Secp256k1, secp, Some(secp));
        check(KeyType::Secp256k1, &format!("0x{}", secp.to_uppercase()), Some(secp));
        check(KeyType::Secp256k1, &format!("302d300706052b8104000a032200{secp}"), Some(secp));
        check(KeyType::Secp256k1, &secp[..64], None);
        check(KeyType::Secp256k1, &format!("08{}", &secp[2..]), None);
        check(KeyType::Secp256k1, "not hex", None);
        check(KeyType::X25519, ed, Some(ed));
        check(KeyType::X25519, &format!("302a300506032b656e032100{ed}"), Some(ed));
        check(KeyType::X25519, &ed[..62], None);
        check(KeyType::Ed25519, "", None);
        check(KeyType::Ed25519, &ed[..63], None);
    }

    #[test]
    fn an_uncompressed_secp256k1_key_is_compressed_and_ed25519_points_are_checked() {
        let signing = k256::ecdsa::SigningKey::from_slice(&[7u8; 32]).unwrap();
        let point = signing.verifying_key().to_encoded_point(false);
        let compressed = shared::http::hex(signing.verifying_key().to_encoded_point(true).as_bytes());
        assert_eq!(normalise(KeyType::Secp256k1, &shared::http::hex(point.as_bytes())), Ok(compressed));
        let ed = ed25519_dalek::SigningKey::from_bytes(&[9u8; 32]).verifying_key();
        let raw = shared::http::hex(ed.as_bytes());
        assert_eq!(normalise(KeyType::Ed25519, &raw).as_deref(), Ok(raw.as_str()));
        assert_eq!(normalise(KeyType::Ed25519, &format!("302a300506032b6570032100{raw}")).as_deref(), Ok(raw.as_str()));
    }

    #[test]
    fn email_addresses_are_checked_for_their_shape() {
        for (text, ok) in [
            ("a@b.co", true),
            ("agent.ops@example.org", true),
            ("a@b", false),
            ("@b.co", false),
            ("a b@c.de", false),
            ("a@@b.co", false),
        ] {
            assert_eq!(email(text), ok, "{text}");
        }
    }
}
