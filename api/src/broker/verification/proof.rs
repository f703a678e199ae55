//! What each method checks, and where: the same check proves an ownership
//! with a challenge and re-checks it later ([`super::recheck`]).
//!
//! - `dns-txt`: the TXT records at `_agent.<nativeId>` ([`super::dns`]),
//!   for an agent whose UAID's `nativeId` is a domain.
//! - `ledger-signature`: the code signed by the key of one of the agent's
//!   ledger accounts: the account that registered it here, or the account
//!   its `nativeId` names (`hedera:<network>:0.0.N`, `eip155:<chain>:0x…`),
//!   checked as a sign-in signature is ([`crate::auth::ledger::check`]).
//!   Re-checked, the agent must still name that account.
//! - `agent-endpoint`: the code served at `/.well-known/agent-verification`
//!   on the origin of the agent's endpoint (the one chat uses, else its
//!   first web endpoint), fetched through the egress gate: an address the
//!   gate refuses is never called.

use broker_model::ownership::Method;
use broker_model::Agent;
use warp::http::StatusCode;

use crate::app::App;
use crate::auth::ledger::{self, Network, Proof};
use crate::reply::Error;
use crate::store::verification::Found;

/// The path an agent serves its code at, on its endpoint's origin.
pub const WELL_KNOWN: &str = "/.well-known/agent-verification";

/// The most of that answer read, in bytes.
const MAX_ANSWER: usize = 4096;

/// Where `method` checks `agent`'s proof, or why it cannot.
pub fn target(agent: &Agent, method: Method, registrant: Option<&str>, network: &Network) -> Result<String, Error> {
    match method {
        Method::DnsTxt => {
            let native = agent.uaid.param("nativeId").unwrap_or_default();
            match super::dns::is_domain(native) {
                true => Ok(super::dns::record_name(native)),
                false => Err(not_applicable(method, "its UAID's nativeId is not a domain name")),
            }
        }
        Method::LedgerSignature => ledger_accounts(agent, registrant, network)
            .into_iter()
            .next()
            .ok_or_else(|| not_applicable(method, "it names no ledger account")),
        Method::AgentEndpoint => {
            let endpoint = broker_model::availability::checked_endpoint(agent).or_else(|| {
                agent
                    .endpoints
                    .values()
                    .map(String::as_str)
                    .find(|u| u.starts_with("https://") || u.starts_with("http://"))
            });
            let origin = endpoint.and_then(|e| url::Url::parse(e).ok()).map(|u| u.origin());
            match origin {
                Some(origin @ url::Origin::Tuple(..)) => Ok(format!("{}{WELL_KNOWN}", origin.ascii_serialization())),
                _ => Err(not_applicable(method, "it has no web endpoint")),
            }
        }
    }
}

/// The methods that apply to `agent`.
pub fn applicable(agent: &Agent, registrant: Option<&str>, network: &Network) -> Vec<Method> {
    broker_model::ownership::METHODS
        .iter()
        .filter_map(|m| m.parse::<Method>().ok())
        .filter(|m| target(agent, *m, registrant, network).is_ok())
        .collect()
}

/// The agent's ledger accounts: who registered it here, then the account
/// its `nativeId` names on this deployment's network or an EVM chain.
pub fn ledger_accounts(agent: &Agent, registrant: Option<&str>, network: &Network) -> Vec<String> {
    let mut accounts: Vec<String> = registrant.map(str::to_string).into_iter().collect();
    let native = agent.uaid.param("nativeId").unwrap_or_default();
    let named = match native.rsplit_once(':') {
        Some((prefix, account)) if prefix == network.canonical() => ledger::account(network, account),
        Some((prefix, account)) if prefix.starts_with("eip155:") => {
            Network::parse(prefix).and_then(|n| ledger::account(&n, account))
        }
        _ => None,
    };
    accounts.extend(named.filter(|n| !accounts.contains(n)));
    accounts
}

