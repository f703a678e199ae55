//! Buying credits against the real api binary on loopback, with real
//! peers: an HBAR payment intent opened and signed by the Hiero JavaScript
//! SDK (the wallet), submitted to a small network that checks it as a
//! consensus node does and shows it on a mirror node, and credited once
//! the api's watcher sees it; a card payment intent made at a small
//! Stripe-compatible provider and completed by its signed webhook.

use std::collections::BTreeSet;
use std::time::Duration;

use api::auth::login::{key_for, DEV_KEYS};
use base64::Engine as _;
use serde_json::{json, Value};
use tests::card::CardProvider;
use tests::live::Broker;
use tests::mirror::MirrorServer;
use tests::network;

const TREASURY: &str = "0.0.98765";
const NODES: [&str; 2] = ["0.0.3", "0.0.4"];
const OPERATOR: &str = "operator-secret-9";

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

fn keys(body: &Value) -> BTreeSet<String> {
    body.as_object().unwrap().keys().cloned().collect()
}

/// Waits until `check` holds of the account's balance.
async fn balance_becomes(broker: &Broker, key: &str, expected: i64) {
    let what = format!("the balance becoming {expected}");
    tests::wait::until(&what, 200, Duration::from_millis(50), async || broker.balance(key).await == expected).await;
}

/// Waits until the api's payment watcher has looked a transfer up on the
/// mirror node since the call: a round ran.
async fn watcher_looked(mirror: &MirrorServer) {
    let before = mirror.transaction_lookups();
    tests::wait::until("the payment watcher looking at the mirror node", 200, Duration::from_millis(50), async || {
        mirror.transaction_lookups() > before
    })
    .await;
}

fn intent_state(broker: &Broker, purchase: &str) -> String {
    let sql = "SELECT status || COALESCE(':' || outcome, '') FROM payment_intents WHERE id = ?1";
    broker.with_store(|s| s.query_row(sql, [purchase], |r| r.get(0))).unwrap()
}

async fn state_becomes(broker: &Broker, purchase: &str, expected: &str) {
    let what = format!("intent {purchase} becoming {expected}");
    tests::wait::until(&what, 200, Duration::from_millis(50), async || {
        intent_state(broker, purchase).starts_with(expected)
    })
    .await;
}

/// The hosted broker's name for the HBAR intent (`native` is the spec's
/// neutral word for it, an alias: `broker_live`).
const NATIVE_INTENT: &str = "/api/v1/credits/payments/hbar/intent";

/// A mirror node and the small network behind it, which know the dev
/// accounts 0.0.1001 (ED25519, `buyer`), 0.0.1002 and 0.0.1004 (ECDSA,
/// `ecdsa`); an api selling credits for HBAR paid to the treasury, its
/// watcher looking every 100 ms.
struct Native {
    mirror: MirrorServer,
    broker: Broker,
    buyer: String,
    ecdsa: String,
}

impl Native {
    async fn start(label: &str) -> Native {
        let mirror = MirrorServer::start(Default::default(), Duration::ZERO).await;
        for account in ["0.0.1001", "0.0.1002", "0.0.1004"] {
            network::known(&mirror, account);
        }
        let (url, nodes) = (mirror.url(), NODES.join(","));
        let flags = ["--mirror-url", &url, "--treasury-account", TREASURY, "--ledger-node", &nodes];
        let watch = ["--purchase-watch-ms", "100", "--purchase-grace-secs", "0", "--operator-key", OPERATOR];
        let broker = Broker::start(label, &[&flags[..], &watch].concat());
        let buyer = broker.sign_in("0.0.1001").await;
        let ecdsa = broker.sign_in("0.0.1004").await;
        Native { mirror, broker, buyer, ecdsa }
    }

    /// An intent opened by the holder of `key` for `body`.
    async fn intent(&self, key: &str, body: Value) -> Value {
        let (status, intent) = self.broker.send("POST", NATIVE_INTENT, Some(key), Some(body)).await;
        assert_eq!(status, 200, "{intent}");
        intent
    }

    /// `transaction` (bytes, base64) signed with the dev `account`'s key
    /// and submitted to the network: its answer.
    fn pay(&self, transaction: &str, account: &str) -> Result<(), &'static str> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(transaction).unwrap();
        let key = key_for(DEV_KEYS, account).unwrap();
        network::submit(&self.mirror, &NODES, &network::sign(&bytes, &key), now())
    }
}

