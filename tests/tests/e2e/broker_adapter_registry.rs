//! Adapter registry writes against the real api binary on loopback:
//! categories (operator only), submissions processed in the background,
//! their status (401, 403, 404), the listings merged at once, the next
//! build publishing them; and the reference client's calls.

use std::time::Duration;

use serde_json::{json, Value};
use tests::live::Broker;

const OPERATOR: &str = "operator-secret-7";

fn manifest() -> Value {
    json!({"meta": {"name": "Tide Bridge", "description": "bridges tide tables"}, "adapter": {"id": "tide"},
           "package": {"registry": "npm"}, "runtime": {"node": ">=20"}, "capabilities": ["discovery"],
           "consensus": {"mode": "hcs"}})
}

fn submission(adapter_id: &str, category: Value) -> Value {
    let mut body = json!({
        "adapterId": adapter_id, "adapterName": "Tide Bridge", "entity": "agent",
        "package": {"registry": "npm", "name": "@almanac/tide-bridge", "version": "1.2.0", "integrity": "sha512-x"},
        "config": {"type": "hcs"}, "manifest": manifest(), "keywords": ["tides", "bridges"],
    });
    body.as_object_mut().unwrap().extend(category.as_object().unwrap().clone());
    body
}

/// Polls a submission until it settles.
async fn settled(broker: &Broker, key: &str, id: &str) -> Value {
    let path = format!("/api/v1/adapters/registry/submissions/{id}");
    let mut submission = Value::Null;
    tests::wait::until(&format!("submission {id} settled"), 100, Duration::from_millis(30), async || {
        let (status, body) = broker.send("GET", &path, Some(key), None).await;
        assert_eq!(status, 200, "{body}");
        submission = body["submission"].clone();
        !["pending", "processing"].contains(&submission["status"].as_str().unwrap())
    })
    .await;
    submission
}

const CATEGORIES: &str = "/api/v1/adapters/registry/categories";
const ADAPTERS: &str = "/api/v1/adapters/registry/adapters";

/// An api with an operator key, and two signed-in accounts.
struct Registry {
    broker: Broker,
    user: String,
    other: String,
}

impl Registry {
    async fn start(label: &str) -> Registry {
        let broker = Broker::start(label, &["--operator-key", OPERATOR]);
        let user = broker.sign_in("0.0.1001").await;
        let other = broker.sign_in("0.0.1002").await;
        Registry { broker, user, other }
    }

    /// The operator creates the category "Tide Bridges": the answer.
    async fn tide_bridges(&self) -> Value {
        let body = json!({"name": "Tide Bridges", "description": "adapters for tidal data", "type": "custom"});
        let (status, created) = self.broker.send("POST", CATEGORIES, Some(OPERATOR), Some(body)).await;
        assert_eq!(status, 201, "{created}");
        created
    }

    /// `body` submitted by the holder of `key` (202), once settled.
    async fn submitted(&self, key: &str, body: Value) -> Value {
        let (status, accepted) = self.broker.send("POST", ADAPTERS, Some(key), Some(body)).await;
        assert_eq!((status, &accepted["status"]), (202, &json!("pending")), "{accepted}");
        settled(&self.broker, key, accepted["submissionId"].as_str().unwrap()).await
    }
}

/// Categories: the operator only; idempotent by name and type; 409 for a
/// taken slug; refusals name the field; listed at once, not cached.
#[tokio::test(flavor = "multi_thread")]
async fn categories_are_the_operators_idempotent_and_shown_at_once() {
    let registry = Registry::start("adapter-categories").await;
    let broker = &registry.broker;
    let body = json!({"name": "Tide Bridges", "description": "adapters for tidal data", "type": "custom"});
    assert_eq!(broker.send("POST", CATEGORIES, None, Some(body.clone())).await.0, 401);
    assert_eq!(broker.send("POST", CATEGORIES, Some(&registry.user), Some(body.clone())).await.0, 403);
    let created = registry.tide_bridges().await;
    let category = &created["category"];
    assert_eq!(
        (&category["id"], &category["slug"], &category["type"]),
        (&json!(5), &json!("tide-bridges"), &json!("custom"))
    );
    assert_eq!(registry.tide_bridges().await, created);
    let (status, taken) =
        broker.send("POST", CATEGORIES, Some(OPERATOR), Some(json!({"name": "Other", "slug": "payments"}))).await;
    assert_eq!((status, taken["code"].as_str()), (409, Some("category_exists")));
    for (body, field) in [
        (json!({"description": "no name"}), "name"),
        (json!({"name": "X", "type": "plugin"}), "type"),
        (json!({"name": "X", "slug": "Bad Slug"}), "slug"),
        (json!({"name": "  "}), "name"),
    ] {
        let (status, refusal) = broker.send("POST", CATEGORIES, Some(OPERATOR), Some(body.clone())).await;
        assert_eq!((status, refusal["parameter"].as_str()), (400, Some(field)), "{body}: {refusal}");
    }
    let response = broker.client.get(broker.api.url(CATEGORIES)).send().await.unwrap();
    assert_eq!(response.headers()["cache-control"], "no-cache");
    let listed: Value = response.json().await.unwrap();
    assert!(listed["categories"].as_array().unwrap().iter().any(|c| c["slug"] == json!("tide-bridges")));
}

