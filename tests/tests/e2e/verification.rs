//! Ownership verification against the real api binary on loopback: DNS
//! TXT proofs read from a DNS server on loopback (a record missing, a
//! wrong code, a record published late, one taken down, a server that
//! stops answering), ledger signatures by the dev accounts' keys, and a
//! code served by an agent on loopback. A verified agent shows as
//! `registered` with `verifiedOwner` 100 in its detail and in
//! `verified=true` searches, across a restart and a rebuild.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde_json::{json, Value};
use tests::dns::DnsServer;
use tests::live::{register, Broker};
use warp::Filter as _;

fn segment(text: &str) -> String {
    broker_site::render::segment(text)
}

/// An indexed agent of the datasets whose UAID's nativeId is a domain.
fn indexed_domain_agent() -> broker_model::Agent {
    let built = generator::broker::load(&tests::workspace_root().join("datasets/broker")).unwrap();
    built
        .agents
        .into_iter()
        .find(|a| {
            a.verification_status == broker_model::Verification::Indexed
                && a.uaid.param("nativeId").is_some_and(|n| !n.contains(':') && n.contains('.'))
        })
        .expect("an indexed agent at a domain")
}

/// A broker whose DNS TXT proofs are read from `dns`, with account
/// 0.0.1001 signed in.
struct Verifying {
    dns: DnsServer,
    broker: Broker,
    key: String,
    agent: broker_model::Agent,
    /// `_agent.<nativeId>` of `agent`.
    record: String,
}

impl Verifying {
    async fn start(label: &str, flags: &[&str]) -> Verifying {
        let dns = DnsServer::start(&[]).await;
        let server = dns.addr.to_string();
        let mut all = vec!["--verification-dns", &server, "--verification-dns-timeout-ms", "300"];
        all.extend_from_slice(flags);
        let broker = Broker::start(label, &all);
        let key = broker.sign_in("0.0.1001").await;
        let agent = indexed_domain_agent();
        let record = format!("_agent.{}", agent.uaid.param("nativeId").unwrap());
        Verifying { dns, broker, key, agent, record }
    }

    fn uaid(&self) -> String {
        self.agent.uaid.to_string()
    }