/// Refusals: no key, another's account, no amount, bad amounts, an
/// account that cannot pay HBAR. Nothing is stored.
#[tokio::test(flavor = "multi_thread")]
async fn an_hbar_intent_refused_stores_nothing() {
    let native = Native::start("payments-native-refusals").await;
    let buyer = native.buyer.as_str();
    let cases: [(Option<&str>, Value, u16, &str); 7] = [
        (None, json!({"credits": 10}), 401, "auth_required"),
        (Some(buyer), json!({"credits": 10, "accountId": "0.0.1002"}), 403, "forbidden"),
        (Some(buyer), json!({}), 400, "invalid_body"),
        (Some(buyer), json!({"credits": 0}), 400, "invalid_body"),
        (Some(buyer), json!({"hbarAmount": 0.123456789}), 400, "invalid_body"),
        (Some(buyer), json!({"credits": 10, "payerKey": "302e…"}), 400, "invalid_body"),
        (
            Some(OPERATOR),
            json!({"credits": 10, "accountId": format!("0x{}", "ab".repeat(20))}),
            400,
            "ledger_account_required",
        ),
    ];
    for (key, body, status, code) in cases {
        let (got, answer) = native.broker.send("POST", NATIVE_INTENT, key, Some(body.clone())).await;
        assert_eq!((got, answer["code"].as_str().unwrap_or_default()), (status, code), "{body}: {answer}");
    }
    assert_eq!(native.broker.rows("payment_intents"), 0);
}

