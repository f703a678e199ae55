//! The sign-in handlers: `POST /api/v1/auth/ledger/challenge` and
//! `/verify` (`broker-live.md` section 4).

use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;
use shared::http::hex;

use super::ledger::{self, Network, Proof};
use super::{digest, Settings};
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::{self, auth as keys, credits};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ChallengeRequest {
    account_id: String,
    network: String,
}

/// The network and canonical account of a request body, or 400.
fn identify(settings: &Settings, network: &str, account: &str) -> Result<(Network, String), Error> {
    let bad = |field: &'static str, message: String| Error::invalid_body(message).naming(field);
    let network = Network::parse(network).ok_or_else(|| {
        bad("network", "network: expected mainnet, testnet, previewnet or eip155:<chainId>".to_string())
    })?;
    if matches!(network, Network::Hedera(_)) && network != settings.network {
        return Err(bad("network", format!("network: this broker signs in {} accounts", settings.network.wire())));
    }
    let account = ledger::account(&network, account).ok_or_else(|| {
        let expected = match network {
            Network::Hedera(_) => "a Hedera account id (0.0.1234)",
            Network::Evm(_) => "an EVM address (0x and 40 hex digits)",
        };
        bad("accountId", format!("accountId: expected {expected}"))
    })?;
    Ok((network, account))
}

/// `POST /api/v1/auth/ledger/challenge`.
pub async fn challenge(request: Request) -> Answer {
    let body: ChallengeRequest = parse_body(&request.body)?;
    let settings = &request.app.auth;
    let (network, account) = identify(settings, &body.network, &body.account_id)?;
    let now = store::now_ms();
    let id = hex(&store::random::<16>());
    let expires_at = now + settings.challenge_ttl.as_millis() as i64;
    let message = format!(
        "almanac registry broker sign-in\n\nAccount: {account}\nNetwork: {}\nChallenge: {id}\nIssued: {}\nExpires: {}",
        network.canonical(),
        store::rfc3339(now),
        store::rfc3339(expires_at),
    );
    let challenge = keys::Challenge { id, account, network: network.canonical(), message, created_at: now, expires_at };
    let stored = challenge.clone();
    request
        .app
        .store
        .write(move |conn| {
            // Expired challenges go as new ones come.
            keys::prune_challenges(conn, now - 3_600_000)?;
            keys::insert_challenge(conn, &stored)
        })
        .await?;
    Ok(reply::json(&json!({
        "challengeId": challenge.id,
        "message": challenge.message,
        "expiresAt": store::rfc3339(challenge.expires_at),
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct VerifyRequest {
    challenge_id: String,
    account_id: String,
    network: String,
    signature: String,
    signature_kind: Option<String>,
    public_key: Option<String>,
    expires_in_minutes: Option<f64>,
}

/// `POST /api/v1/auth/ledger/verify`: the challenge is used up whatever
/// the outcome, so each signature is checked at most once.
pub async fn verify(request: Request) -> Answer {
    let body: VerifyRequest = parse_body(&request.body)?;
    let settings = &request.app.auth;
    let (network, account) = identify(settings, &body.network, &body.account_id)?;
    let minutes = match body.expires_in_minutes {
        None => settings.key_max_minutes,
        Some(m) if m.fract() == 0.0 && m >= 1.0 && m <= settings.key_max_minutes as f64 => m as u64,
        Some(_) => {
            let message = format!("expiresInMinutes: expected a whole number from 1 to {}", settings.key_max_minutes);
            return Err(Error::invalid_body(message).naming("expiresInMinutes"));
        }
    };
    if body.signature.trim().is_empty() {
        return Err(Error::invalid_body("signature: must not be empty").naming("signature"));
    }
    let now = store::now_ms();
    let id = body.challenge_id.clone();
    let store = request.app.store.clone();
    let challenge = store.write(move |conn| keys::take_challenge(conn, &id, now)).await?;
    let challenge = challenge
        .ok_or_else(|| Error::unauthorized("challenge_invalid", "the challenge is unknown or was already used"))?;
    if challenge.expires_at <= now {
        return Err(Error::unauthorized("challenge_expired", "the challenge expired; ask for a new one"));
    }
    if challenge.account != account || challenge.network != network.canonical() {
        let message = "the challenge was issued for another account or network";
        return Err(Error::unauthorized("challenge_mismatch", message));
    }
    let proof = Proof {
        network: &network,
        account: &account,
        signature: &body.signature,
        kind: body.signature_kind.as_deref(),
        public_key: body.public_key.as_deref(),
    };
    let grant = ledger::check(&settings.keys, &proof, &challenge.message).await?;

    let secret = format!("almk_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(store::random::<32>()));
    let issued = keys::ApiKey {
        id: format!("key_{}", hex(&store::random::<8>())),
        hash: digest(&secret),
        prefix: secret[..9].to_string(),
        last_four: secret[secret.len() - 4..].to_string(),
        label: None,
        account: account.clone(),
        network: network.wire(),
        network_canonical: network.canonical(),
        created_at: now,
        expires_at: now + (minutes as i64) * 60_000,
        last_used_at: None,
    };
    let stored = issued.clone();
    store
        .write(move |conn| {
            keys::insert_key(conn, &stored)?;
            if grant > 0 {
                let change = credits::Change {
                    account: stored.account.clone(),
                    kind: credits::Kind::Grant,
                    credits: grant,
                    idempotency_key: "first-sign-in".into(),
                    reason: "first sign-in grant".into(),
                    reference: None,
                };
                credits::post(conn, &change, now)?;
            }
            Ok(())
        })
        .await?;
    Ok(reply::json(&json!({
        "key": secret,
        "apiKey": {
            "id": issued.id,
            "prefix": issued.prefix,
            "lastFour": issued.last_four,
            "createdAt": store::rfc3339(issued.created_at),
            "expiresAt": store::rfc3339(issued.expires_at),
            "ownerType": "ledger",
            "ledgerAccountId": issued.account,
            "ledgerNetwork": issued.network,
            "ledgerNetworkCanonical": issued.network_canonical,
        },
        "accountId": issued.account,
        "network": issued.network,
        "networkCanonical": issued.network_canonical,
    })))
}
