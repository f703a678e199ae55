//! Calling the broker's live routes from a test: one JSON call, and the
//! sign-in proof of a dev account's Hedera key.

use api::auth::signature::SigningKey;
use base64::Engine as _;
use serde_json::{json, Value};

/// `method url` with `headers` and a JSON `body`: the status and the body
/// (as a JSON string when it is not JSON).
pub async fn call(
    client: &reqwest::Client,
    method: &str,
    url: String,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = client.request(method.parse().unwrap(), url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The verify body answering `challenge` for a Hedera `account` with its
/// `key`: the raw signature of the message, base64, and the DER public key.
pub fn hedera_proof(challenge: &Value, account: &str, key: &SigningKey) -> Value {
    let message = challenge["message"].as_str().unwrap();
    json!({
        "challengeId": challenge["challengeId"],
        "accountId": account,
        "network": "testnet",
        "signature": base64::engine::general_purpose::STANDARD.encode(key.sign(message.as_bytes())),
        "signatureKind": "raw",
        "publicKey": key.public_key().to_der_hex(),
    })
}
