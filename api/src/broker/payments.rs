//! What pays for credits, and how a payment is seen (spec section 4,
//! Credits): the treasury for HBAR transfers, watched on the mirror node,
//! and a card payment provider with a Stripe-compatible HTTP API, whose
//! webhook reports payments. The routes are in [`super::intents`].
//!
//! Credits are issued when the payment is seen, never when the intent is
//! made; the purchase posted then carries the payment's own reference
//! (the Hedera transaction id, the provider's intent id) as its
//! idempotency key, so a payment seen twice pays once.

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;
use shared::entity::EntityId;

use super::mirror;
use crate::store::payments::{self, Intent, Method, Settlement, State};
use crate::store::{self, Store};

/// Redemption of points: an HCS-20 token whose balances in the current
/// build are points, and what one point pays.
#[derive(Clone, Debug)]
pub struct Redemption {
    pub topic: EntityId,
    pub tick: String,
    pub credits_per_point: i64,
}

impl Redemption {
    /// The token as stored and answered: `tick@topic`.
    pub fn token(&self) -> String {
        format!("{}@{}", self.tick, self.topic)
    }
}

/// HBAR purchases: transfers to the treasury, seen on the mirror node.
pub struct Treasury {
    pub account: EntityId,
    /// The network's name as answered (`testnet`).
    pub network: String,
    /// The nodes a wallet may submit the transfer to (one transaction each).
    pub nodes: Vec<EntityId>,
    /// The most the payer pays in fees, in tinybars.
    pub max_fee: u64,
    /// How long the transfer may be submitted after its valid start (the
    /// network allows 180 s at most).
    pub valid_seconds: i64,
    /// How often pending transfers are looked up.
    pub watch_every: Duration,
    /// How long past its window a transfer is still looked for (the mirror
    /// node lags consensus by seconds).
    pub grace: Duration,
    pub mirror: reqwest::Client,
    pub mirror_base: String,
}

/// What the mirror node says of a transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Not (yet) on the mirror node.
    Missing,
    Paid,
    /// Reached consensus but did not pay: why.
    Unpaid(String),
}

impl Treasury {
    /// Looks up the transfer of `intent` (`GET /api/v1/transactions/{id}`).
    pub async fn look_up(&self, intent: &Intent) -> anyhow::Result<Seen> {
        let found = mirror::transactions(&self.mirror, &self.mirror_base, &intent.reference).await?;
        Ok(found.map_or(Seen::Missing, |found| self.judge(intent, &found)))
    }

    /// Whether `transactions` (those of the intent's id) paid it: the
    /// payer's own transaction, successful, a crypto transfer giving the
    /// treasury at least the amount.
    fn judge(&self, intent: &Intent, transactions: &mirror::Listed) -> Seen {
        let Some(transfer) = transactions.own() else {
            return Seen::Missing;
        };
        if transfer.result != "SUCCESS" {
            return Seen::Unpaid(format!("the transfer failed on the ledger: {}", transfer.result));
        }
        if transfer.name != "CRYPTOTRANSFER" {
            return Seen::Unpaid(format!("the transaction is a {}, not a transfer", transfer.name));
        }
        let treasury = self.account.to_string();
        let received: i64 = transfer.transfers.iter().filter(|t| t.account == treasury).map(|t| t.amount).sum();
        if received < intent.amount {
            return Seen::Unpaid(format!("the treasury received {received} of {} tinybars", intent.amount));
        }
        Seen::Paid
    }

    /// Settles what the mirror node shows of every pending transfer, once.
    pub async fn round(&self, store: &Store) {
        let pending = match store.read(|conn| payments::pending(conn, Method::Native)).await {
            Ok(pending) => pending,
            Err(e) => return tracing::error!(error = %e, "payments: pending transfers cannot be read"),
        };
        for intent in pending {
            let settlement = match self.look_up(&intent).await {
                Ok(Seen::Paid) => Settlement::Paid,
                Ok(Seen::Unpaid(why)) => Settlement::Unpaid(State::Failed, why),
                Ok(Seen::Missing) => {
                    let deadline = intent.expires_at.unwrap_or(intent.created_at) + self.grace.as_millis() as i64;
                    if store::now_ms() <= deadline {
                        continue;
                    }
                    let why = "the transfer was not seen on the mirror node within its valid window".to_string();
                    Settlement::Unpaid(State::Expired, why)
                }
                Err(e) => {
                    tracing::warn!(error = format!("{e:#}"), purchase = intent.id, "payments: lookup failed");
                    continue;
                }
            };
            let id = intent.id.clone();
            let settled = store.write(move |conn| payments::settle(conn, &id, &settlement, store::now_ms())).await;
            match settled {
                Ok(state) => tracing::info!(purchase = intent.id, state = state.as_str(), "payments: transfer settled"),
                Err(e) => tracing::error!(error = %e, purchase = intent.id, "payments: cannot settle"),
            }
        }
    }