/// Submissions: refusals name the field and queue nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_submission_refused_names_its_field_and_queues_nothing() {
    let registry = Registry::start("adapter-refusals").await;
    let broker = &registry.broker;
    let good = submission("tide-bridge", json!({"categorySlug": "tide-bridges"}));
    assert_eq!(broker.send("POST", ADAPTERS, None, Some(good.clone())).await.0, 401);
    let mut no_runtime = good.clone();
    no_runtime["manifest"].as_object_mut().unwrap().remove("runtime");
    let mut no_type = good.clone();
    no_type["config"] = json!({"threshold": 1});
    for (body, field) in [
        (no_runtime, "manifest.runtime"),
        (no_type, "config.type"),
        (submission("bad id!", json!({"categorySlug": "tide-bridges"})), "adapterId"),
        (submission("tide-bridge", json!({})), "categorySlug"),
        (submission("tide-bridge", json!({"newCategory": {"name": ""}})), "newCategory.name"),
    ] {
        let (status, refusal) = broker.send("POST", ADAPTERS, Some(&registry.user), Some(body)).await;
        assert_eq!((status, refusal["parameter"].as_str()), (400, Some(field)), "{refusal}");
    }
    assert_eq!(broker.rows("adapter_submissions"), 0);
}

/// Accepted, processed in the background, completed; its status read by
/// its submitter and the operator only.
#[tokio::test(flavor = "multi_thread")]
async fn a_submission_is_completed_in_the_background_and_shown_to_its_submitter() {
    let registry = Registry::start("adapter-submission").await;
    let broker = &registry.broker;
    registry.tide_bridges().await;
    let good = submission("tide-bridge", json!({"categorySlug": "tide-bridges"}));
    let (status, accepted) = broker.send("POST", ADAPTERS, Some(&registry.user), Some(good)).await;
    assert_eq!(
        (status, &accepted["status"], &accepted["network"]),
        (202, &json!("pending"), &json!("mainnet")),
        "{accepted}"
    );
    let id = accepted["submissionId"].as_str().unwrap();
    let done = settled(broker, &registry.user, id).await;
    assert_eq!((&done["status"], &done["adapterId"]), (&json!("completed"), &json!("tide-bridge")), "{done}");
    assert_eq!(done["resultPayload"]["categoryId"], json!(5));
    let path = format!("/api/v1/adapters/registry/submissions/{id}");
    assert_eq!(broker.send("GET", &path, None, None).await.0, 401);
    assert_eq!(broker.send("GET", &path, Some(&registry.other), None).await.0, 403);
    assert_eq!(broker.send("GET", &path, Some(OPERATOR), None).await.0, 200);
    assert_eq!(
        broker.send("GET", "/api/v1/adapters/registry/submissions/sub_none", Some(&registry.user), None).await.0,
        404
    );
}

/// A new category with the submission; an unknown category and another
/// account's adapter id fail, saying why; the listing merges the
/// completed ones at once, and the next build publishes both categories
/// and both adapters.
#[tokio::test(flavor = "multi_thread")]
async fn submissions_fail_saying_why_and_the_next_build_publishes_the_rest() {
    let registry = Registry::start("adapter-published").await;
    let (broker, user, other) = (&registry.broker, registry.user.as_str(), registry.other.as_str());
    registry.tide_bridges().await;
    let done = registry.submitted(user, submission("tide-bridge", json!({"categorySlug": "tide-bridges"}))).await;
    assert_eq!(done["status"], json!("completed"), "{done}");
    let done =
        registry.submitted(user, submission("reef-bridge", json!({"newCategory": {"name": "Reef Bridges"}}))).await;
    assert_eq!(
        (&done["status"], &done["resultPayload"]["categorySlug"]),
        (&json!("completed"), &json!("reef-bridges")),
        "{done}"
    );
    for (key, body, words) in [
        (user, submission("kelp-bridge", json!({"categorySlug": "kelp"})), "not in the adapter registry"),
        (other, submission("tide-bridge", json!({"categorySlug": "tide-bridges"})), "another account"),
        (other, submission("a2a-adapter", json!({"categorySlug": "tide-bridges"})), "already in the registry"),
    ] {
        let failed = registry.submitted(key, body).await;
        assert_eq!(failed["status"], json!("failed"), "{failed}");
        assert!(failed["error"].as_str().unwrap().contains(words), "{failed}");
    }
    let (_, listed) = broker.send("GET", &format!("{ADAPTERS}?category=tide-bridges"), None, None).await;
    let ids: Vec<&str> =
        listed["adapters"].as_array().unwrap().iter().map(|a| a["adapterId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["tide-bridge"], "{listed}");
    assert_eq!(listed["adapters"][0]["category"]["slug"], json!("tide-bridges"));

    broker.journaled().await;
    let sources = Broker::sources();
    broker.rebuild(&tests::strs(&sources)).await;
    let response = broker.client.get(broker.api.url(CATEGORIES)).send().await.unwrap();
    assert_ne!(response.headers()["cache-control"], "no-cache", "from the build's file");
    let published: Value = response.json().await.unwrap();
    let slugs: Vec<&str> =
        published["categories"].as_array().unwrap().iter().map(|c| c["slug"].as_str().unwrap()).collect();
    assert!(slugs.contains(&"tide-bridges") && slugs.contains(&"reef-bridges"), "{slugs:?}");
    let (_, all) = broker.send("GET", &format!("{ADAPTERS}?limit=100"), None, None).await;
    let ids: Vec<&str> = all["adapters"].as_array().unwrap().iter().map(|a| a["adapterId"].as_str().unwrap()).collect();
    assert!(ids.contains(&"tide-bridge") && ids.contains(&"reef-bridge"), "{ids:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_client_writes_to_the_adapter_registry() {
    let broker = Broker::start("adapter-registry-client", &["--operator-key", OPERATOR]);
    let key = broker.sign_in("0.0.1003").await;
    let results = tests::reference_client("adapters.mjs", &[&broker.api.base, OPERATOR, &key]).await;
    assert_eq!(results["status"]["value"]["submission"]["resultPayload"]["categorySlug"], json!("client-bridges"));
}
