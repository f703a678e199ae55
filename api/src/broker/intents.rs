//! The purchase routes (spec section 4, Credits): an HBAR payment intent
//! (`/credits/payments/native/intent`), a card payment intent
//! (`/credits/payments/intent`), the card provider's webhook, and the
//! providers this deployment takes.
//!
//! An HBAR intent answers a transfer from the purchaser to the treasury as
//! unsigned Hedera transaction bytes: the purchaser's wallet signs and
//! submits them, and the credits are issued once the mirror node shows the
//! transfer ([`super::payments::Treasury::watch`]). The broker never holds
//! a purchaser's key. A card intent is made at the provider; its webhook
//! completes it.

use std::sync::Arc;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use warp::http::StatusCode;

use shared::entity::EntityId;

use super::hapi::{Transfer, TxId};
use super::payments::{Card, ProviderError, Treasury};
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::{self, payments};

/// Tinybars in one HBAR.
const TINYBARS: i64 = 100_000_000;
/// Most credits one intent buys.
pub const MAX_CREDITS: i64 = 100_000_000;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NativeRequest {
    account_id: Option<String>,
    credits: Option<i64>,
    hbar_amount: Option<f64>,
}

/// The account a purchase is for: the body's `accountId` when the
/// principal controls it (403 otherwise), else the billing account.
fn purchaser(request: &Request, named: Option<&str>) -> Result<String, Error> {
    let principal = request.principal()?;
    match named.map(str::trim) {
        Some(named) if principal.operator => Ok(named.to_string()),
        named => {
            let own = principal.billing(&request.headers)?;
            match named {
                Some(named) if named != own => Err(Error::forbidden("accountId is not the signed-in account")),
                _ => Ok(own),
            }
        }
    }
}

fn not_configured(what: &str) -> Error {
    Error::new(StatusCode::SERVICE_UNAVAILABLE, "not_configured", format!("{what} is configured on this broker"))
}

/// A purchase's credits and tinybars from what the body names: `credits`
/// wins over `hbarAmount`; one of them is needed.
fn amounts(credits: Option<i64>, hbar: Option<f64>, credits_per_hbar: f64) -> Result<(i64, i64), Error> {
    let per_tinybar = credits_per_hbar / TINYBARS as f64;
    if let Some(credits) = credits {
        if !(1..=MAX_CREDITS).contains(&credits) {
            let message = format!("credits: must be from 1 to {MAX_CREDITS}");
            return Err(Error::invalid_body(message).naming("credits"));
        }
        let tinybars = ((credits as f64 / per_tinybar) - 1e-6).ceil().max(1.0) as i64;
        return Ok((credits, tinybars));
    }
    let Some(hbar) = hbar else {
        return Err(Error::invalid_body("credits or hbarAmount: one is required").naming("credits"));
    };
    let exact = hbar * TINYBARS as f64;
    let tinybars = exact.round();
    if !hbar.is_finite() || tinybars < 1.0 || (exact - tinybars).abs() > 1e-3 {
        let message = "hbarAmount: must be a positive amount with at most 8 decimal places";
        return Err(Error::invalid_body(message).naming("hbarAmount"));
    }
    let tinybars = tinybars as i64;
    let credits = (tinybars as f64 * per_tinybar + 1e-6).floor() as i64;
    if credits < 1 {
        let message = format!("hbarAmount: buys no credit; one costs {} HBAR", 1.0 / credits_per_hbar);
        return Err(Error::invalid_body(message).naming("hbarAmount"));
    }
    if credits > MAX_CREDITS {
        let message = format!("hbarAmount: buys more than {MAX_CREDITS} credits");
        return Err(Error::invalid_body(message).naming("hbarAmount"));
    }
    Ok((credits, tinybars))
}

/// A purchase id: `pur_` and 16 random hex digits.
fn purchase_id() -> String {
    format!("pur_{}", shared::http::hex(&store::random::<8>()))
}

