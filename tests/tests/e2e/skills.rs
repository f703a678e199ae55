//! The skills registry against the real api binary on loopback, writing
//! through the small Hedera network of [`crate::inscription`]: a skill
//! published as HCS-26 (each file an HCS-1 file read back as the same
//! bytes, the manifest, the directory and version entries), listed,
//! searched and voted on; its name refused to another account (403); a
//! second version registered on the same version topic.

use base64::Engine as _;
use serde_json::{json, Value};

use crate::inscription::Inscribing;
use api::broker::inscription::hcs1;

fn file(name: &str, text: &str) -> Value {
    json!({"name": name, "base64": base64::engine::general_purpose::STANDARD.encode(text)})
}

fn package(version: &str) -> Value {
    let manifest = json!({
        "name": "ledger-lookup",
        "version": version,
        "description": "Looks up Hedera accounts and topics on a mirror node",
        "tags": ["hedera", "mirror-node"],
        "license": "Apache-2.0",
    });
    json!({"files": [
        file("skill.json", &manifest.to_string()),
        file("SKILL.md", &format!("# Ledger lookup {version}\n\nAsk for an account or a topic id.\n")),
        file("lookup.py", "import urllib.request\n\ndef lookup(id):\n    return urllib.request.urlopen(id).read()\n"),
    ]})
}

/// The messages of `topic` on the mirror node, as JSON.
fn entries(s: &Inscribing, topic: &str) -> Vec<Value> {
    s.network
        .mirror
        .messages(topic.parse().unwrap())
        .iter()
        .map(|m| {
            serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(&m.message).unwrap()).unwrap()
        })
        .collect()
}

async fn topic_memo(s: &Inscribing, topic: &str) -> String {
    let url = format!("{}/api/v1/topics/{topic}", s.network.mirror.url());
    let (_, info) = tests::live::call(&s.broker.client, "GET", url, &[], None).await;
    info["memo"].as_str().unwrap().to_string()
}

/// Publishes `body` as 0.0.1001: the job's id.
async fn publish(s: &Inscribing, body: Value) -> String {
    let (status, job) = s.post("/api/v1/skills/publish", body, &[]).await;
    assert_eq!(status, 201, "{job}");
    job["jobId"].as_str().unwrap().to_string()
}

/// Waits until job `id` is `completed` or `failed`: the job.
async fn ended(s: &Inscribing, id: &str) -> Value {
    let mut last = Value::Null;
    tests::wait::until("a publish job ending", 600, std::time::Duration::from_millis(50), async || {
        last = s.broker.send("GET", &format!("/api/v1/skills/jobs/{id}"), Some(&s.key), None).await.1;
        last["status"] == "completed" || last["status"] == "failed"
    })
    .await;
    last
}

/// Publishes `body` and waits for it to complete: the job.
async fn published(s: &Inscribing, body: Value) -> Value {
    let job = ended(s, &publish(s, body).await).await;
    assert_eq!(job["status"], "completed", "{job}");
    job
}

