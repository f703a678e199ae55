//! Credits (spec section 4, Credits): balances, the transaction list, the
//! refused `POST /credits/purchase`, and redemption of points (an HCS-20
//! balance of a configured token in the current build, less what the
//! account already redeemed). The payment intents are [`super::intents`].
//!
//! `POST /credits/purchase` is refused by design: the reference client
//! sends the payer's Hedera **private key** there for the server to sign
//! with. A broker must never take a user's key; the payment intent
//! (`/credits/payments/native/intent`) gives the wallet a transaction to
//! sign itself.

use serde::Deserialize;
use serde_json::json;
use shared::entity::EntityId;
use warp::http::StatusCode;

use super::payments::Redemption;
use crate::auth::ledger;
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::{self, credits, payments};

/// Most transactions one page lists.
pub const MAX_TRANSACTIONS: usize = 200;
const DEFAULT_TRANSACTIONS: usize = 50;

/// An `accountId` query value in its canonical form: a Hedera id on the
/// deployment's network, or an EVM address.
fn account_parameter(request: &Request, value: &str) -> Result<String, Error> {
    let network = &request.app.auth.network;
    ledger::account(network, value)
        .or_else(|| ledger::account(&ledger::Network::Evm(1), value))
        .ok_or_else(|| Error::parameter("accountId", "accountId: expected a ledger account id (0.0.1234 or 0x…)"))
}

/// `GET /api/v1/credits/balance`: any account's balance; without
/// `accountId`, the signed-in account's.
pub async fn balance(request: Request) -> Answer {
    let account = match request.query_value("accountId")? {
        Some(value) => account_parameter(&request, &value)?,
        None => match request.principal.as_ref().and_then(|p| p.account.clone()) {
            Some(own) => own,
            None => {
                return Err(Error::new(
                    StatusCode::BAD_REQUEST,
                    "account_id_required",
                    "accountId: name the account, or sign in",
                )
                .naming("accountId"))
            }
        },
    };
    let key = account.clone();
    let balance = request.app.store.read(move |conn| credits::balance(conn, &key)).await?;
    Ok(reply::json(&json!({
        "accountId": account,
        "balance": balance,
        "timestamp": store::rfc3339(store::now_ms()),
    })))
}

/// `GET /api/v1/credits/transactions`: the signed-in account's own (403
/// for another's).
pub async fn transactions(request: Request) -> Answer {
    let principal = request.principal()?;
    let account = match request.query_value("accountId")? {
        Some(value) => {
            let account = account_parameter(&request, &value)?;
            if !principal.operator && principal.account.as_ref() != Some(&account) {
                return Err(Error::forbidden("accountId is not the signed-in account"));
            }
            account
        }
        None => principal.billing(&request.headers)?,
    };
    let limit = request.query_number("limit", 1, MAX_TRANSACTIONS)?.unwrap_or(DEFAULT_TRANSACTIONS);
    let offset = request.query_number("offset", 0, usize::MAX)?.unwrap_or(0);
    let kind = request.query_value("type")?;
    let (kind, spends) = match kind.as_deref() {
        None => (None, None),
        // The hosted broker's two directions, and this ledger's kinds.
        Some("credit") => (None, Some(false)),
        Some(text) => match text.parse::<credits::Kind>() {
            Ok(kind) => (Some(kind), None),
            Err(()) => {
                let message = format!("type: expected credit or one of {}", credits::KINDS.join(", "));
                return Err(Error::parameter("type", message));
            }
        },
    };
    let status = match request.query_value("status")? {
        None => None,
        Some(text) => Some(text.parse::<credits::Status>().map_err(|()| {
            Error::parameter("status", format!("status: expected one of {}", credits::STATUSES.join(", ")))
        })?),
    };
    let start = date(&request, "startDate", false)?;
    let end = date(&request, "endDate", true)?;
    if let (Some(start), Some(end)) = (start, end) {
        if start > end {
            return Err(Error::parameter("endDate", "endDate: is before startDate"));
        }
    }
    let filter = credits::Filter { account: account.clone(), kind, spends, status, start, end, limit, offset };
    let (entries, total) = request.app.store.read(move |conn| credits::transactions(conn, &filter)).await?;
    let transactions: Vec<_> = entries
        .iter()
        .map(|e| {
            let mut row = json!({
                "id": e.id.to_string(),
                "accountId": e.account,
                "type": if e.kind.spends() { "debit" } else { "credit" },
                "amount": e.amount.abs(),
                "balance": e.balance_after,
                "description": e.reason,
                "status": e.status.as_str(),
                "reason": e.kind.as_str(),
                "timestamp": store::rfc3339(e.created_at),
            });
            if let Some(reference) = &e.reference {
                row["externalReference"] = json!(reference);
            }
            row
        })
        .collect();
    Ok(reply::json(&json!({
        "accountId": account,
        "transactions": transactions,
        "total": total,
        "limit": limit,
        "offset": offset,
        "timestamp": store::rfc3339(store::now_ms()),
    })))
}

/// A whole-number query parameter within `min..=max`.
/// An inclusive bound: an RFC 3339 time, or a date (its first or, for an
/// end, last millisecond).
fn date(request: &Request, name: &'static str, end: bool) -> Result<Option<i64>, Error> {
    let Some(text) = request.query_value(name)? else { return Ok(None) };
    if let Ok(time) = chrono::DateTime::parse_from_rfc3339(&text) {
        return Ok(Some(time.timestamp_millis()));
    }
    if let Ok(day) = chrono::NaiveDate::parse_from_str(&text, "%Y-%m-%d") {
        let start = day.and_hms_opt(0, 0, 0).expect("midnight").and_utc().timestamp_millis();
        return Ok(Some(if end { start + 86_400_000 - 1 } else { start }));
    }
    Err(Error::parameter(name, format!("{name}: expected an ISO 8601 time (2026-01-31T12:00:00Z) or date")))
}

