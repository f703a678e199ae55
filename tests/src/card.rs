//! A small card payment provider on 127.0.0.1 with Stripe's API for
//! payment intents, and as strict as Stripe where the api touches it:
//!
//! - `POST /v1/payment_intents` needs `Authorization: Bearer <secret>`
//!   (401 otherwise) and a form-encoded body (400 otherwise); every
//!   parameter must be one Stripe knows (`parameter_unknown`); `amount` is
//!   a whole number of at least 50 for USD (`amount_too_small`);
//!   `currency` is required (`parameter_missing`) and a known ISO code;
//!   metadata has at most 50 keys of up to 40 characters, values up to 500;
//!   a `customer` or `payment_method` must exist (`resource_missing`);
//! - `Idempotency-Key` (at most 255 characters): the same key with the
//!   same parameters answers the first intent again
//!   (`Idempotent-Replayed: true`); with other parameters, 400
//!   `idempotency_error`;
//! - errors are `{"error": {type, code, message, param}}`.
//!
//! The test pays an intent with [`CardProvider::send_event`], which posts a
//! signed webhook event (`Stripe-Signature: t=…,v1=HMAC-SHA256`) as Stripe
//! does.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use warp::http::{Response, StatusCode};
use warp::Filter;

const KNOWN: &[&str] =
    &["amount", "currency", "automatic_payment_methods[enabled]", "description", "customer", "payment_method"];
const CURRENCIES: &[&str] = &["usd", "eur", "gbp", "chf", "jpy"];

#[derive(Default)]
struct State {
    /// Intents by id.
    intents: BTreeMap<String, Value>,
    /// Idempotency key to the parameters and the answer.
    keys: HashMap<String, (Vec<(String, String)>, Value)>,
}