/// Waits until the registry's directory topic is made: its id.
async fn directory_made(s: &Inscribing) -> String {
    let mut config = Value::Null;
    tests::wait::until("the directory topic", 600, std::time::Duration::from_millis(20), async || {
        config = s.broker.send("GET", "/api/v1/skills/config", None, None).await.1;
        config["directoryTopicId"].is_string()
    })
    .await;
    config["directoryTopicId"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skill_is_published_listed_voted_and_its_name_refused_to_another_account() {
    let s = Inscribing::start("skills", &[]).await;
    let directory = directory_made(&s).await;
    assert_eq!(topic_memo(&s, &directory).await, "hcs-26:0:86400:0");

    // Quoted, then published at the quote's price.
    let (status, quote) = s.post("/api/v1/skills/quote", package("1.0.0"), &[]).await;
    assert_eq!(status, 200, "{quote}");
    assert_eq!(
        (&quote["name"], &quote["version"], &quote["directoryTopicId"]),
        (&json!("ledger-lookup"), &json!("1.0.0"), &json!(directory))
    );
    let before = s.broker.balance(&s.key).await;
    let mut body = package("1.0.0");
    body["quoteId"] = quote["quoteId"].clone();
    let job = published(&s, body).await;
    assert_eq!(s.broker.balance(&s.key).await, before - quote["credits"].as_i64().unwrap(), "charged the quote");

    // Each file reads back from its HCS-1 topic as the bytes sent.
    let sent = package("1.0.0");
    for (file, wrote) in sent["files"].as_array().unwrap().iter().zip(job["files"].as_array().unwrap()) {
        let (bytes, _) = s.read_back(wrote["topicId"].as_str().unwrap()).await;
        let expected = base64::engine::general_purpose::STANDARD.decode(file["base64"].as_str().unwrap()).unwrap();
        assert_eq!(bytes, expected, "{}", wrote["name"]);
        assert_eq!(wrote["hrl"], hcs1::hrl(wrote["topicId"].as_str().unwrap()));
    }

    // The directory names the skill's version topic; the version topic
    // names the manifest, whose checksum and files are what was written.
    let version_topic = job["packageTopicId"].as_str().unwrap().to_string();
    assert_eq!(topic_memo(&s, &version_topic).await, "hcs-26:0:86400:1");
    let listed = entries(&s, &directory);
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (&listed[0]["p"], &listed[0]["op"], &listed[0]["t_id"]),
        (&json!("hcs-26"), &json!("register"), &json!(version_topic))
    );
    assert_eq!(
        (&listed[0]["account_id"], &listed[0]["metadata"]["license"]),
        (&json!("0.0.1001"), &json!("Apache-2.0"))
    );
    let versions = entries(&s, &version_topic);
    assert_eq!(versions.len(), 1);
    assert_eq!(
        (&versions[0]["skill_uid"], &versions[0]["version"]),
        (&job["directorySequenceNumber"], &json!("1.0.0"))
    );
    let manifest_topic = versions[0]["t_id"].as_str().unwrap();
    let (manifest, mime) = s.read_back(manifest_topic).await;
    assert_eq!(mime, "application/json");
    assert_eq!(versions[0]["checksum"], format!("sha256:{}", hcs1::hash(&manifest)));
    let manifest: Value = serde_json::from_slice(&manifest).unwrap();
    let paths: Vec<&str> = manifest["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["skill.json", "SKILL.md", "lookup.py"]);
    assert_eq!(manifest["files"][1]["hrl"], job["files"][1]["hrl"]);

    // Listed, found by a tag, and voted on once.
    let (_, list) = s.broker.send("GET", "/api/v1/skills?q=mirror-node&includeFiles=true", None, None).await;
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(
        (&items[0]["packageTopicId"], &items[0]["skillJsonHrl"]),
        (&json!(version_topic), &job["files"][0]["hrl"])
    );
    let (_, none) = s.broker.send("GET", "/api/v1/skills?q=solana", None, None).await;
    assert_eq!(none["items"], json!([]));
    for _ in 0..2 {
        let (status, vote) =
            s.post("/api/v1/skills/vote", json!({"name": "ledger-lookup", "upvoted": true}), &[]).await;
        assert_eq!((status, &vote["upvotes"], &vote["hasUpvoted"]), (200, &json!(1), &json!(true)), "{vote}");
    }

    // Another account may not publish under the name: 403, nothing charged or stored.
    let other = s.broker.sign_in("0.0.1002").await;
    let headers = [("x-api-key", other.as_str())];
    let url = s.broker.api.url("/api/v1/skills/publish");
    let (status, refused) = tests::live::call(&s.broker.client, "POST", url, &headers, Some(package("2.0.0"))).await;
    assert_eq!((status, &refused["code"]), (403, &json!("not_skill_owner")), "{refused}");
    let url = s.broker.api.url("/api/v1/skills/quote");
    let (status, refused) = tests::live::call(&s.broker.client, "POST", url, &headers, Some(package("2.0.0"))).await;
    assert_eq!((status, &refused["code"]), (403, &json!("not_skill_owner")), "nor quoted: {refused}");
    let url = s.broker.api.url("/api/v1/skills/ownership?name=ledger-lookup");
    let (_, ownership) = tests::live::call(&s.broker.client, "GET", url, &headers, None).await;
    assert_eq!((&ownership["exists"], &ownership["isOwner"]), (&json!(true), &json!(false)));

    // The owner: the same version again is 409; the next one is
    // registered on the same version topic, the directory unchanged.
    let (status, again) = s.post("/api/v1/skills/publish", package("1.0.0"), &[]).await;
    assert_eq!((status, &again["code"]), (409, &json!("version_not_newer")), "{again}");
    // Build metadata has no precedence (SemVer 2.0 section 10): not newer.
    let (status, again) = s.post("/api/v1/skills/quote", package("1.0.0+build2"), &[]).await;
    assert_eq!((status, &again["code"]), (409, &json!("version_not_newer")), "{again}");
    // Under a key: the same package again is the same job; another
    // package, or a key past 255 bytes, is refused before anything is made.
    let keyed = [("idempotency-key", "publish-1.1.0")];
    let (status, first) = s.post("/api/v1/skills/publish", package("1.1.0"), &keyed).await;
    assert_eq!(status, 201, "{first}");
    let (status, retry) = s.post("/api/v1/skills/publish", package("1.1.0"), &keyed).await;
    assert_eq!((status, &retry["jobId"]), (200, &first["jobId"]), "{retry}");
    let (status, reused) = s.post("/api/v1/skills/publish", package("1.2.0"), &keyed).await;
    assert_eq!((status, &reused["code"]), (409, &json!("idempotency_key_reused")), "{reused}");
    let long = "k".repeat(256);
    let (status, refused) = s.post("/api/v1/skills/publish", package("1.2.0"), &[("idempotency-key", &long)]).await;
    assert_eq!((status, &refused["code"]), (400, &json!("invalid_idempotency_key")), "{refused}");
    let next = ended(&s, first["jobId"].as_str().unwrap()).await;
    assert_eq!(next["status"], "completed", "{next}");
    assert_eq!(next["packageTopicId"], json!(version_topic));
    assert_eq!(entries(&s, &directory).len(), 1);
    assert_eq!(entries(&s, &version_topic).len(), 2);
    let (_, versions) = s.broker.send("GET", "/api/v1/skills/versions?name=ledger-lookup", None, None).await;
    let listed: Vec<&str> =
        versions["items"].as_array().unwrap().iter().map(|v| v["version"].as_str().unwrap()).collect();
    assert_eq!(listed, ["1.1.0", "1.0.0"]);
    let (_, mine) = s.broker.send("GET", "/api/v1/skills/mine", Some(&s.key), None).await;
    assert_eq!(
        (&mine["items"][0]["latestVersion"], &mine["items"][0]["versions"]),
        (&json!("1.1.0"), &json!(["1.1.0", "1.0.0"]))
    );
}

/// The reference client's skills calls, each parsed by its schemas.
#[tokio::test(flavor = "multi_thread")]
async fn the_reference_client_publishes_lists_votes_and_asks_for_verification() {
    let s = Inscribing::start("skills-client", &["--skills-verification-basic-credits", "5"]).await;
    directory_made(&s).await;
    let results = tests::reference_client("skills.mjs", &[&s.broker.api.base, &s.key, "0.0.1001"]).await;
    let job = &results["job"]["value"];
    let (bytes, _) = s.read_back(job["files"][1]["topicId"].as_str().unwrap()).await;
    assert_eq!(bytes, b"# Topic reader\n\nGive it a topic id.\n");
}

/// Refused requests answer a clear error and change nothing: no name
/// taken, no credit spent, no job.
#[tokio::test(flavor = "multi_thread")]
async fn refused_publishes_change_nothing() {
    let s = Inscribing::start("skills-refused", &["--inscription-max-bytes", "2048", "--skills-max-files", "4"]).await;
    directory_made(&s).await;
    let balance = s.broker.balance(&s.key).await;
    let (_, quote) = s.post("/api/v1/skills/quote", package("1.0.0"), &[]).await;
    let with = |mut body: Value, field: &str, value: Value| {
        body[field] = value;
        body
    };
    let files = |list: Vec<Value>| json!({"files": list});
    let manifest = |text: &str| file("skill.json", text);
    let md = || file("SKILL.md", "# A skill");
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        (
            "no SKILL.md",
            files(vec![manifest(r#"{"name":"a","version":"1.0.0","description":"d"}"#)]),
            400,
            "invalid_body",
        ),
        (
            "a name with capitals",
            files(vec![manifest(r#"{"name":"A","version":"1.0.0","description":"d"}"#), md()]),
            400,
            "invalid_body",
        ),
        (
            "not semver",
            files(vec![manifest(r#"{"name":"a","version":"1.0","description":"d"}"#), md()]),
            400,
            "invalid_body",
        ),
        ("no description", files(vec![manifest(r#"{"name":"a","version":"1.0.0"}"#), md()]), 400, "invalid_body"),
        ("an unknown field", with(package("1.0.0"), "extra", json!(1)), 400, "invalid_body"),
        ("another directory", with(package("1.0.0"), "directoryTopicId", json!("0.0.42")), 400, "invalid_body"),
        (
            "too many files",
            files(vec![
                manifest(r#"{"name":"a","version":"1.0.0","description":"d"}"#),
                md(),
                file("1", "x"),
                file("2", "x"),
                file("3", "x"),
            ]),
            400,
            "invalid_body",
        ),
        (
            "a file above the inscription bound",
            files(vec![
                manifest(r#"{"name":"a","version":"1.0.0","description":"d"}"#),
                md(),
                file("big.txt", &"x".repeat(3000)),
            ]),
            413,
            "content_too_large",
        ),
        ("another package's quote", with(package("1.0.1"), "quoteId", quote["quoteId"].clone()), 400, "quote_mismatch"),
        (
            "an unknown quote",
            with(package("1.0.0"), "quoteId", json!("00000000-0000-4000-8000-000000000000")),
            400,
            "quote_not_found",
        ),
    ];
    for (what, body, status, code) in cases {
        let (got, answer) = s.post("/api/v1/skills/publish", body, &[]).await;
        assert_eq!((got, answer["code"].as_str()), (status, Some(code)), "{what}: {answer}");
        assert!(answer["error"].is_string(), "{what}: {answer}");
    }
    // Without a key; and an account without credits.
    let (status, _) = s.broker.send("POST", "/api/v1/skills/publish", None, Some(package("1.0.0"))).await;
    assert_eq!(status, 401);
    let poor = s.broker.sign_in("0.0.1002").await;
    let (status, short) = s.broker.send("POST", "/api/v1/skills/publish", Some(&poor), Some(package("1.0.0"))).await;
    assert_eq!((status, &short["code"]), (402, &json!("insufficient_credits")), "{short}");
    // What needs a published skill: 404; a review needs the operator.
    let (status, _) = s.post("/api/v1/skills/vote", json!({"name": "ledger-lookup", "upvoted": true}), &[]).await;
    assert_eq!(status, 404);
    let (status, _) = s.broker.send("GET", "/api/v1/skills/versions?name=ledger-lookup", None, None).await;
    assert_eq!(status, 404);
    let (status, _) =
        s.post("/api/v1/skills/verification/request", json!({"name": "ledger-lookup", "tier": "basic"}), &[]).await;
    assert_eq!(status, 404);
    let (status, _) = s.post("/api/v1/skills/verification/x/decision", json!({"status": "approved"}), &[]).await;
    assert_eq!(status, 403);

    assert_eq!(s.broker.balance(&s.key).await, balance, "nothing charged");
    let (_, ownership) = s.broker.send("GET", "/api/v1/skills/ownership?name=ledger-lookup", None, None).await;
    assert_eq!(ownership["exists"], json!(false), "no name taken");
    let (_, list) = s.broker.send("GET", "/api/v1/skills", None, None).await;
    assert_eq!(list, json!({"items": [], "nextCursor": null}));
    let (_, mine) = s.broker.send("GET", "/api/v1/skills/my-list", Some(&s.key), None).await;
    assert_eq!(mine["owned"]["items"], json!([]));
}

/// A publish the network refuses fails, is refunded and gives its name
/// back; one waiting for the network resumes after a restart and writes
/// each entry once.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_publish_gives_its_name_back_and_a_waiting_one_resumes_after_a_restart() {
    let mut s = Inscribing::start("skills-resumed", &[]).await;
    let directory = directory_made(&s).await;
    let balance = s.broker.balance(&s.key).await;
    s.network.set_balance(crate::inscription::BROKER_ACCOUNT, 0);
    let failed = ended(&s, &publish(&s, package("1.0.0")).await).await;
    assert_eq!(failed["status"], "failed");
    assert!(failed["failureReason"].as_str().unwrap().contains("INSUFFICIENT_PAYER_BALANCE"), "{failed}");
    assert_eq!(s.broker.balance(&s.key).await, balance, "refunded");
    let (_, ownership) = s.broker.send("GET", "/api/v1/skills/ownership?name=ledger-lookup", None, None).await;
    assert_eq!(ownership["exists"], json!(false), "the name is free again");

    s.network.set_balance(crate::inscription::BROKER_ACCOUNT, 100_000_000_000);
    s.network.pause(true);
    let id = publish(&s, package("1.0.0")).await;
    tests::wait::until("a node refusing a call", 600, std::time::Duration::from_millis(20), async || {
        s.network.refused() > 0
    })
    .await;
    s.broker.restart(&[]);
    s.network.pause(false);
    let job = ended(&s, &id).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(entries(&s, &directory).len(), 1, "the skill registered once");
    assert_eq!(entries(&s, job["packageTopicId"].as_str().unwrap()).len(), 1, "the version registered once");
}

/// A directory topic the operator names is used only once the mirror node
/// shows it with an HCS-26 directory's memo: another topic (here an HCS-1
/// file) leaves the registry refusing publishes, saying why.
#[tokio::test(flavor = "multi_thread")]
async fn a_named_directory_must_be_an_hcs26_directory() {
    let mut s = Inscribing::start("skills-named-directory", &[]).await;
    let directory = directory_made(&s).await;
    let input = json!({"inputType": "base64", "base64": "aGVsbG8=", "mimeType": "text/plain"});
    let (_, job) = s.post("/api/v1/inscribe/content", input, &[]).await;
    let id = job["jobId"].as_str().unwrap().to_string();
    let mut file = Value::Null;
    tests::wait::until("the file written", 600, std::time::Duration::from_millis(20), async || {
        file = s.broker.send("GET", &format!("/api/v1/inscribe/content/{id}"), Some(&s.key), None).await.1;
        file["status"] == "completed"
    })
    .await;
    let file_topic = file["topicId"].as_str().unwrap().to_string();

    s.broker.restart(&[("ALMANAC_SKILLS_DIRECTORY_TOPIC", &file_topic)]);
    let mut refused = Value::Null;
    tests::wait::until("the named topic judged", 600, std::time::Duration::from_millis(20), async || {
        refused = s.post("/api/v1/skills/quote", package("1.0.0"), &[]).await.1;
        refused["error"].as_str().is_some_and(|e| e.contains("not an HCS-26 directory"))
    })
    .await;
    assert_eq!(refused["code"], "directory_pending", "{refused}");
    let (_, config) = s.broker.send("GET", "/api/v1/skills/config", None, None).await;
    assert_eq!(config["directoryTopicId"], Value::Null);

    s.broker.restart(&[("ALMANAC_SKILLS_DIRECTORY_TOPIC", &directory)]);
    assert_eq!(directory_made(&s).await, directory, "a directory is taken as named");
    published(&s, package("1.0.0")).await;
}