fn not_applicable(method: Method, why: &str) -> Error {
    Error::new(
        StatusCode::BAD_REQUEST,
        "method_not_applicable",
        format!("{} cannot verify this agent: {why}", method.as_str()),
    )
    .naming("method")
}

/// A signature over a challenge's code, as the verify body carries it.
pub struct Signed<'a> {
    pub account: &'a str,
    pub signature: &'a str,
    pub kind: Option<&'a str>,
    pub public_key: Option<&'a str>,
}

/// Checks a `ledger-signature` proof: `signed` by one of `accounts`, over
/// `code`. A signature that does not verify is `Gone` (not proven); a
/// malformed one is the 400 a sign-in gives.
pub async fn signature(app: &App, accounts: &[String], signed: &Signed<'_>, code: &str) -> Result<Found, Error> {
    if !accounts.iter().any(|a| a == signed.account) {
        return Ok(Found::Gone(format!("{} is not the agent's ledger account", signed.account)));
    }
    // An EVM signature names its signer whatever the chain.
    let network = match signed.account.starts_with("0x") {
        true => Network::Evm(1),
        false => app.auth.network.clone(),
    };
    let proof = Proof {
        network: &network,
        account: signed.account,
        signature: signed.signature,
        kind: signed.kind,
        public_key: signed.public_key,
    };
    match ledger::check(&app.auth.keys, &proof, code).await {
        Ok(_) => Ok(Found::Present),
        Err(e) if e.status == StatusCode::UNAUTHORIZED => Ok(Found::Gone(e.message.clone())),
        Err(e) => Err(e),
    }
}

/// Checks an `agent-endpoint` proof at `url` (through the egress gate).
/// A refused destination is the gate's 403.
pub async fn endpoint(app: &App, url: &str, code: &str) -> Result<Found, Error> {
    let response = match app.chat.gate.get(url).send().await {
        Ok(response) => response,
        Err(crate::egress::Error::NotAllowed) => return Err(crate::egress::refusal()),
        Err(e) => return Ok(Found::Unknown(e.to_string())),
    };
    if !response.status().is_success() {
        return Ok(Found::Gone(format!("{url} answered {}", response.status().as_u16())));
    }
    match crate::chat::turn::read_bounded(response, MAX_ANSWER).await {
        Ok(body) => match String::from_utf8_lossy(&body).lines().any(|line| line.trim() == code) {
            true => Ok(Found::Present),
            false => Ok(Found::Gone(format!("{url} does not serve this challenge's code"))),
        },
        Err(_) => Ok(Found::Gone(format!("{url}: no answer within {MAX_ANSWER} bytes"))),
    }
}

/// Re-checks a held proof of `method` at `proof` for `code`, `agent` as
/// it is now (`None`: no longer indexed).
pub async fn recheck(
    app: &App,
    agent: Option<&Agent>,
    registrant: Option<&str>,
    method: Method,
    proof: &str,
    code: &str,
) -> Found {
    let Some(agent) = agent else { return Found::Gone("the agent is no longer indexed".into()) };
    match target(agent, method, registrant, &app.auth.network) {
        Err(_) => return Found::Gone(format!("{} no longer applies to the agent", method.as_str())),
        Ok(_) if method == Method::LedgerSignature => {
            return match ledger_accounts(agent, registrant, &app.auth.network).iter().any(|a| a == proof) {
                true => Found::Present,
                false => Found::Gone(format!("the agent no longer names {proof}")),
            };
        }
        Ok(target) if target != proof => return Found::Gone(format!("the agent's proof moved to {target}")),
        Ok(_) => {}
    }
    match method {
        Method::DnsTxt => app.verification.txt.check(proof, code).await,
        Method::AgentEndpoint => endpoint(app, proof, code).await.unwrap_or_else(|e| Found::Gone(e.message)),
        Method::LedgerSignature => unreachable!("answered above"),
    }
}