/// `POST /api/v1/credits/purchase`: refused, always (see the module).
pub async fn purchase(_request: Request) -> Answer {
    Err(Error::new(
        StatusCode::BAD_REQUEST,
        "private_key_not_accepted",
        "this broker never takes a private key: create a payment intent at \
         POST /api/v1/credits/payments/native/intent, sign the returned transaction in your wallet, and submit it",
    ))
}

/// The account redemption is for: `accountId` (the principal's own, or
/// any for the operator; 403 otherwise), else the principal's; a Hedera
/// account, as HCS-20 balances are.
fn redeemer(request: &Request, named: Option<String>) -> Result<(String, EntityId), Error> {
    let principal = request.principal()?;
    let account = match named {
        Some(named) => {
            let account = account_parameter(request, &named)?;
            if !principal.operator && principal.account.as_ref() != Some(&account) {
                return Err(Error::forbidden("accountId is not the signed-in account"));
            }
            account
        }
        None => principal.account.clone().ok_or_else(|| {
            Error::new(StatusCode::BAD_REQUEST, "account_id_required", "accountId: name the account")
                .naming("accountId")
        })?,
    };
    let entity = account.parse::<EntityId>().map_err(|_| {
        let message = format!("{account} is not a ledger account: points are HCS-20 balances of Hedera accounts");
        Error::new(StatusCode::BAD_REQUEST, "ledger_account_required", message).naming("accountId")
    })?;
    Ok((account, entity))
}

/// The redemption settings, or 503.
fn redemption(request: &Request) -> Result<Redemption, Error> {
    request.app.redemption.clone().ok_or_else(|| {
        Error::new(StatusCode::SERVICE_UNAVAILABLE, "not_configured", "redemption of points is not configured here")
    })
}

/// The account's points: its balance of the token in the current build.
fn points(request: &Request, redemption: &Redemption, account: EntityId) -> Result<i64, Error> {
    let (balances, _) = request.build()?.analytics.account(account);
    let topic = redemption.topic.to_string();
    let held = balances.balances.iter().find(|b| b.tick == redemption.tick && b.topic == topic);
    Ok(held.map_or(0, |b| i64::try_from(b.balance).unwrap_or(i64::MAX)))
}

/// `GET /api/v1/credits/redeem-points/quote` (signed in): what the
/// account's points would pay now.
pub async fn redeem_quote(request: Request) -> Answer {
    let redemption = redemption(&request)?;
    let (account, entity) = redeemer(&request, request.query_value("accountId")?)?;
    let held = points(&request, &redemption, entity)?;
    let (key, token) = (account.clone(), redemption.token());
    let (redeemed, balance) = request
        .app
        .store
        .read(move |conn| Ok((payments::redeemed(conn, &key, &token)?, credits::balance(conn, &key)?)))
        .await?;
    let available = (held - redeemed).max(0);
    Ok(reply::json(&json!({
        "accountId": account,
        "tick": redemption.tick,
        "topicId": redemption.topic.to_string(),
        "points": held,
        "redeemedPoints": redeemed,
        "availablePoints": available,
        "creditsPerPoint": redemption.credits_per_point,
        "credits": available * redemption.credits_per_point,
        "balance": balance,
        "timestamp": store::rfc3339(store::now_ms()),
    })))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RedeemRequest {
    account_id: Option<String>,
    /// How many points; all that remain when absent.
    points: Option<i64>,
}

/// `POST /api/v1/credits/redeem-points` (signed in): redeems the points
/// (all that remain, or `points`) for credits; 400 `nothing_to_redeem`
/// when fewer remain.
pub async fn redeem(request: Request) -> Answer {
    let redemption = redemption(&request)?;
    let body: RedeemRequest = match request.body.trim_ascii().is_empty() {
        true => RedeemRequest::default(),
        false => parse_body(&request.body)?,
    };
    if body.points.is_some_and(|p| p < 1) {
        return Err(Error::invalid_body("points: must be 1 or more").naming("points"));
    }
    let (account, entity) = redeemer(&request, body.account_id)?;
    let held = points(&request, &redemption, entity)?;
    let redeem = payments::Redeem {
        id: format!("rdm_{}", shared::http::hex(&store::random::<8>())),
        account: account.clone(),
        token: redemption.token(),
        held,
        points: body.points,
        credits_per_point: redemption.credits_per_point,
    };
    let id = redeem.id.clone();
    match request.app.store.write(move |conn| payments::redeem(conn, &redeem, store::now_ms())).await? {
        payments::Redeemed::Done { points, credits, balance } => Ok(reply::json(&json!({
            "success": true,
            "redemptionId": id,
            "accountId": account,
            "tick": redemption.tick,
            "topicId": redemption.topic.to_string(),
            "redeemedPoints": points,
            "creditedCredits": credits,
            "balance": balance,
            "timestamp": store::rfc3339(store::now_ms()),
        }))),
        payments::Redeemed::Short { available } => {
            let message = match body.points {
                Some(asked) => format!("points: {asked} asked, {available} available"),
                None => "no points are available to redeem".to_string(),
            };
            Err(Error::new(StatusCode::BAD_REQUEST, "nothing_to_redeem", message)
                .naming("points")
                .with_fields(json!({"availablePoints": available})))
        }
    }
}
