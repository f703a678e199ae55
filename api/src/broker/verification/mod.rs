//! Ownership verification (the spec's Verification group; the reference
//! client's `broker-live.md` section 10): an account asks for a challenge
//! for an agent, proves it by one of three methods ([`proof`]), and the
//! agent then shows as verified: `verificationStatus: registered` and the
//! `verifiedOwner` trust signal at 100 ([`broker_model::ownership`]), in
//! its detail and in search at once through the live overlay, and in
//! every build after through the journal.
//!
//! **Challenges** are the caller's: asked for with a key (the account is
//! the one it bills as), read and used only by that account, used at most
//! once, expiring after `--verification-challenge-ttl-secs`, at most
//! `--verification-max-pending` unused at once per account, and
//! rate-limited per client (`Rate::Verification`). A failed attempt leaves
//! the challenge pending, so a DNS record added late counts at the next.
//!
//! **Re-checks** ([`recheck`]) look again at every proof: a proof gone
//! revokes the ownership; one that cannot be read (no answer) leaves it
//! until `--verification-lifetime-secs` has passed since it was last
//! found, when it expires. `POST /verification/dns/verify` re-checks a
//! DNS proof now.

pub mod dns;
pub mod proof;
pub mod recheck;
pub mod settings;

pub use settings::Settings;

use std::borrow::Cow;

use broker_model::ownership::{Method, Prior, State};
use broker_model::Agent;
use serde::Deserialize;
use serde_json::{json, Value};
use shared::http::hex;
use warp::http::StatusCode;

use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store;
use crate::store::verification::{self as stored, Challenge, Found, Held, Proven};

/// The owner type every ownership has: an account of this broker (a
/// ledger account signed in, or one the operator acts for).
const OWNER_TYPE: &str = "account";

fn not_found(uaid: &str) -> Error {
    Error::new(StatusCode::NOT_FOUND, "agent_not_found", format!("no agent {uaid}"))
}

/// The agent of `uaid` as of now, or 404.
fn agent<'a>(request: &'a Request, view: &'a super::overlay::View, uaid: &str) -> Result<Cow<'a, Agent>, Error> {
    super::register::lookup(request, view, uaid)?.ok_or_else(|| not_found(uaid))
}