/// `POST /api/v1/credits/payments/native/intent` (signed in).
pub async fn native(request: Request) -> Answer {
    let treasury: Arc<Treasury> = request.app.treasury.clone().ok_or_else(|| not_configured("no treasury account"))?;
    let body: NativeRequest = parse_body(&request.body)?;
    let account = purchaser(&request, body.account_id.as_deref())?;
    let Some(payer) = account.parse::<EntityId>().ok() else {
        let message = format!("{account} is not a Hedera account: HBAR is paid from an account id (0.0.1234)");
        return Err(Error::new(StatusCode::BAD_REQUEST, "ledger_account_required", message).naming("accountId"));
    };
    let pricing = &request.app.pricing;
    let (credits, tinybars) = amounts(body.credits, body.hbar_amount, pricing.credits_per_hbar)?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    // A few seconds early, as the SDKs do, for clocks that run behind; the
    // random nanoseconds keep two intents of one second apart.
    let random = u32::from_le_bytes(store::random::<4>()) % 1_000_000_000;
    let id = TxId { payer, seconds: now.as_secs() as i64 - 5, nanos: random as i32 };
    let purchase = purchase_id();
    let transfer = Transfer {
        id,
        to: treasury.account,
        tinybars,
        max_fee: treasury.max_fee,
        valid_seconds: treasury.valid_seconds,
        memo: format!("almanac credits {purchase}"),
    };
    let bytes = transfer.to_bytes(&treasury.nodes);
    let valid_start = id.seconds * 1000;
    let answer = json!({
        "transaction": base64::engine::general_purpose::STANDARD.encode(&bytes),
        "transactionId": id.sdk(),
        "network": treasury.network,
        "accountId": account,
        "treasuryAccountId": treasury.account.to_string(),
        "hbarAmount": tinybars as f64 / TINYBARS as f64,
        "credits": credits,
        "tinybarAmount": tinybars,
        "memo": transfer.memo,
        "centsPerHbar": pricing.cents_per_hbar,
        "validStart": store::rfc3339(valid_start),
        "validDurationSeconds": treasury.valid_seconds,
        "requiresManualSubmit": true,
        "purchaseId": purchase,
    });
    let intent = payments::Intent {
        id: purchase,
        method: payments::Method::Native,
        account,
        credits,
        amount: tinybars,
        currency: "HBAR".into(),
        reference: id.mirror(),
        idempotency_key: None,
        answer: answer.to_string(),
        state: payments::State::Pending,
        outcome: None,
        created_at: store::now_ms(),
        expires_at: Some(valid_start + treasury.valid_seconds * 1000),
    };
    request.app.store.write(move |conn| payments::create(conn, &intent, None)).await?;
    Ok(reply::json(&answer))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CardRequest {
    amount: i64,
    account_id: Option<String>,
    credits: Option<i64>,
    currency: Option<String>,
    payment_method_id: Option<String>,
    customer_id: Option<String>,
    metadata: Option<Map<String, Value>>,
    description: Option<String>,
    idempotency_key: Option<String>,
}

/// The currency card amounts are in: the pricing file's cents.
const CURRENCY: &str = "usd";
/// The provider's bounds on metadata (Stripe's): keys, key and value size.
const METADATA_KEYS: usize = 40;
const METADATA_KEY_CHARS: usize = 40;
const METADATA_VALUE_CHARS: usize = 500;
const TEXT_CHARS: usize = 255;

/// Short text fields: present, not blank, at most `TEXT_CHARS`.
fn text_field(name: &'static str, value: &Option<String>) -> Result<(), Error> {
    match value {
        Some(v) if v.trim().is_empty() || v.chars().count() > TEXT_CHARS => {
            Err(Error::invalid_body(format!("{name}: must be 1 to {TEXT_CHARS} characters")).naming(name))
        }
        _ => Ok(()),
    }
}

/// `POST /api/v1/credits/payments/intent` (signed in): an intent at the
/// card provider, made once per account and idempotency key.
pub async fn card(request: Request) -> Answer {
    let card: Arc<Card> = request.app.card.clone().ok_or_else(|| not_configured("no payment provider"))?;
    let body: CardRequest = parse_body(&request.body)?;
    let account = purchaser(&request, body.account_id.as_deref())?;
    let currency = body.currency.as_deref().unwrap_or(CURRENCY).to_ascii_lowercase();
    if currency != CURRENCY {
        let message = format!("currency: this broker takes {CURRENCY} only");
        return Err(Error::new(StatusCode::BAD_REQUEST, "unsupported_currency", message).naming("currency"));
    }
    let pricing = &request.app.pricing;
    if body.amount < card.min_amount || body.amount > MAX_CREDITS {
        let message = format!("amount: must be from {} to {MAX_CREDITS} cents", card.min_amount);
        return Err(Error::new(StatusCode::BAD_REQUEST, "amount_out_of_range", message).naming("amount"));
    }
    let credits = (body.amount as f64 * pricing.credits_per_hbar / pricing.cents_per_hbar + 1e-6).floor() as i64;
    if let Some(asked) = body.credits.filter(|c| *c != credits) {
        let message = format!("credits: {} cents buy {credits} credits, not {asked}", body.amount);
        return Err(Error::invalid_body(message).naming("credits"));
    }
    for (name, value) in [
        ("paymentMethodId", &body.payment_method_id),
        ("customerId", &body.customer_id),
        ("description", &body.description),
    ] {
        text_field(name, value)?;
    }
    let key = crate::idempotency::for_route(&request, "card-intent", &account, body.idempotency_key.as_deref())?;
    crate::idempotency::check(&request, key.as_ref()).await?;
    let mut form: Vec<(String, String)> = vec![
        ("amount".into(), body.amount.to_string()),
        ("currency".into(), currency.clone()),
        ("automatic_payment_methods[enabled]".into(), "true".into()),
    ];
    let purchase = purchase_id();
    let metadata = body.metadata.clone().unwrap_or_default();
    if metadata.len() > METADATA_KEYS {
        let message = format!("metadata: at most {METADATA_KEYS} keys");
        return Err(Error::invalid_body(message).naming("metadata"));
    }
    for (key, value) in &metadata {
        let value = match value {
            Value::String(s) => s.clone(),
            Value::Number(_) | Value::Bool(_) => value.to_string(),
            _ => {
                return Err(Error::invalid_body("metadata: values are strings, numbers or booleans").naming("metadata"))
            }
        };
        if key.is_empty() || key.chars().count() > METADATA_KEY_CHARS || value.chars().count() > METADATA_VALUE_CHARS {
            let message = format!(
                "metadata: keys are 1 to {METADATA_KEY_CHARS} characters, values at most {METADATA_VALUE_CHARS}"
            );
            return Err(Error::invalid_body(message).naming("metadata"));
        }
        form.push((format!("metadata[{key}]"), value));
    }
    // Ours last: the client's metadata cannot pose as them.
    form.retain(|(k, _)| !matches!(k.as_str(), "metadata[accountId]" | "metadata[purchaseId]" | "metadata[credits]"));
    form.push(("metadata[accountId]".into(), account.clone()));
    form.push(("metadata[purchaseId]".into(), purchase.clone()));
    form.push(("metadata[credits]".into(), credits.to_string()));
    for (field, value) in [
        ("description", &body.description),
        ("customer", &body.customer_id),
        ("payment_method", &body.payment_method_id),
    ] {
        if let Some(value) = value {
            form.push((field.into(), value.clone()));
        }
    }
    // The same key again is the same intent: answered from the store, and
    // at the provider the same key returns the same intent too.
    if let Some(key) = key.as_ref().map(|k| k.key.clone()) {
        let owner = account.clone();
        if let Some(held) = request.app.store.read(move |conn| payments::by_key(conn, &owner, &key)).await? {
            return reused(&held, body.amount, &currency);
        }
    }
    let provider_key = match &key {
        Some(key) => format!("almanac:{account}:{}", key.key),
        None => format!("almanac:{purchase}"),
    };
    let made = card.create(&form, &provider_key).await.map_err(|e| match e {
        ProviderError::Refused(message) => Error::new(StatusCode::BAD_REQUEST, "payment_provider_refused", message),
        ProviderError::Unavailable(message) => {
            tracing::warn!(error = message, "payments: the card provider failed");
            Error::new(
                StatusCode::BAD_GATEWAY,
                "payment_provider_unavailable",
                "the payment provider failed; try again",
            )
        }
    })?;
    let answer = json!({
        "success": true,
        "provider": card.name,
        "intentId": made.id,
        "clientSecret": made.client_secret,
        "status": made.status,
        "amount": made.amount,
        "currency": made.currency,
        "credits": credits,
        "publishableKey": card.publishable_key,
        "customerId": made.customer,
    });
    let intent = payments::Intent {
        id: purchase,
        method: payments::Method::Card,
        account,
        credits,
        amount: body.amount,
        currency: currency.clone(),
        reference: made.id,
        idempotency_key: key.as_ref().map(|k| k.key.clone()),
        answer: answer.to_string(),
        state: payments::State::Pending,
        outcome: None,
        created_at: store::now_ms(),
        expires_at: None,
    };
    match request.app.store.write(move |conn| payments::create(conn, &intent, key.as_ref())).await? {
        payments::Created::New(_) => Ok(reply::json(&answer)),
        // A concurrent request with the same key stored it first.
        payments::Created::Existing(held) => reused(&held, body.amount, &currency),
        payments::Created::KeyReused => Err(crate::idempotency::reused()),
    }
}

/// The stored answer for a retried idempotency key (its digest matched,
/// or it was stored before digests were: then the amount and currency
/// must).
fn reused(held: &payments::Intent, amount: i64, currency: &str) -> Answer {
    if held.method != payments::Method::Card || held.amount != amount || held.currency != currency {
        return Err(crate::idempotency::reused());
    }
    let answer: Value = serde_json::from_str(&held.answer)
        .map_err(|e| Error::from(store::Failure::Corrupt(format!("intent {}: {e}", held.id))))?;
    Ok(reply::json(&answer))
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    data: EventData,
}

#[derive(Deserialize)]
struct EventData {
    object: EventObject,
}

#[derive(Deserialize)]
struct EventObject {
    id: String,
    #[serde(default)]
    amount_received: i64,
    #[serde(default)]
    currency: String,
}

/// `POST /api/v1/credits/payments/webhook`: the card provider's signed
/// events. A succeeded intent issues its credits (once); a canceled one
/// fails. Events for intents not made here are acknowledged and ignored,
/// as the provider retries anything else.
pub async fn webhook(request: Request) -> Answer {
    let card: Arc<Card> = request.app.card.clone().ok_or_else(|| not_configured("no payment provider"))?;
    let signature = request.headers.get("stripe-signature").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let now = store::now_ms() / 1000;
    if let Err(why) = card.signed(signature, &request.body, now) {
        let status =
            if card.webhook_secret.is_none() { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::BAD_REQUEST };
        return Err(Error::new(status, "invalid_signature", format!("Stripe-Signature: {why}")));
    }
    let event: Event = parse_body(&request.body)?;
    let settlement = match event.kind.as_str() {
        "payment_intent.succeeded" => None,
        "payment_intent.canceled" => {
            Some(payments::Settlement::Unpaid(payments::State::Failed, "the card payment was canceled".into()))
        }
        _ => return Ok(reply::json(&json!({"received": true, "handled": false}))),
    };
    let object = event.data.object;
    let reference = object.id.clone();
    let held =
        request.app.store.read(move |conn| payments::by_reference(conn, payments::Method::Card, &reference)).await?;
    let Some(held) = held else { return Ok(reply::json(&json!({"received": true, "handled": false}))) };
    let settlement = settlement.unwrap_or_else(|| {
        if object.amount_received >= held.amount && object.currency.eq_ignore_ascii_case(&held.currency) {
            payments::Settlement::Paid
        } else {
            let why =
                format!("received {} {} of {} {}", object.amount_received, object.currency, held.amount, held.currency);
            payments::Settlement::Unpaid(payments::State::Failed, why)
        }
    });
    let id = held.id.clone();
    let state = request.app.store.write(move |conn| payments::settle(conn, &id, &settlement, store::now_ms())).await?;
    Ok(reply::json(&json!({"received": true, "handled": true, "purchaseId": held.id, "status": state.as_str()})))
}

/// `GET /api/v1/credits/providers`: the ways to buy credits here.
pub async fn providers(request: Request) -> Answer {
    let app = &request.app;
    let mut providers = Vec::new();
    if app.treasury.is_some() {
        providers.push(json!({"name": "hbar", "publishableKey": "", "currency": "HBAR",
            "centsPerHbar": app.pricing.cents_per_hbar}));
    }
    if let Some(card) = &app.card {
        providers.push(json!({"name": card.name, "publishableKey": card.publishable_key, "currency": CURRENCY}));
    }
    Ok(reply::json(&json!({"providers": providers})))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case: credits, hbarAmount, and the credits and tinybars, or the
    /// field refused.
    #[test]
    fn purchase_amounts_follow_the_price() {
        let check = |credits: Option<i64>, hbar: Option<f64>, expected: Result<(i64, i64), &str>| {
            let got = amounts(credits, hbar, 100.0).map_err(|e| e.parameter.unwrap_or_default().to_string());
            assert_eq!(got, expected.map_err(str::to_string), "{credits:?} {hbar:?}");
        };
        check(Some(100), None, Ok((100, 100_000_000)));
        check(Some(1), None, Ok((1, 1_000_000)));
        check(Some(100), Some(50.0), Ok((100, 100_000_000)));
        check(None, Some(2.5), Ok((250, 250_000_000)));
        check(None, Some(0.015), Ok((1, 1_500_000)));
        check(None, Some(0.00000001), Err("hbarAmount"));
        check(None, Some(0.123456789), Err("hbarAmount"));
        check(None, Some(-1.0), Err("hbarAmount"));
        check(None, Some(f64::NAN), Err("hbarAmount"));
        check(Some(0), None, Err("credits"));
        check(Some(MAX_CREDITS + 1), None, Err("credits"));
        check(None, None, Err("credits"));
        // A price that does not divide evenly rounds the HBAR up.
        assert_eq!(amounts(Some(1), None, 3.0).unwrap(), (1, 33_333_334));
    }
}