/// The intent: every field of the hosted schema, and nothing else,
/// pending until paid; HBAR listed as the one provider.
#[tokio::test(flavor = "multi_thread")]
async fn an_hbar_intent_holds_the_hosted_schemas_fields() {
    let native = Native::start("payments-native-intent").await;
    let intent = native.intent(&native.buyer, json!({"credits": 250})).await;
    let expected: BTreeSet<String> = [
        "transaction",
        "transactionId",
        "network",
        "accountId",
        "treasuryAccountId",
        "hbarAmount",
        "credits",
        "tinybarAmount",
        "memo",
        "centsPerHbar",
        "validStart",
        "validDurationSeconds",
        "requiresManualSubmit",
        "purchaseId",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(keys(&intent), expected);
    assert_eq!(
        (&intent["accountId"], &intent["treasuryAccountId"], &intent["credits"], &intent["tinybarAmount"]),
        (&json!("0.0.1001"), &json!(TREASURY), &json!(250), &json!(250_000_000))
    );
    assert_eq!(
        (&intent["hbarAmount"], &intent["network"], &intent["centsPerHbar"]),
        (&json!(2.5), &json!("testnet"), &json!(17.0))
    );
    assert_eq!(intent_state(&native.broker, intent["purchaseId"].as_str().unwrap()), "pending");
    let (_, providers) = native.broker.send("GET", "/api/v1/credits/providers", None, None).await;
    assert_eq!(
        providers,
        json!({"providers": [{"name": "hbar", "publishableKey": "", "currency": "HBAR", "centsPerHbar": 17.0}]})
    );
}

/// The wallet (the Hiero JS SDK) reads the transfer the intent says and
/// signs it; the network refuses the unsigned bytes and takes the signed
/// once; seen on the mirror node, it is credited once, with the
/// transaction's id, also across a restart. One never paid waits within
/// its window, then expires.
#[tokio::test(flavor = "multi_thread")]
async fn an_hbar_purchase_signed_by_the_wallet_is_credited_once() {
    let mut native = Native::start("payments-native").await;
    let (buyer, mirror) = (native.buyer.clone(), &native.mirror);
    let intent = native.intent(&buyer, json!({"credits": 250})).await;
    let wallet = tests::reference_client("wallet.mjs", &[&intent.to_string(), &network::private_key("0.0.1001")]).await;
    let read = &wallet["sign"]["value"]["read"];
    assert_eq!((&read["nodes"], &read["validSeconds"]), (&json!(NODES), &json!(180)), "{read}");
    let signed =
        base64::engine::general_purpose::STANDARD.decode(wallet["sign"]["value"]["signed"].as_str().unwrap()).unwrap();
    let unsigned = base64::engine::general_purpose::STANDARD.decode(intent["transaction"].as_str().unwrap()).unwrap();
    assert_eq!(network::submit(mirror, &NODES, &unsigned, now()), Err("INVALID_SIGNATURE"));
    assert_eq!(network::submit(mirror, &NODES, &signed, now()), Ok(()));
    assert_eq!(network::submit(mirror, &NODES, &signed, now()), Err("DUPLICATE_TRANSACTION"));

    let purchase = intent["purchaseId"].as_str().unwrap();
    balance_becomes(&native.broker, &buyer, 250).await;
    state_becomes(&native.broker, purchase, "completed").await;
    let (_, list) = native.broker.send("GET", "/api/v1/credits/transactions?type=purchase", Some(&buyer), None).await;
    // The mirror's form of the id: 0.0.1001@s.n is 0.0.1001-s-n.
    let (payer, time) = intent["transactionId"].as_str().unwrap().split_once('@').unwrap();
    assert_eq!(list["transactions"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["transactions"][0]["externalReference"], json!(format!("{payer}-{}", time.replace('.', "-"))));
    assert_eq!(list["transactions"][0]["amount"], json!(250));

    let unpaid = native.intent(&buyer, json!({"credits": 5})).await["purchaseId"].as_str().unwrap().to_string();
    // Killed and started again, the api pays nothing twice: once its
    // watcher has looked at the mirror node again, the purchase is one.
    native.broker.restart(&[]);
    watcher_looked(&native.mirror).await;
    let broker = &native.broker;
    assert_eq!(intent_state(broker, &unpaid), "pending", "within its window it waits");
    assert_eq!(broker.balance(&buyer).await, 250);
    let purchases = "SELECT COUNT(*) FROM credit_transactions WHERE kind = 'purchase'";
    assert_eq!(broker.with_store(|s| s.query_row(purchases, [], |r| r.get::<i64>(0))).unwrap(), 1);
    // Once its window and grace have passed.
    let expire = "UPDATE payment_intents SET expires_at = 0 WHERE id = ?1";
    broker.with_store(|s| s.execute(expire, [&unpaid])).unwrap();
    state_becomes(broker, &unpaid, "expired").await;
    assert_eq!(broker.balance(&buyer).await, 250);
}

/// A transfer that pays the treasury less than the intent fails it.
#[tokio::test(flavor = "multi_thread")]
async fn a_transfer_short_of_its_intent_fails_it() {
    let native = Native::start("payments-native-short").await;
    let before = native.broker.balance(&native.buyer).await;
    let short = native.intent(&native.buyer, json!({"hbarAmount": 1.5})).await;
    assert_eq!((&short["credits"], &short["tinybarAmount"]), (&json!(150), &json!(150_000_000)));
    let short_bytes = base64::engine::general_purpose::STANDARD.decode(short["transaction"].as_str().unwrap()).unwrap();
    let mut list: api::broker::hapi::TransactionList = prost::Message::decode(short_bytes.as_slice()).unwrap();
    for transaction in &mut list.transactions {
        let mut one: api::broker::hapi::SignedTransaction =
            prost::Message::decode(transaction.signed_transaction_bytes.as_slice()).unwrap();
        let mut body: api::broker::hapi::TransactionBody = prost::Message::decode(one.body_bytes.as_slice()).unwrap();
        for leg in &mut body.crypto_transfer.as_mut().unwrap().transfers.as_mut().unwrap().account_amounts {
            leg.amount = leg.amount.signum() * 1_000;
        }
        one.body_bytes = prost::Message::encode_to_vec(&body);
        transaction.signed_transaction_bytes = prost::Message::encode_to_vec(&one);
    }
    let edited = base64::engine::general_purpose::STANDARD.encode(prost::Message::encode_to_vec(&list));
    assert_eq!(native.pay(&edited, "0.0.1001"), Ok(()));
    let short_id = short["purchaseId"].as_str().unwrap();
    state_becomes(&native.broker, short_id, "failed:the treasury received 1000 of 150000000 tinybars").await;
    assert_eq!(native.broker.balance(&native.buyer).await, before);
}

/// An ECDSA account signs the same way (keccak256 of the body).
#[tokio::test(flavor = "multi_thread")]
async fn an_ecdsa_account_pays_the_same_way() {
    let native = Native::start("payments-native-ecdsa").await;
    let intent = native.intent(&native.ecdsa, json!({"credits": 40})).await;
    assert_eq!(native.pay(intent["transaction"].as_str().unwrap(), "0.0.1004"), Ok(()));
    balance_becomes(&native.broker, &native.ecdsa, 40).await;
}

const CARD_INTENT: &str = "/api/v1/credits/payments/intent";
const WEBHOOK_SECRET: &str = "whsec_almanac";
const SUCCEEDED: &str = "payment_intent.succeeded";

/// A small Stripe-compatible provider and an api selling credits through
/// it; `buyer` is 0.0.1001, granted `granted` credits at its sign-in.
struct Card {
    provider: CardProvider,
    broker: Broker,
    buyer: String,
    granted: i64,
}

impl Card {
    async fn start(label: &str) -> Card {
        let provider = CardProvider::start("sk_test_almanac").await;
        let url = provider.url();
        let keys = ["--card-secret-key", "sk_test_almanac", "--card-publishable-key", "pk_test_almanac"];
        let flags = [&["--card-provider-url", &url][..], &keys, &["--card-webhook-secret", WEBHOOK_SECRET]].concat();
        let broker = Broker::start(label, &flags);
        let buyer = broker.sign_in("0.0.1001").await;
        let granted = broker.balance(&buyer).await;
        Card { provider, broker, buyer, granted }
    }

    /// An intent the buyer opens for `body`.
    async fn intent(&self, body: Value) -> Value {
        let (status, intent) = self.broker.send("POST", CARD_INTENT, Some(&self.buyer), Some(body)).await;
        assert_eq!(status, 200, "{intent}");
        intent
    }

    /// The provider's `event` for intent `id`, signed by `secret` at `at`,
    /// sent to the api's webhook.
    async fn event(&self, event: &str, id: &str, secret: &str, at: i64) -> (u16, Value) {
        let webhook = self.broker.api.url("/api/v1/credits/payments/webhook");
        self.provider.send_event(&webhook, event, id, secret, at).await
    }
}

/// Refusals store nothing, here or at the provider.
#[tokio::test(flavor = "multi_thread")]
async fn a_card_intent_refused_is_made_nowhere() {
    let card = Card::start("payments-card-refusals").await;
    let buyer = Some(card.buyer.as_str());
    for (key, body, status, code) in [
        (None, json!({"amount": 500}), 401, "auth_required"),
        (buyer, json!({}), 400, "invalid_body"),
        (buyer, json!({"amount": 40}), 400, "amount_out_of_range"),
        (buyer, json!({"amount": 500, "currency": "eur"}), 400, "unsupported_currency"),
        (buyer, json!({"amount": 500, "credits": 1}), 400, "invalid_body"),
        (buyer, json!({"amount": 500, "metadata": {"k": {"nested": 1}}}), 400, "invalid_body"),
        (buyer, json!({"amount": 500, "customerId": "cus_missing"}), 400, "payment_provider_refused"),
        (buyer, json!({"amount": 500, "idempotencyKey": "k".repeat(256)}), 400, "invalid_idempotency_key"),
    ] {
        let (got, answer) = card.broker.send("POST", CARD_INTENT, key, Some(body.clone())).await;
        assert_eq!((got, answer["code"].as_str().unwrap_or_default()), (status, code), "{body}: {answer}");
    }
    assert_eq!((card.broker.rows("payment_intents"), card.provider.intents()), (0, 0));
}

/// The intent holds the hosted schema's fields; metadata the client sends
/// cannot pose as the broker's own; the same key gives the same intent,
/// made once, and another amount under it is 409.
#[tokio::test(flavor = "multi_thread")]
async fn a_card_intent_is_made_once_per_idempotency_key() {
    let card = Card::start("payments-card-intent").await;
    let body = json!({"amount": 500, "idempotencyKey": "order-1", "metadata": {"accountId": "0.0.9", "order": 1}});
    let intent = card.intent(body.clone()).await;
    let allowed: BTreeSet<String> = [
        "success",
        "provider",
        "intentId",
        "clientSecret",
        "status",
        "amount",
        "currency",
        "credits",
        "publishableKey",
        "customerId",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(keys(&intent), allowed);
    // 500 cents at 17 cents an HBAR and 100 credits an HBAR.
    assert_eq!(
        (&intent["credits"], &intent["provider"], &intent["publishableKey"], &intent["status"]),
        (&json!(2941), &json!("stripe"), &json!("pk_test_almanac"), &json!("requires_payment_method"))
    );
    let held = card.provider.intent(intent["intentId"].as_str().unwrap());
    assert_eq!((&held["metadata"]["accountId"], &held["metadata"]["order"]), (&json!("0.0.1001"), &json!("1")));
    assert_eq!((card.intent(body).await, card.provider.intents()), (intent, 1));
    let conflict = json!({"amount": 600, "idempotencyKey": "order-1"});
    let (status, conflict) = card.broker.send("POST", CARD_INTENT, Some(&card.buyer), Some(conflict)).await;
    assert_eq!((status, &conflict["code"]), (409, &json!("idempotency_key_reused")));
    let (_, providers) = card.broker.send("GET", "/api/v1/credits/providers", None, None).await;
    assert_eq!(
        providers,
        json!({"providers": [{"name": "stripe", "publishableKey": "pk_test_almanac", "currency": "usd"}]})
    );
}

/// The webhook: a bad signature or a stale one changes nothing; the good
/// one credits once, however often it comes.
#[tokio::test(flavor = "multi_thread")]
async fn the_signed_webhook_credits_a_card_purchase_once() {
    let card = Card::start("payments-card-webhook").await;
    let intent = card.intent(json!({"amount": 500})).await;
    let id = intent["intentId"].as_str().unwrap();
    let (status, answer) = card.event(SUCCEEDED, id, "whsec_other", now()).await;
    assert_eq!((status, &answer["code"]), (400, &json!("invalid_signature")));
    assert_eq!(card.event(SUCCEEDED, id, WEBHOOK_SECRET, now() - 3600).await.0, 400);
    assert_eq!(card.broker.balance(&card.buyer).await, card.granted);
    for _ in 0..2 {
        let (status, answer) = card.event(SUCCEEDED, id, WEBHOOK_SECRET, now()).await;
        assert_eq!((status, &answer["status"]), (200, &json!("completed")), "{answer}");
    }
    assert_eq!(card.broker.balance(&card.buyer).await, card.granted + 2941);
    let purchases = "/api/v1/credits/transactions?type=purchase";
    let (_, list) = card.broker.send("GET", purchases, Some(&card.buyer), None).await;
    assert_eq!(list["transactions"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["transactions"][0]["externalReference"], json!(id));
}

/// A canceled intent fails; an intent not made here is acknowledged and
/// ignored (the provider would retry anything else). Neither credits.
#[tokio::test(flavor = "multi_thread")]
async fn a_canceled_card_intent_fails_and_a_foreign_one_is_ignored() {
    let card = Card::start("payments-card-canceled").await;
    let intent = card.intent(json!({"amount": 100})).await;
    let (status, answer) =
        card.event("payment_intent.canceled", intent["intentId"].as_str().unwrap(), WEBHOOK_SECRET, now()).await;
    assert_eq!((status, &answer["status"]), (200, &json!("failed")));
    let (status, answer) = card.event(SUCCEEDED, "pi_elsewhere", WEBHOOK_SECRET, now()).await;
    assert_eq!((status, &answer["handled"]), (200, &json!(false)));
    assert_eq!(card.broker.balance(&card.buyer).await, card.granted);
}

#[tokio::test(flavor = "multi_thread")]
async fn unconfigured_purchases_and_redemption_answer_503_and_no_providers_are_listed() {
    let broker = Broker::start("payments-none", &[]);
    let key = broker.sign_in("0.0.1001").await;
    for path in ["/api/v1/credits/payments/native/intent", "/api/v1/credits/payments/intent"] {
        let (status, body) = broker.send("POST", path, Some(&key), Some(json!({"amount": 500, "credits": 5}))).await;
        assert_eq!((status, &body["code"]), (503, &json!("not_configured")), "{path}: {body}");
    }
    let (status, body) = broker.send("POST", "/api/v1/credits/payments/webhook", None, Some(json!({}))).await;
    assert_eq!((status, &body["code"]), (503, &json!("not_configured")));
    for (method, path) in [("GET", "/api/v1/credits/redeem-points/quote"), ("POST", "/api/v1/credits/redeem-points")] {
        let (status, body) = broker.send(method, path, Some(&key), None).await;
        assert_eq!((status, &body["code"]), (503, &json!("not_configured")), "{path}: {body}");
    }
    assert_eq!(broker.send("GET", "/api/v1/credits/providers", None, None).await.1, json!({"providers": []}));
}

#[tokio::test(flavor = "multi_thread")]
async fn points_are_redeemed_once_each_even_when_asked_for_at_once() {
    let flags = ["--redeem-token", "0.0.5000001:luna0", "--credits-per-point", "2", "--operator-key", OPERATOR];
    let broker = Broker::start("payments-redeem", &flags);
    let (quote, redeem) = ("/api/v1/credits/redeem-points/quote", "/api/v1/credits/redeem-points");
    // 0.0.1004 holds 4668 luna0 in the checked-in ledger; 0.0.1001 none.
    let holder = broker.sign_in("0.0.1004").await;
    let other = broker.sign_in("0.0.1001").await;
    let granted = broker.balance(&holder).await;

    for (method, path, key, body, status, code) in [
        ("GET", quote.to_string(), None, None, 401, "auth_required"),
        ("POST", redeem.to_string(), None, None, 401, "auth_required"),
        ("GET", format!("{quote}?accountId=0.0.1001"), Some(holder.as_str()), None, 403, "forbidden"),
        ("POST", redeem.to_string(), Some(&holder), Some(json!({"accountId": "0.0.1001"})), 403, "forbidden"),
        ("GET", quote.to_string(), Some(OPERATOR), None, 400, "account_id_required"),
        (
            "GET",
            format!("{quote}?accountId=0x{}", "ab".repeat(20)),
            Some(OPERATOR),
            None,
            400,
            "ledger_account_required",
        ),
        ("POST", redeem.to_string(), Some(&holder), Some(json!({"points": 0})), 400, "invalid_body"),
        ("POST", redeem.to_string(), Some(&holder), Some(json!({"points": 5000})), 400, "nothing_to_redeem"),
        ("POST", redeem.to_string(), Some(&other), None, 400, "nothing_to_redeem"),
    ] {
        let (got, answer) = broker.send(method, &path, key, body.clone()).await;
        assert_eq!((got, answer["code"].as_str().unwrap_or_default()), (status, code), "{path} {body:?}: {answer}");
    }
    assert_eq!(broker.rows("point_redemptions"), 0);

    let (status, offer) = broker.send("GET", quote, Some(&holder), None).await;
    assert_eq!(status, 200, "{offer}");
    assert_eq!(
        (&offer["points"], &offer["availablePoints"], &offer["credits"], &offer["balance"]),
        (&json!(4668), &json!(4668), &json!(9336), &json!(granted))
    );
    let (status, done) = broker.send("POST", redeem, Some(&holder), Some(json!({"points": 1000}))).await;
    assert_eq!(
        (status, &done["creditedCredits"], &done["balance"]),
        (200, &json!(2000), &json!(granted + 2000)),
        "{done}"
    );

    // Eight at once, each asking for all that remains: one gets it.
    let asks = (0..8).map(|_| broker.send("POST", redeem, Some(&holder), None));
    let answers = futures_util::future::join_all(asks).await;
    let won: Vec<_> = answers.iter().filter(|(status, _)| *status == 200).collect();
    assert_eq!(won.len(), 1, "{answers:?}");
    assert_eq!(won[0].1["redeemedPoints"], json!(3668));
    assert!(answers.iter().all(|(s, a)| *s == 200 || a["code"] == json!("nothing_to_redeem")));
    assert_eq!(broker.balance(&holder).await, granted + 9336);
    let (_, offer) = broker.send("GET", quote, Some(&holder), None).await;
    assert_eq!((&offer["redeemedPoints"], &offer["availablePoints"]), (&json!(4668), &json!(0)));
    let (_, list) = broker.send("GET", "/api/v1/credits/transactions?type=redemption", Some(&holder), None).await;
    assert_eq!(list["total"], json!(2), "{list}");
}
