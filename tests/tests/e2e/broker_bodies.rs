//! Every live route that reads a body, from the route table itself, with
//! every purchase, redemption and inscription configured: each malformed
//! body is a 400
//! in JSON with `error` and `code` (naming the field at fault for an
//! object),
//! and nothing is stored; and the headers that name who a request acts
//! as, checked on every route that reads keys.

use serde_json::{json, Value};
use tests::live::Broker;

const OPERATOR: &str = "operator-secret-bodies";

/// A value for each path parameter the table's patterns name.
fn fill(pattern: &str) -> String {
    pattern
        .replace("{uaid}", "uaid:aid:bodies;uid=1;registry=almanac;proto=a2a")
        .replace("{attemptId}", "att_missing")
        .replace("{submissionId}", "sub_missing")
        .replace("{sessionId}", "sess_missing")
}

/// Rows of every table of the live store but `leases` (the api's own
/// bookkeeping among replicas, taken and renewed whatever is asked).
fn rows(broker: &Broker) -> Vec<(String, i64)> {
    broker.with_store(|store| {
        let tables = match store.dialect() {
            live_store::Dialect::Sqlite => {
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            }
            live_store::Dialect::Postgres => {
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1"
            }
        };
        let tables: Vec<String> = store.query_map(tables, [], |r| r.get(0)).unwrap();
        tables
            .into_iter()
            .filter(|t| t != "leases")
            .map(|t| {
                let count = store.query_row(&format!("SELECT COUNT(*) FROM \"{t}\""), [], |r| r.get(0)).unwrap();
                (t, count)
            })
            .collect()
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn every_live_body_route_refuses_malformed_bodies_and_stores_nothing() {
    // Peers that are never reached: every body below is refused first.
    let inscription_key = tests::network::private_key("0.0.1003");
    let flags = [
        "--inscription-account",
        "0.0.1003",
        "--inscription-key",
        &inscription_key,
        "--hapi-node",
        "0.0.3=127.0.0.1:9",
        // Named, so the registry does not make one at its start.
        "--skills-directory-topic",
        "0.0.5000",
        "--operator-key",
        OPERATOR,
        "--mirror-url",
        "http://127.0.0.1:9",
        "--treasury-account",
        "0.0.98765",
        "--card-provider-url",
        "http://127.0.0.1:9",
        "--card-secret-key",
        "sk_unused",
        "--card-webhook-secret",
        "whsec_unused",
        "--redeem-token",
        "0.0.5000001:luna0",
        "--summarizer-url",
        "http://127.0.0.1:9/v1",
        // Every verification route is tried six times: above the burst
        // that rate-limits them.
        "--verification-burst",
        "1000",
    ];
    let broker = Broker::start("bodies", &flags);
    let before = rows(&broker);
    let malformed: [(&str, &str); 6] = [
        ("not JSON", "{\"profile\": "),
        ("an array", "[1, 2]"),
        ("a string", "\"text\""),
        ("an unknown field", "{\"surelyNotAField\": 1}"),
        ("bytes after the JSON", "{\"message\": \"hi\"} GARBAGE"),
        ("a key twice", "{\"message\": \"hi\", \"message\": \"hi\"}"),
    ];
    let mut checked = 0;
    for endpoint in api::routes::table() {
        for operation in &endpoint.operations {
            let reads_body = matches!(
                operation.body,
                api::routes::BodyLimit::Live | api::routes::BodyLimit::Content | api::routes::BodyLimit::Secrets
            );
            if !reads_body || !endpoint.pattern.starts_with("/api/v1/") {
                continue;
            }
            let path = fill(endpoint.pattern);
            for (what, body) in malformed {
                let response = broker
                    .client
                    .request(operation.method.clone(), broker.api.url(&path))
                    .header("x-api-key", OPERATOR)
                    .header("x-account-id", "0.0.1001")
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                let status = response.status().as_u16();
                let answer: Value = response.json().await.unwrap_or(Value::Null);
                let context = format!("{} {path} with {what}: {status} {answer}", operation.method);
                assert_eq!(status, 400, "{context}");
                assert!(answer["error"].is_string() && answer["code"].is_string(), "{context}");
                // The webhook checks its signature before it reads anything;
                // the purchase route refuses every body.
                if endpoint.pattern.ends_with("/payments/webhook") {
                    assert_eq!(answer["code"], json!("invalid_signature"), "{context}");
                } else if endpoint.pattern.ends_with("/credits/purchase") {
                    assert_eq!(answer["code"], json!("private_key_not_accepted"), "{context}");
                } else if what == "an unknown field" {
                    // Refused by name, or (where a body may carry more, as
                    // registration's does) for the field it lacks.
                    assert!(answer["parameter"].is_string(), "{context}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 6 * 15, "only {checked} requests: the table lost its live routes?");
    assert_eq!(rows(&broker), before, "a refused body stored something");
}

/// A header as sent: its name and its bytes.
type Header = (&'static str, Vec<u8>);

#[tokio::test(flavor = "multi_thread")]
async fn the_account_header_and_the_keys_are_refused_when_they_disagree() {
    let broker = Broker::start("account-header", &["--redeem-token", "0.0.5000001:luna0"]);
    let (mine, theirs) = (broker.sign_in("0.0.1001").await, broker.sign_in("0.0.1002").await);
    let call = |path: &'static str, headers: Vec<Header>| {
        let mut request = broker.client.get(broker.api.url(path));
        for (name, value) in headers {
            request = request.header(name, warp::http::HeaderValue::from_bytes(&value).unwrap());
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let key = |k: &str| ("x-api-key", k.as_bytes().to_vec());
    let account = |a: &[u8]| ("x-account-id", a.to_vec());
    for path in ["/api/v1/credits/balance", "/api/v1/credits/redeem-points/quote?accountId=0.0.1001"] {
        let cases: Vec<(Vec<Header>, u16)> = vec![
            (vec![key(&mine), account(b"0.0.1001")], 200),
            (vec![key(&mine), account(b"0.0.1002")], 403),
            (vec![key(&mine), account(b"0.0.1001"), account(b"0.0.1001")], 400),
            (vec![key(&mine), account("0.0.1001\u{e9}".as_bytes())], 400),
            (vec![key(&mine), ("x-ledger-api-key", theirs.as_bytes().to_vec())], 400),
            (vec![key(&mine), ("authorization", format!("Bearer {theirs}").into_bytes())], 400),
            (vec![key(&mine), ("x-ledger-api-key", mine.as_bytes().to_vec())], 200),
        ];
        for (headers, status) in cases {
            let shown: Vec<String> =
                headers.iter().map(|(n, v)| format!("{n}: {}", String::from_utf8_lossy(v))).collect();
            let (got, answer) = call(path, headers).await;
            assert_eq!(got, status, "{path} {shown:?}: {answer}");
            if status != 200 {
                assert!(answer["error"].is_string() && answer["code"].is_string(), "{answer}");
            }
        }
    }
}