    /// Watches pending transfers until `stop`.
    pub async fn watch(self: std::sync::Arc<Self>, store: Store, stop: impl std::future::Future<Output = ()>) {
        let mut tick = tokio::time::interval(self.watch_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = tick.tick() => self.round(&store).await,
            }
        }
    }
}

/// Card purchases through a payment provider with a Stripe-compatible API
/// (`POST {base}/v1/payment_intents`, form-encoded, bearer secret key,
/// `Idempotency-Key`), paid when its signed webhook says so.
pub struct Card {
    /// The provider's name as answered (`stripe`).
    pub name: String,
    pub base: String,
    pub secret_key: String,
    pub publishable_key: String,
    /// The webhook signing secret; without it no card payment completes.
    pub webhook_secret: Option<String>,
    /// How old a webhook's signed timestamp may be.
    pub tolerance: Duration,
    /// Smallest amount, in cents (Stripe's is 50 for USD).
    pub min_amount: i64,
    pub client: reqwest::Client,
}

/// A payment intent as the provider answers it.
#[derive(Clone, Debug, Deserialize)]
pub struct ProviderIntent {
    pub id: String,
    pub client_secret: String,
    pub status: String,
    pub amount: i64,
    pub currency: String,
    #[serde(default)]
    pub customer: Option<String>,
}

/// Why the provider made no intent.
#[derive(Debug)]
pub enum ProviderError {
    /// It refused the request (4xx): its message.
    Refused(String),
    /// It could not be reached, or failed (5xx, a timeout, a bad answer).
    Unavailable(String),
}

#[derive(Deserialize)]
struct ProviderFailure {
    error: ProviderFailureDetail,
}

#[derive(Deserialize)]
struct ProviderFailureDetail {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    code: Option<String>,
}