    async fn challenge(&self, key: &str, uaid: &str) -> Value {
        let (status, body) =
            self.broker.send("POST", "/api/v1/verification/challenge", Some(key), Some(json!({"uaid": uaid}))).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    async fn verify(&self, key: &str, body: Value) -> (u16, Value) {
        self.broker.send("POST", "/api/v1/verification/verify", Some(key), Some(body)).await
    }

    async fn detail(&self, uaid: &str) -> Value {
        let (status, body) = self.broker.send("GET", &format!("/api/v1/agents/{}", segment(uaid)), None, None).await;
        assert_eq!(status, 200, "{body}");
        body["agent"].clone()
    }

    /// Whether a `verified=true` search for the agent's name lists it.
    async fn listed_verified(&self) -> bool {
        let q = form_urlencoded::byte_serialize(self.agent.name.as_bytes()).collect::<String>();
        let (status, body) =
            self.broker.send("GET", &format!("/api/v1/search?verified=true&limit=100&q={q}"), None, None).await;
        assert_eq!(status, 200, "{body}");
        body["hits"].as_array().unwrap().iter().any(|h| h["uaid"] == self.uaid())
    }

    /// Proves the agent's ownership by a TXT record: the challenge.
    async fn proven_by_dns(&self) -> Value {
        let challenge = self.challenge(&self.key, &self.uaid()).await;
        let code = challenge["code"].as_str().unwrap();
        self.dns.set_txt(&self.record, &[&format!("v=aid1;proto=a2a;verification={code}")]);
        let (status, verified) =
            self.verify(&self.key, json!({"challengeId": challenge["challengeId"], "method": "dns-txt"})).await;
        assert_eq!((status, &verified["verified"]), (200, &json!(true)), "{verified}");
        challenge
    }

    async fn recheck(&self) -> Value {
        let (status, body) = self
            .broker
            .send("POST", "/api/v1/verification/dns/verify", Some(&self.key), Some(json!({"uaid": self.uaid()})))
            .await;
        assert_eq!(status, 200, "{body}");
        body
    }
}

/// A record missing, then with another code, then published: only the
/// last proves, and the challenge is then used.
#[tokio::test(flavor = "multi_thread")]
async fn a_dns_record_published_late_proves_ownership_once() {
    let v = Verifying::start("verify-dns", &[]).await;
    let challenge = v.challenge(&v.key, &v.uaid()).await;
    assert_eq!(challenge["expectedHandle"], v.record);
    let code = challenge["code"].as_str().unwrap().to_string();
    let attempt = json!({"challengeId": challenge["challengeId"], "method": "dns-txt"});
    let (status, missing) = v.verify(&v.key, attempt.clone()).await;
    assert_eq!((status, &missing["verified"]), (200, &json!(false)), "{missing}");
    assert!(missing["reason"].as_str().unwrap().contains("no TXT record"), "{missing}");
    v.dns.set_txt(&v.record, &["v=aid1;proto=a2a;verification=almanac-verify-another"]);
    let (_, wrong) = v.verify(&v.key, attempt.clone()).await;
    assert_eq!(wrong["verified"], false);
    assert!(wrong["reason"].as_str().unwrap().contains("do not hold"), "{wrong}");
    let path = format!("/api/v1/verification/challenge/{}", challenge["challengeId"].as_str().unwrap());
    let (_, pending) = v.broker.send("GET", &path, Some(&v.key), None).await;
    assert_eq!((pending["status"].as_str(), pending["method"].as_str()), (Some("pending"), Some("dns-txt")));
    // Published late, in two strings of one record.
    v.dns.set_txt_strings(&v.record, &["v=aid1;proto=a2a;", &format!("verification={code}")]);
    let (status, proven) = v.verify(&v.key, attempt.clone()).await;
    assert_eq!((status, &proven["verified"], &proven["ownerId"]), (200, &json!(true), &json!("0.0.1001")), "{proven}");
    let (status, again) = v.verify(&v.key, attempt).await;
    assert_eq!((status, again["code"].as_str()), (409, Some("challenge_used")), "{again}");
    let (_, used) = v.broker.send("GET", &path, Some(&v.key), None).await;
    assert_eq!(used["status"], "verified");
}

/// Verified: the detail, `verified=true` search, the status and the
/// ownership say so, through a restart and the next build.
#[tokio::test(flavor = "multi_thread")]
async fn a_verified_owner_shows_in_detail_and_search_across_a_restart_and_a_build() {
    let mut v = Verifying::start("verify-shown", &[]).await;
    assert_eq!(v.detail(&v.uaid()).await["verificationStatus"], "indexed");
    assert!(!v.listed_verified().await, "not verified before");
    v.proven_by_dns().await;
    let check = async |v: &Verifying, when: &str| {
        let detail = v.detail(&v.uaid()).await;
        assert_eq!(detail["verificationStatus"], "registered", "{when}");
        assert_eq!(detail["trustSignals"]["verifiedOwner"], 100.0, "{when}");
        assert!(v.listed_verified().await, "{when}: listed by verified=true");
        let (_, status) =
            v.broker.send("GET", &format!("/api/v1/verification/status/{}", segment(&v.uaid())), None, None).await;
        assert_eq!(
            (&status["verified"], &status["chain"]),
            (&json!(true), &json!("hedera:testnet")),
            "{when}: {status}"
        );
        let path = format!("/api/v1/verification/ownership/{}", segment(&v.uaid()));
        let (status, owned) = v.broker.send("GET", &path, None, None).await;
        assert_eq!(
            (status, &owned["method"], &owned["ownerId"]),
            (200, &json!("dns-txt"), &json!("0.0.1001")),
            "{when}"
        );
    };
    check(&v, "live").await;
    v.broker.restart(&[]);
    check(&v, "after a restart").await;
    v.broker.journaled().await;
    v.broker.rebuild(&tests::strs(&Broker::sources())).await;
    check(&v, "in the next build").await;
}

/// A record taken down revokes the ownership at the next re-check: the
/// agent shows as it did before, over the build that held it verified.
#[tokio::test(flavor = "multi_thread")]
async fn a_record_taken_down_revokes_the_ownership() {
    let v = Verifying::start("verify-revoked", &[]).await;
    v.proven_by_dns().await;
    v.broker.journaled().await;
    v.broker.rebuild(&tests::strs(&Broker::sources())).await;
    assert_eq!(v.recheck().await["state"], "verified", "still there");
    v.dns.set_txt(&v.record, &[]);
    let rechecked = v.recheck().await;
    assert_eq!((&rechecked["state"], &rechecked["verified"]), (&json!("revoked"), &json!(false)), "{rechecked}");
    let detail = v.detail(&v.uaid()).await;
    assert_eq!(detail["verificationStatus"], "indexed");
    assert_eq!(detail["trustSignals"]["verifiedOwner"], v.agent.trust_signals["verifiedOwner"]);
    assert!(!v.listed_verified().await);
    let (status, _) =
        v.broker.send("GET", &format!("/api/v1/verification/ownership/{}", segment(&v.uaid())), None, None).await;
    assert_eq!(status, 404);
}

/// A nameserver that stops answering proves nothing and revokes nothing:
/// the ownership stays verified with the error noted.
#[tokio::test(flavor = "multi_thread")]
async fn a_silent_nameserver_proves_nothing_and_revokes_nothing() {
    let v = Verifying::start("verify-silent", &[]).await;
    v.proven_by_dns().await;
    v.dns.silence(true);
    let rechecked = v.recheck().await;
    assert_eq!(rechecked["state"], "verified", "{rechecked}");
    assert!(rechecked["lastError"].as_str().unwrap().contains("did not answer"), "{rechecked}");
    let (key, uaid) = (v.broker.sign_in("0.0.1002").await, v.uaid());
    let challenge = v.challenge(&key, &uaid).await;
    let (status, unproven) =
        v.verify(&key, json!({"challengeId": challenge["challengeId"], "method": "dns-txt"})).await;
    assert_eq!((status, &unproven["verified"]), (200, &json!(false)), "{unproven}");
    assert!(unproven["reason"].as_str().unwrap().contains("did not answer"), "{unproven}");
}

/// Signed by the registrant's key: proven; by another key: not.
#[tokio::test(flavor = "multi_thread")]
async fn a_ledger_signature_by_the_registrant_proves_ownership() {
    let v = Verifying::start("verify-ledger", &[]).await;
    let uaid = register(&v.broker, &v.key, "Ledger Clerk", "a2a", "https://ledger-clerk.example/a2a").await;
    let challenge = v.challenge(&v.key, &uaid).await;
    let sign = |account: &str| {
        let key = api::auth::login::key_for(api::auth::login::DEV_KEYS, account).unwrap();
        let signature = key.sign(challenge["code"].as_str().unwrap().as_bytes());
        json!({"challengeId": challenge["challengeId"], "method": "ledger-signature", "accountId": "0.0.1001",
               "signature": base64::engine::general_purpose::STANDARD.encode(signature)})
    };
    let (status, forged) = v.verify(&v.key, sign("0.0.1002")).await;
    assert_eq!((status, &forged["verified"]), (200, &json!(false)), "{forged}");
    let (status, proven) = v.verify(&v.key, sign("0.0.1001")).await;
    assert_eq!(
        (status, &proven["verified"], &proven["method"]),
        (200, &json!(true), &json!("ledger-signature")),
        "{proven}"
    );
    let other = v.broker.sign_in("0.0.1002").await;
    let (_, sender) =
        v.broker.send("POST", "/api/v1/verification/verify-sender", Some(&other), Some(json!({"uaid": uaid}))).await;
    assert_eq!((&sender["verified"], &sender["ownerId"]), (&json!(false), &json!("0.0.1001")), "{sender}");
    let (_, sender) =
        v.broker.send("POST", "/api/v1/verification/verify-sender", Some(&v.key), Some(json!({"uaid": uaid}))).await;
    assert_eq!(sender["verified"], true);
}

/// The code served at the agent's own endpoint proves ownership, fetched
/// through the egress gate.
#[tokio::test(flavor = "multi_thread")]
async fn a_code_served_by_the_agent_proves_ownership() {
    let served: Arc<Mutex<Option<String>>> = Arc::default();
    let held = served.clone();
    let route = warp::path!(".well-known" / "agent-verification").map(move || match held.lock().unwrap().clone() {
        Some(code) => warp::http::Response::builder().status(200).body(code),
        None => warp::http::Response::builder().status(404).body(String::new()),
    });
    let (addr, _stop) = tests::serve_on_loopback(route).await;
    let endpoint = format!("http://{addr}/a2a");
    let v = Verifying::start("verify-endpoint", &["--egress-allow", &tests::allowing(&[&endpoint])]).await;
    let uaid = register(&v.broker, &v.key, "Endpoint Clerk", "a2a", &endpoint).await;
    let challenge = v.challenge(&v.key, &uaid).await;
    let attempt = json!({"challengeId": challenge["challengeId"], "method": "agent-endpoint"});
    let (_, missing) = v.verify(&v.key, attempt.clone()).await;
    assert_eq!(missing["verified"], false, "{missing}");
    assert!(missing["reason"].as_str().unwrap().contains("404"), "{missing}");
    *served.lock().unwrap() = Some(format!("{}\n", challenge["code"].as_str().unwrap()));
    let (status, proven) = v.verify(&v.key, attempt).await;
    assert_eq!((status, &proven["verified"]), (200, &json!(true)), "{proven}");
    assert_eq!(v.detail(&uaid).await["trustSignals"]["verifiedOwner"], 100.0);
}

/// Who may ask, read and use a challenge, and what is refused.
#[tokio::test(flavor = "multi_thread")]
async fn challenges_belong_to_their_account_and_bad_requests_change_nothing() {
    let v = Verifying::start("verify-refusals", &["--verification-max-pending", "2"]).await;
    let (status, _) =
        v.broker.send("POST", "/api/v1/verification/challenge", None, Some(json!({"uaid": v.uaid()}))).await;
    assert_eq!(status, 401);
    let (status, body) = v
        .broker
        .send("POST", "/api/v1/verification/challenge", Some(&v.key), Some(json!({"uaid": "uaid:aid:nobody"})))
        .await;
    assert_eq!((status, body["code"].as_str()), (404, Some("agent_not_found")));
    let challenge = v.challenge(&v.key, &v.uaid()).await;
    let other = v.broker.sign_in("0.0.1002").await;
    let path = format!("/api/v1/verification/challenge/{}", challenge["challengeId"].as_str().unwrap());
    assert_eq!(v.broker.send("GET", &path, Some(&other), None).await.0, 403);
    let attempt = json!({"challengeId": challenge["challengeId"], "method": "dns-txt"});
    assert_eq!(v.verify(&other, attempt).await.0, 403);
    let cases = [
        (json!({"challengeId": challenge["challengeId"], "method": "moltbook-post"}), 400, "method_unsupported"),
        (json!({"challengeId": challenge["challengeId"]}), 400, "invalid_body"),
        (json!({"challengeId": "unknown", "method": "dns-txt"}), 404, "challenge_not_found"),
        (json!({"challengeId": challenge["challengeId"], "method": "ledger-signature"}), 400, "method_not_applicable"),
    ];
    for (body, status, code) in cases {
        let (got, answer) = v.verify(&v.key, body.clone()).await;
        assert_eq!((got, answer["code"].as_str()), (status, Some(code)), "{body}: {answer}");
    }
    v.challenge(&v.key, &v.uaid()).await;
    let (status, body) =
        v.broker.send("POST", "/api/v1/verification/challenge", Some(&v.key), Some(json!({"uaid": v.uaid()}))).await;
    assert_eq!((status, body["code"].as_str()), (429, Some("too_many_challenges")));
    assert_eq!(v.broker.rows("ownerships"), 0, "nothing was proven");
}

/// The reference client's verification calls parse what the api answers.
#[tokio::test(flavor = "multi_thread")]
async fn the_reference_client_verifies_an_agent() {
    let v = Verifying::start("verify-client", &[]).await;
    let challenge = v.challenge(&v.key, &v.uaid()).await;
    let code = challenge["code"].as_str().unwrap();
    v.dns.set_txt(&v.record, &[&format!("verification={code}")]);
    let id = challenge["challengeId"].as_str().unwrap();
    tests::reference_client("verification.mjs", &[&v.broker.api.base, &v.key, &v.uaid(), id]).await;
}
