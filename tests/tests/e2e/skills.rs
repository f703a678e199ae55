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

/// Publishes `body` as the caller of `key` and waits for the job to end.
async fn published(s: &Inscribing, body: Value) -> Value {
    let (status, job) = s.post("/api/v1/skills/publish", body, &[]).await;
    assert_eq!(status, 201, "{job}");
    let id = job["jobId"].as_str().unwrap().to_string();
    let mut last = Value::Null;
    tests::wait::until("a publish job ending", 600, std::time::Duration::from_millis(50), async || {
        last = s.broker.send("GET", &format!("/api/v1/skills/jobs/{id}"), Some(&s.key), None).await.1;
        last["status"] == "completed" || last["status"] == "failed"
    })
    .await;
    assert_eq!(last["status"], "completed", "{last}");
    last
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skill_is_published_listed_voted_and_its_name_refused_to_another_account() {
    let s = Inscribing::start("skills", &[]).await;
    let mut config = Value::Null;
    tests::wait::until("the directory topic", 600, std::time::Duration::from_millis(20), async || {
        config = s.broker.send("GET", "/api/v1/skills/config", None, None).await.1;
        config["directoryTopicId"].is_string()
    })
    .await;
    let directory = config["directoryTopicId"].as_str().unwrap().to_string();
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
    let url = s.broker.api.url("/api/v1/skills/ownership?name=ledger-lookup");
    let (_, ownership) = tests::live::call(&s.broker.client, "GET", url, &headers, None).await;
    assert_eq!((&ownership["exists"], &ownership["isOwner"]), (&json!(true), &json!(false)));

    // The owner: the same version again is 409; the next one is
    // registered on the same version topic, the directory unchanged.
    let (status, again) = s.post("/api/v1/skills/publish", package("1.0.0"), &[]).await;
    assert_eq!((status, &again["code"]), (409, &json!("version_not_newer")), "{again}");
    let next = published(&s, package("1.1.0")).await;
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
    tests::wait::until("the directory topic", 600, std::time::Duration::from_millis(20), async || {
        s.broker.send("GET", "/api/v1/skills/config", None, None).await.1["directoryTopicId"].is_string()
    })
    .await;
    let results = tests::reference_client("skills.mjs", &[&s.broker.api.base, &s.key, "0.0.1001"]).await;
    let job = &results["job"]["value"];
    let (bytes, _) = s.read_back(job["files"][1]["topicId"].as_str().unwrap()).await;
    assert_eq!(bytes, b"# Topic reader\n\nGive it a topic id.\n");
}