pub struct CardProvider {
    pub addr: SocketAddr,
    pub secret_key: String,
    state: Arc<Mutex<State>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

fn error(status: StatusCode, code: &str, message: &str, param: Option<&str>) -> warp::reply::Response {
    let mut detail = json!({"type": "invalid_request_error", "message": message, "code": code});
    if let Some(param) = param {
        detail["param"] = json!(param);
    }
    let mut response = Response::new(json!({"error": detail}).to_string().into());
    *response.status_mut() = status;
    response.headers_mut().insert("content-type", "application/json".parse().unwrap());
    response
}

fn ok(body: &Value, replayed: bool) -> warp::reply::Response {
    let mut response = Response::new(body.to_string().into());
    response.headers_mut().insert("content-type", "application/json".parse().unwrap());
    if replayed {
        response.headers_mut().insert("idempotent-replayed", "true".parse().unwrap());
    }
    response
}

impl CardProvider {
    pub async fn start(secret_key: &str) -> CardProvider {
        let state = Arc::new(Mutex::new(State::default()));
        let held = state.clone();
        let secret = secret_key.to_string();
        let route = warp::path!("v1" / "payment_intents")
            .and(warp::post())
            .and(warp::header::headers_cloned())
            .and(warp::body::bytes())
            .map(move |headers: warp::http::HeaderMap, body: bytes::Bytes| {
                let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
                if header("authorization") != format!("Bearer {secret}") {
                    let message = "Invalid API Key provided";
                    return error(StatusCode::UNAUTHORIZED, "api_key_invalid", message, None);
                }
                if !header("content-type").starts_with("application/x-www-form-urlencoded") {
                    let message =
                        "Invalid request (check that your POST content type is application/x-www-form-urlencoded)";
                    return error(StatusCode::BAD_REQUEST, "invalid_request", message, None);
                }
                let form: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
                create(&mut held.lock().unwrap(), form, header("idempotency-key"))
            });
        let (addr, tx) = crate::serve_on_loopback(route).await;
        CardProvider { addr, secret_key: secret_key.to_string(), state, shutdown: Some(tx) }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many intents were made.
    pub fn intents(&self) -> usize {
        self.state.lock().unwrap().intents.len()
    }

    /// The intent `id` as held.
    pub fn intent(&self, id: &str) -> Value {
        self.state.lock().unwrap().intents[id].clone()
    }

    /// Posts the event `kind` for intent `id` to `url`, signed with
    /// `secret` at `time` (seconds): the status answered.
    pub async fn send_event(&self, url: &str, kind: &str, id: &str, secret: &str, time: i64) -> (u16, Value) {
        use hmac::{Hmac, Mac};
        // An id it never made stands for an intent of another shop.
        let held = self.state.lock().unwrap().intents.get(id).cloned();
        let mut intent =
            held.unwrap_or_else(|| json!({"id": id, "object": "payment_intent", "amount": 100, "currency": "usd"}));
        if kind == "payment_intent.succeeded" {
            intent["status"] = json!("succeeded");
            intent["amount_received"] = intent["amount"].clone();
        }
        let event = json!({"id": format!("evt_{id}"), "object": "event", "type": kind, "data": {"object": intent}});
        let body = event.to_string();
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{time}.{body}").as_bytes());
        let signature: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
        let response = http_client::client()
            .post(url)
            .header("stripe-signature", format!("t={time},v1={signature}"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

impl Drop for CardProvider {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn create(state: &mut State, form: Vec<(String, String)>, key: &str) -> warp::reply::Response {
    if key.len() > 255 {
        let message = "Idempotency keys must be at most 255 characters";
        return error(StatusCode::BAD_REQUEST, "idempotency_key_too_long", message, None);
    }
    if !key.is_empty() {
        if let Some((params, answer)) = state.keys.get(key) {
            if *params != form {
                let message =
                    "Keys for idempotent requests can only be used with the same parameters they were first used with";
                return error(StatusCode::BAD_REQUEST, "idempotency_error", message, None);
            }
            return ok(answer, true);
        }
    }
    let mut fields = BTreeMap::new();
    let mut metadata = serde_json::Map::new();
    for (name, value) in &form {
        if let Some(inner) = name.strip_prefix("metadata[").and_then(|r| r.strip_suffix(']')) {
            if inner.chars().count() > 40 || value.chars().count() > 500 {
                let message = "Metadata keys can be at most 40 characters and values at most 500";
                return error(StatusCode::BAD_REQUEST, "parameter_invalid_string", message, Some("metadata"));
            }
            metadata.insert(inner.to_string(), json!(value));
        } else if KNOWN.contains(&name.as_str()) {
            fields.insert(name.clone(), value.clone());
        } else {
            let message = format!("Received unknown parameter: {name}");
            return error(StatusCode::BAD_REQUEST, "parameter_unknown", &message, Some(name));
        }
    }
    if metadata.len() > 50 {
        let message = "You can specify up to 50 keys";
        return error(StatusCode::BAD_REQUEST, "parameter_invalid_string", message, Some("metadata"));
    }
    let Some(amount) = fields.get("amount") else {
        return error(StatusCode::BAD_REQUEST, "parameter_missing", "Missing required param: amount.", Some("amount"));
    };
    let Ok(amount) = amount.parse::<i64>() else {
        return error(StatusCode::BAD_REQUEST, "parameter_invalid_integer", "Invalid integer", Some("amount"));
    };
    let Some(currency) = fields.get("currency") else {
        return error(
            StatusCode::BAD_REQUEST,
            "parameter_missing",
            "Missing required param: currency.",
            Some("currency"),
        );
    };
    if !CURRENCIES.contains(&currency.as_str()) {
        let message = format!("Invalid currency: {currency}");
        return error(StatusCode::BAD_REQUEST, "parameter_invalid_string", &message, Some("currency"));
    }
    if currency == "usd" && amount < 50 {
        let message = "Amount must be at least $0.50 usd";
        return error(StatusCode::BAD_REQUEST, "amount_too_small", message, Some("amount"));
    }
    for (param, known) in [("customer", "cus_test"), ("payment_method", "pm_card_visa")] {
        if let Some(value) = fields.get(param).filter(|v| *v != known) {
            let message = format!("No such {param}: '{value}'");
            return error(StatusCode::BAD_REQUEST, "resource_missing", &message, Some(param));
        }
    }
    let id = format!("pi_{:06}", state.intents.len() + 1);
    let intent = json!({
        "id": id,
        "object": "payment_intent",
        "amount": amount,
        "amount_received": 0,
        "currency": currency,
        "status": if fields.contains_key("payment_method") { "requires_confirmation" } else { "requires_payment_method" },
        "client_secret": format!("{id}_secret_{:x}", amount * 7919),
        "customer": fields.get("customer"),
        "description": fields.get("description"),
        "metadata": metadata,
        "livemode": false,
    });
    state.intents.insert(id, intent.clone());
    if !key.is_empty() {
        state.keys.insert(key.to_string(), (form, intent.clone()));
    }
    ok(&intent, false)
}