impl Card {
    /// Creates (or, for a key it has seen, returns again) a payment
    /// intent: `form` is the request's fields, `key` the idempotency key.
    pub async fn create(&self, form: &[(String, String)], key: &str) -> Result<ProviderIntent, ProviderError> {
        let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let response = self
            .client
            .post(format!("{}/v1/payment_intents", self.base))
            .bearer_auth(&self.secret_key)
            .header("idempotency-key", key)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|e| ProviderError::Unavailable(format!("the payment provider cannot be reached: {e}")))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| ProviderError::Unavailable(format!("the payment provider's answer was cut: {e}")))?;
        if status.is_client_error() {
            let detail = serde_json::from_str::<ProviderFailure>(&text).ok().map(|f| f.error);
            let message = detail
                .map(|d| match (d.code, d.message) {
                    (Some(code), Some(message)) => format!("{code}: {message}"),
                    (code, message) => message.or(code).unwrap_or_default(),
                })
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| format!("refused with {status}"));
            return Err(ProviderError::Refused(format!("the payment provider refused: {message}")));
        }
        if !status.is_success() {
            return Err(ProviderError::Unavailable(format!("the payment provider failed with {status}")));
        }
        serde_json::from_str(&text)
            .map_err(|e| ProviderError::Unavailable(format!("the payment provider's answer is not an intent: {e}")))
    }

    /// Whether `header` (`Stripe-Signature: t=…,v1=…`) signs `body` with
    /// the webhook secret, at a time within the tolerance of `now` (s).
    pub fn signed(&self, header: &str, body: &[u8], now: i64) -> Result<(), &'static str> {
        let Some(secret) = &self.webhook_secret else { return Err("no webhook secret is configured") };
        let mut time = None;
        let mut signatures = Vec::new();
        for part in header.split(',') {
            match part.trim().split_once('=') {
                Some(("t", value)) => time = value.parse::<i64>().ok(),
                Some(("v1", value)) => signatures.extend(crate::auth::signature::decode_hex(value)),
                _ => {}
            }
        }
        let time = time.ok_or("the signature header has no timestamp")?;
        if (now - time).abs() > self.tolerance.as_secs() as i64 {
            return Err("the signature's timestamp is outside the tolerance");
        }
        let matches = signatures.iter().any(|signature| {
            let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
            mac.update(time.to_string().as_bytes());
            mac.update(b".");
            mac.update(body);
            mac.verify_slice(signature).is_ok()
        });
        if matches {
            Ok(())
        } else {
            Err("no signature matches")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn treasury() -> Treasury {
        Treasury {
            account: "0.0.98765".parse().unwrap(),
            network: "testnet".into(),
            nodes: vec!["0.0.3".parse().unwrap()],
            max_fee: 100_000_000,
            valid_seconds: 180,
            watch_every: Duration::from_secs(1),
            grace: Duration::from_secs(60),
            mirror: http_client::client(),
            mirror_base: String::new(),
        }
    }

    /// Each case: the mirror node's transactions for the id, and the verdict.
    #[test]
    fn a_transfer_pays_only_when_it_succeeded_and_paid_the_treasury_enough() {
        let intent = Intent {
            id: "p".into(),
            method: Method::Native,
            account: "0.0.1001".into(),
            credits: 100,
            amount: 500,
            currency: "HBAR".into(),
            reference: "0.0.1001-1700000000-000000001".into(),
            idempotency_key: None,
            answer: "{}".into(),
            state: State::Pending,
            outcome: None,
            created_at: 0,
            expires_at: None,
        };
        let check = |transactions: serde_json::Value, expected: Seen| {
            let found: mirror::Listed = serde_json::from_value(transactions.clone()).unwrap();
            assert_eq!(treasury().judge(&intent, &found), expected, "{transactions}");
        };
        let transfer = |result: &str, to_treasury: i64| {
            serde_json::json!({"name": "CRYPTOTRANSFER", "result": result, "scheduled": false, "nonce": 0,
                "transfers": [{"account": "0.0.1001", "amount": -to_treasury - 7}, {"account": "0.0.98765", "amount": to_treasury},
                              {"account": "0.0.3", "amount": 7}]})
        };
        check(serde_json::json!({"transactions": []}), Seen::Missing);
        check(serde_json::json!({"transactions": [transfer("SUCCESS", 500)]}), Seen::Paid);
        check(serde_json::json!({"transactions": [transfer("SUCCESS", 900)]}), Seen::Paid);
        check(
            serde_json::json!({"transactions": [transfer("SUCCESS", 499)]}),
            Seen::Unpaid("the treasury received 499 of 500 tinybars".into()),
        );
        check(
            serde_json::json!({"transactions": [transfer("INSUFFICIENT_PAYER_BALANCE", 0)]}),
            Seen::Unpaid("the transfer failed on the ledger: INSUFFICIENT_PAYER_BALANCE".into()),
        );
        // A child or scheduled transaction of the same id is not the transfer.
        let mut child = transfer("SUCCESS", 500);
        child["nonce"] = 1.into();
        check(serde_json::json!({"transactions": [child]}), Seen::Missing);
        let mut other = transfer("SUCCESS", 500);
        other["name"] = "CONSENSUSSUBMITMESSAGE".into();
        check(
            serde_json::json!({"transactions": [other]}),
            Seen::Unpaid("the transaction is a CONSENSUSSUBMITMESSAGE, not a transfer".into()),
        );
    }

    #[test]
    fn webhook_signatures_are_checked_against_the_secret_and_the_clock() {
        let card = Card {
            name: "stripe".into(),
            base: String::new(),
            secret_key: "sk".into(),
            publishable_key: "pk".into(),
            webhook_secret: Some("whsec_test".into()),
            tolerance: Duration::from_secs(300),
            min_amount: 50,
            client: http_client::client(),
        };
        let body = br#"{"type":"payment_intent.succeeded"}"#;
        let sign = |time: i64, secret: &str| {
            let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
            mac.update(format!("{time}.").as_bytes());
            mac.update(body);
            shared::http::hex(&mac.finalize().into_bytes())
        };
        let now = 1_800_000_000;
        let good = sign(now, "whsec_test");
        let check = |header: String, expected: Result<(), &str>| {
            assert_eq!(card.signed(&header, body, now), expected, "{header}");
        };
        check(format!("t={now},v1={good}"), Ok(()));
        check(format!("t={now},v1=00,v1={good},v0=ff"), Ok(()));
        check(format!("t={},v1={}", now - 299, sign(now - 299, "whsec_test")), Ok(()));
        check(format!("t={now},v1={}", sign(now, "whsec_other")), Err("no signature matches"));
        check(format!("t={},v1={good}", now + 1), Err("no signature matches"));
        check(
            format!("t={},v1={}", now - 301, sign(now - 301, "whsec_test")),
            Err("the signature's timestamp is outside the tolerance"),
        );
        check(format!("v1={good}"), Err("the signature header has no timestamp"));
        check(String::new(), Err("the signature header has no timestamp"));
    }
}