/// The account the caller acts as, and its chain.
fn caller(request: &Request) -> Result<(String, String), Error> {
    let principal = request.principal()?;
    let account = principal.billing(&request.headers)?;
    let chain = match principal.network.is_empty() {
        true => request.app.auth.network.canonical(),
        false => principal.network.clone(),
    };
    Ok((account, chain))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UaidBody {
    uaid: String,
}

fn ownership_json(held: &Held) -> Value {
    json!({
        "ownerType": OWNER_TYPE,
        "ownerId": held.ownership.owner_id,
        "verifiedAt": held.ownership.verified_at,
        "method": held.ownership.method.as_str(),
    })
}

/// `uaid`'s ownership, verified or not, if one was ever proven.
async fn held(request: &Request, uaid: &str) -> Result<Option<Held>, Error> {
    let key = uaid.to_string();
    Ok(request.app.store.read(move |conn| stored::of(conn, &key)).await?)
}

/// `POST /verification/challenge` `{uaid}`.
pub async fn create_challenge(request: Request) -> Answer {
    let body: UaidBody = parse_body(&request.body)?;
    let (account, chain) = caller(&request)?;
    let view = request.app.overlay.view();
    let agent = agent(&request, &view, &body.uaid)?.into_owned();
    let registrant = crate::broker::register::registrant(&request, &body.uaid).await?;
    let methods = proof::applicable(&agent, registrant.as_deref(), &request.app.auth.network);
    if methods.is_empty() {
        let message = "no verification method applies to this agent (no domain nativeId, ledger account or endpoint)";
        return Err(Error::new(StatusCode::BAD_REQUEST, "method_not_applicable", message).naming("uaid"));
    }
    let settings = &request.app.verification;
    let now = store::now_ms();
    let challenge = Challenge {
        id: hex(&store::random::<16>()),
        uaid: body.uaid.clone(),
        account: account.clone(),
        chain,
        code: format!("almanac-verify-{}", hex(&store::random::<16>())),
        created_at: now,
        expires_at: now + settings.challenge_ttl.as_millis() as i64,
        used_at: None,
        method: None,
        message: None,
    };
    let stored = challenge.clone();
    let max_pending = settings.max_pending;
    let admitted = request
        .app
        .store
        .write(move |conn| {
            // Expired challenges go as new ones come.
            stored::prune_challenges(conn, now - 86_400_000)?;
            if stored::pending(conn, &stored.account, now)? >= max_pending {
                return Ok(false);
            }
            stored::insert_challenge(conn, &stored)?;
            Ok(true)
        })
        .await?;
    if !admitted {
        let message = format!("this account holds {max_pending} unused challenges; use or let them expire first");
        return Err(Error::new(StatusCode::TOO_MANY_REQUESTS, "too_many_challenges", message));
    }
    let native = agent.uaid.param("nativeId").unwrap_or_default();
    let handle = match dns::is_domain(native) {
        true => dns::record_name(native),
        false => agent.name.clone(),
    };
    let mut answer = json!({
        "challengeId": challenge.id,
        "uaid": challenge.uaid,
        "code": challenge.code,
        "expiresAt": store::rfc3339(challenge.expires_at),
        "expectedHandle": handle,
        "instructions": instructions(&agent, &methods, registrant.as_deref(), &request.app.auth.network),
        "methods": methods.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
    });
    if let Some(held) = held(&request, &body.uaid).await?.filter(|h| h.ownership.state == State::Verified) {
        answer["existingOwnership"] = ownership_json(&held);
    }
    Ok(reply::json(&answer))
}

/// How to prove the challenge by each applicable method.
fn instructions(
    agent: &Agent,
    methods: &[Method],
    registrant: Option<&str>,
    network: &crate::auth::ledger::Network,
) -> String {
    let steps: Vec<String> = methods
        .iter()
        .map(|method| {
            let target = proof::target(agent, *method, registrant, network).unwrap_or_default();
            match method {
                Method::DnsTxt => {
                    format!("dns-txt: publish a TXT record at {target} holding `{}=<code>`", dns::FIELD)
                }
                Method::LedgerSignature => {
                    format!("ledger-signature: sign the code with the key of {target} and send it as `signature`")
                }
                Method::AgentEndpoint => format!("agent-endpoint: serve the code as text at {target}"),
            }
        })
        .collect();
    format!(
        "Prove ownership one way, then POST /verification/verify with the challengeId and the method. {}",
        steps.join("; ")
    )
}

/// The caller's challenge `id`: 404 unknown, 403 another account's.
async fn own_challenge(request: &Request, id: &str) -> Result<Challenge, Error> {
    let (account, _) = caller(request)?;
    let key = id.to_string();
    let found = request.app.store.read(move |conn| stored::challenge(conn, &key)).await?;
    let challenge = found.ok_or_else(|| {
        Error::new(StatusCode::NOT_FOUND, "challenge_not_found", format!("no verification challenge {id}"))
    })?;
    let operator = request.principal.as_ref().is_some_and(|p| p.operator);
    if challenge.account != account && !operator {
        return Err(Error::forbidden("this challenge belongs to another account"));
    }
    Ok(challenge)
}

/// `GET /verification/challenge/{challengeId}`.
pub async fn challenge(request: Request) -> Answer {
    let id = request.params.get("challengeId").to_string();
    let challenge = own_challenge(&request, &id).await?;
    let mut answer = json!({
        "challengeId": challenge.id,
        "uaid": challenge.uaid,
        "code": challenge.code,
        "expiresAt": store::rfc3339(challenge.expires_at),
        "status": challenge.status(store::now_ms()),
    });
    if let Some(method) = challenge.method {
        answer["method"] = json!(method.as_str());
    }
    if let Some(message) = challenge.message.filter(|_| challenge.used_at.is_none()) {
        answer["message"] = json!(message);
    }
    Ok(reply::json(&answer))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct VerifyBody {
    challenge_id: String,
    method: Option<String>,
    /// `ledger-signature`: the account that signed (default: the agent's
    /// first ledger account), the signature, its kind and public key.
    account_id: Option<String>,
    signature: Option<String>,
    signature_kind: Option<String>,
    public_key: Option<String>,
}

fn method_of(text: Option<&str>) -> Result<Method, Error> {
    let supported = || broker_model::ownership::METHODS.join(", ");
    let Some(text) = text else {
        return Err(Error::invalid_body(format!("method: name one of {}", supported())).naming("method"));
    };
    text.parse().map_err(|_| {
        Error::new(
            StatusCode::BAD_REQUEST,
            "method_unsupported",
            format!("method {text:?}: expected one of {}", supported()),
        )
        .naming("method")
    })
}

/// `POST /verification/verify` `{challengeId, method, …}`.
pub async fn verify(request: Request) -> Answer {
    let body: VerifyBody = parse_body(&request.body)?;
    prove_challenge(&request, body).await
}

/// What `body` proves of its challenge.
async fn prove_challenge(request: &Request, body: VerifyBody) -> Answer {
    let method = method_of(body.method.as_deref())?;
    let challenge = own_challenge(request, &body.challenge_id).await?;
    let now = store::now_ms();
    match challenge.status(now) {
        "verified" => return Err(used()),
        "expired" => return Err(expired()),
        _ => {}
    }
    let view = request.app.overlay.view();
    let agent = agent(request, &view, &challenge.uaid)?.into_owned();
    let registrant = crate::broker::register::registrant(request, &challenge.uaid).await?;
    let network = &request.app.auth.network;
    let target = proof::target(&agent, method, registrant.as_deref(), network)?;
    let (found, target) = match method {
        Method::DnsTxt => (request.app.verification.txt.check(&target, &challenge.code).await, target),
        Method::AgentEndpoint => (proof::endpoint(&request.app, &target, &challenge.code).await?, target),
        Method::LedgerSignature => {
            let accounts = proof::ledger_accounts(&agent, registrant.as_deref(), network);
            let account = body.account_id.as_deref().map(str::trim).unwrap_or(&target).to_string();
            let signature = body.signature.as_deref().ok_or_else(|| {
                Error::invalid_body("signature: ledger-signature needs the code's signature").naming("signature")
            })?;
            let signed = proof::Signed {
                account: &account,
                signature,
                kind: body.signature_kind.as_deref(),
                public_key: body.public_key.as_deref(),
            };
            (proof::signature(&request.app, &accounts, &signed, &challenge.code).await?, account)
        }
    };
    let reason = match found {
        Found::Present => None,
        Found::Gone(why) | Found::Unknown(why) => Some(why),
    };
    if let Some(reason) = reason {
        let (id, why) = (challenge.id.clone(), reason.clone());
        request.app.store.write(move |conn| stored::attempted(conn, &id, method, &why)).await?;
        return Ok(reply::json(&json!({
            "verified": false,
            "uaid": challenge.uaid,
            "ownerType": OWNER_TYPE,
            "ownerId": challenge.account,
            "method": method.as_str(),
            "reason": reason,
        })));
    }
    let proof =
        stored::Proof { challenge: challenge.id.clone(), method, proof: target, shown: Prior::of(&agent), at: now };
    let proven = request.app.store.write(move |conn| stored::prove(conn, &proof)).await?;
    let held = match proven {
        Proven::Done { seq, held } => {
            changed(&request.app, seq, &held).await;
            held
        }
        Proven::Used => return Err(used()),
        Proven::Expired => return Err(expired()),
    };
    Ok(reply::json(&json!({
        "verified": true,
        "uaid": held.ownership.uaid,
        "ownerType": OWNER_TYPE,
        "ownerId": held.ownership.owner_id,
        "method": method.as_str(),
        "verifiedAt": held.ownership.verified_at,
    })))
}

fn used() -> Error {
    Error::new(StatusCode::CONFLICT, "challenge_used", "this challenge was used already; ask for a new one")
}

fn expired() -> Error {
    Error::new(StatusCode::GONE, "challenge_expired", "this challenge has expired; ask for a new one")
}

/// Shows an ownership changed at `seq` through the live overlay, and
/// wakes the journal writer.
pub async fn changed(app: &crate::app::App, seq: i64, held: &Held) {
    let build = app.live.get();
    if let Some(broker) = build.as_ref().and_then(|b| b.broker.as_deref()) {
        match super::availability::live::owned_change(&app.store, broker, seq, held.ownership.clone()).await {
            // Only a panic ends the overlay's writer (it logged why): the
            // change is stored and journaled, and shows from the next build.
            Ok(changes) => drop(app.overlay_writer.apply(changes).await),
            Err(e) => tracing::error!(error = %e, "verification: an ownership cannot be shown live"),
        }
    }
    app.journal.wake.notify_one();
}

/// `GET /verification/status/{uaid}`: public.
pub async fn status(request: Request) -> Answer {
    let uaid = request.params.get("uaid").to_string();
    let view = request.app.overlay.view();
    agent(&request, &view, &uaid)?;
    let held = held(&request, &uaid).await?;
    let verified = held.as_ref().is_some_and(|h| h.ownership.state == State::Verified);
    let mut answer = json!({
        "uaid": uaid,
        "verified": verified,
        "chain": held.as_ref().filter(|_| verified).map(|h| h.chain.clone()),
    });
    if let Some(held) = &held {
        answer["state"] = json!(held.ownership.state.as_str());
        answer["method"] = json!(held.ownership.method.as_str());
        if verified {
            answer["ownerType"] = json!(OWNER_TYPE);
            answer["ownerId"] = json!(held.ownership.owner_id);
            answer["verifiedAt"] = json!(held.ownership.verified_at);
        }
    }
    Ok(reply::json(&answer))
}

/// `GET /verification/ownership/{uaid}`: public; 404 unless verified.
pub async fn ownership(request: Request) -> Answer {
    let uaid = request.params.get("uaid").to_string();
    let held = held(&request, &uaid).await?.filter(|h| h.ownership.state == State::Verified);
    let held = held.ok_or_else(|| {
        Error::new(StatusCode::NOT_FOUND, "ownership_not_found", format!("no verified ownership of {uaid}"))
    })?;
    let mut answer = ownership_json(&held);
    answer["uaid"] = json!(uaid);
    answer["chain"] = json!(held.chain);
    Ok(reply::json(&answer))
}

/// `POST /verification/verify-sender` `{uaid}`: whether the caller owns
/// the agent, by a verified ownership or by having registered it here.
pub async fn verify_sender(request: Request) -> Answer {
    let body: UaidBody = parse_body(&request.body)?;
    let (account, _) = caller(&request)?;
    let view = request.app.overlay.view();
    agent(&request, &view, &body.uaid)?;
    let held = held(&request, &body.uaid).await?.filter(|h| h.ownership.state == State::Verified);
    let (verified, owner) = match (held, crate::broker::register::registrant(&request, &body.uaid).await?) {
        (Some(held), _) if held.ownership.owner_id == account => (true, held.ownership.owner_id),
        (_, Some(registrant)) if registrant == account => (true, registrant),
        (Some(held), _) => (false, held.ownership.owner_id),
        (None, Some(registrant)) => (false, registrant),
        (None, None) => (false, String::new()),
    };
    Ok(reply::json(&json!({"verified": verified, "uaid": body.uaid, "ownerType": OWNER_TYPE, "ownerId": owner})))
}

/// The DNS view of `uaid`'s ownership.
fn dns_json(uaid: &str, record: &str, held: Option<&Held>) -> Value {
    let held = held.filter(|h| h.ownership.method == Method::DnsTxt);
    json!({
        "uaid": uaid,
        "method": Method::DnsTxt.as_str(),
        "recordName": record,
        "verified": held.is_some_and(|h| h.ownership.state == State::Verified),
        "state": held.map(|h| h.ownership.state.as_str()),
        "verifiedAt": held.map(|h| h.ownership.verified_at.clone()),
        "checkedAt": held.map(|h| store::rfc3339(h.checked_at)),
        "confirmedAt": held.map(|h| store::rfc3339(h.confirmed_at)),
        "lastError": held.and_then(|h| h.last_error.clone()),
    })
}

/// `GET /verification/dns/status/{uaid}`: public.
pub async fn dns_status(request: Request) -> Answer {
    let uaid = request.params.get("uaid").to_string();
    let view = request.app.overlay.view();
    let agent = agent(&request, &view, &uaid)?.into_owned();
    let record = proof::target(&agent, Method::DnsTxt, None, &request.app.auth.network)?;
    let held = held(&request, &uaid).await?;
    Ok(reply::json(&dns_json(&uaid, &record, held.as_ref())))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DnsVerifyBody {
    uaid: String,
    challenge_id: Option<String>,
}

/// `POST /verification/dns/verify` `{uaid, challengeId?}`: with a
/// challenge, verifies by `dns-txt`; without, re-checks the agent's DNS
/// proof now (the caller must own it).
pub async fn dns_verify(request: Request) -> Answer {
    let body: DnsVerifyBody = parse_body(&request.body)?;
    if let Some(challenge_id) = body.challenge_id {
        let by_dns = VerifyBody {
            challenge_id,
            method: Some(Method::DnsTxt.as_str().into()),
            account_id: None,
            signature: None,
            signature_kind: None,
            public_key: None,
        };
        return prove_challenge(&request, by_dns).await;
    }
    let (account, _) = caller(&request)?;
    let held = held(&request, &body.uaid).await?.filter(|h| h.ownership.method == Method::DnsTxt);
    let Some(held) = held else {
        let message = format!("{} has no DNS proof to re-check; verify with a challenge first", body.uaid);
        return Err(Error::new(StatusCode::NOT_FOUND, "ownership_not_found", message));
    };
    let operator = request.principal.as_ref().is_some_and(|p| p.operator);
    if held.ownership.owner_id != account && !operator {
        return Err(Error::forbidden("this ownership belongs to another account"));
    }
    let after = recheck::one(&request.app, held).await?;
    Ok(reply::json(&dns_json(&body.uaid, &after.proof, Some(&after))))
}
