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

#[tokio::test(flavor = "multi_thread")]
async fn categories_and_adapters_are_written_shown_at_once_and_published() {
    let broker = Broker::start("adapter-registry", &["--operator-key", OPERATOR]);
    let user = broker.sign_in("0.0.1001").await;
    let other = broker.sign_in("0.0.1002").await;
    let categories = "/api/v1/adapters/registry/categories";

    // Categories: the operator only; idempotent by name and type; 409 for a taken slug.
    let body = json!({"name": "Tide Bridges", "description": "adapters for tidal data", "type": "custom"});
    assert_eq!(broker.send("POST", categories, None, Some(body.clone())).await.0, 401);
    assert_eq!(broker.send("POST", categories, Some(&user), Some(body.clone())).await.0, 403);
    let (status, created) = broker.send("POST", categories, Some(OPERATOR), Some(body.clone())).await;
    assert_eq!(status, 201, "{created}");
    let category = &created["category"];
    assert_eq!(
        (&category["id"], &category["slug"], &category["type"]),
        (&json!(5), &json!("tide-bridges"), &json!("custom"))
    );
    let (status, again) = broker.send("POST", categories, Some(OPERATOR), Some(body)).await;
    assert_eq!((status, &again), (201, &created));
    let (status, taken) =
        broker.send("POST", categories, Some(OPERATOR), Some(json!({"name": "Other", "slug": "payments"}))).await;
    assert_eq!((status, taken["code"].as_str()), (409, Some("category_exists")));
    for (body, field) in [
        (json!({"description": "no name"}), "name"),
        (json!({"name": "X", "type": "plugin"}), "type"),
        (json!({"name": "X", "slug": "Bad Slug"}), "slug"),
        (json!({"name": "  "}), "name"),
    ] {
        let (status, refusal) = broker.send("POST", categories, Some(OPERATOR), Some(body.clone())).await;
        assert_eq!((status, refusal["parameter"].as_str()), (400, Some(field)), "{body}: {refusal}");
    }
    let response = broker.client.get(broker.api.url(categories)).send().await.unwrap();
    assert_eq!(response.headers()["cache-control"], "no-cache");
    let listed: Value = response.json().await.unwrap();
    assert!(listed["categories"].as_array().unwrap().iter().any(|c| c["slug"] == json!("tide-bridges")));

    // Submissions: refusals name the field and queue nothing.
    let adapters = "/api/v1/adapters/registry/adapters";
    let good = submission("tide-bridge", json!({"categorySlug": "tide-bridges"}));
    assert_eq!(broker.send("POST", adapters, None, Some(good.clone())).await.0, 401);
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
        let (status, refusal) = broker.send("POST", adapters, Some(&user), Some(body)).await;
        assert_eq!((status, refusal["parameter"].as_str()), (400, Some(field)), "{refusal}");
    }
    assert_eq!(broker.rows("adapter_submissions"), 0);

    // Accepted, processed in the background, completed.
    let (status, accepted) = broker.send("POST", adapters, Some(&user), Some(good)).await;
    assert_eq!(
        (status, &accepted["status"], &accepted["network"]),
        (202, &json!("pending"), &json!("mainnet")),
        "{accepted}"
    );
    let id = accepted["submissionId"].as_str().unwrap();
    let done = settled(&broker, &user, id).await;
    assert_eq!((&done["status"], &done["adapterId"]), (&json!("completed"), &json!("tide-bridge")), "{done}");
    assert_eq!(done["resultPayload"]["categoryId"], json!(5));
    let path = format!("/api/v1/adapters/registry/submissions/{id}");
    assert_eq!(broker.send("GET", &path, None, None).await.0, 401);
    assert_eq!(broker.send("GET", &path, Some(&other), None).await.0, 403);
    assert_eq!(broker.send("GET", &path, Some(OPERATOR), None).await.0, 200);
    assert_eq!(broker.send("GET", "/api/v1/adapters/registry/submissions/sub_none", Some(&user), None).await.0, 404);

    // A new category with the submission; an unknown category and another
    // account's adapter id fail, saying why.
    let with_new = submission("reef-bridge", json!({"newCategory": {"name": "Reef Bridges"}}));
    let (_, accepted) = broker.send("POST", adapters, Some(&user), Some(with_new)).await;
    let done = settled(&broker, &user, accepted["submissionId"].as_str().unwrap()).await;
    assert_eq!(
        (&done["status"], &done["resultPayload"]["categorySlug"]),
        (&json!("completed"), &json!("reef-bridges")),
        "{done}"
    );
    for (key, body, words) in [
        (&user, submission("kelp-bridge", json!({"categorySlug": "kelp"})), "not in the adapter registry"),
        (&other, submission("tide-bridge", json!({"categorySlug": "tide-bridges"})), "another account"),
        (&other, submission("a2a-adapter", json!({"categorySlug": "tide-bridges"})), "already in the registry"),
    ] {
        let (_, accepted) = broker.send("POST", adapters, Some(key), Some(body)).await;
        let failed = settled(&broker, key, accepted["submissionId"].as_str().unwrap()).await;
        assert_eq!(failed["status"], json!("failed"), "{failed}");
        assert!(failed["error"].as_str().unwrap().contains(words), "{failed}");
    }
    let (_, listed) = broker.send("GET", &format!("{adapters}?category=tide-bridges"), None, None).await;
    let ids: Vec<&str> =
        listed["adapters"].as_array().unwrap().iter().map(|a| a["adapterId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["tide-bridge"], "{listed}");
    assert_eq!(listed["adapters"][0]["category"]["slug"], json!("tide-bridges"));

    // The next build publishes both categories and both adapters.
    broker.journaled().await;
    let sources = Broker::sources();
    broker.rebuild(&sources.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let response = broker.client.get(broker.api.url(categories)).send().await.unwrap();
    assert_ne!(response.headers()["cache-control"], "no-cache", "from the build's file");
    let published: Value = response.json().await.unwrap();
    let slugs: Vec<&str> =
        published["categories"].as_array().unwrap().iter().map(|c| c["slug"].as_str().unwrap()).collect();
    assert!(slugs.contains(&"tide-bridges") && slugs.contains(&"reef-bridges"), "{slugs:?}");
    let (_, all) = broker.send("GET", &format!("{adapters}?limit=100"), None, None).await;
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
