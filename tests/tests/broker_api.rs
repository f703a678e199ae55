//! Section A end to end, as far as it is built: UAID validation over real
//! HTTP, with percent-encoded path parameters.

use serde_json::{json, Value};
use tests::process::{build, Api};
use tests::{workspace_root, TempDir};

#[tokio::test(flavor = "multi_thread")]
async fn uaids_validate() {
    let dir = TempDir::new("broker-api");
    let (site, data) = (dir.path().join("site"), dir.path().join("data"));
    let ledger = workspace_root().join("datasets/ledger");
    build(&site, &data, &["--ledger-dir", ledger.to_str().unwrap()]);
    let api = Api::start(&site, &data);
    let client = reqwest::Client::new();
    let check = |raw: &'static str, decoded: &'static str, valid: bool, formats: Value| {
        let client = client.clone();
        let url = api.url(&format!("/api/v1/uaids/validate/{raw}"));
        async move {
            let response = client.get(&url).send().await.unwrap();
            assert_eq!(response.status(), 200, "{raw}");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body, json!({"uaid": decoded, "valid": valid, "formats": formats}), "{raw}");
        }
    };
    check("uaid%3Aaid%3Ax%3Buid%3D0", "uaid:aid:x;uid=0", true, json!(["uaid:aid"])).await;
    check(
        "uaid:did:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK;uid=0;proto=hcs-10",
        "uaid:did:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK;uid=0;proto=hcs-10",
        true,
        json!(["uaid:did"]),
    )
    .await;
    check("uaid%3Aaid%3Ax", "uaid:aid:x", false, json!([])).await;
    check("did%3Akey%3Az6Mk", "did:key:z6Mk", false, json!([])).await;
    check("uaid%3Aaid%3Ax%3Buid%3D0%3Buid%3D1", "uaid:aid:x;uid=0;uid=1", false, json!([])).await;
    let post = client.post(api.url("/api/v1/uaids/validate/uaid%3Aaid%3Ax%3Buid%3D0")).send().await.unwrap();
    assert_eq!(post.status(), 405);
}
