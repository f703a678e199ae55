//! Section A end to end: the generator builds the broker's files and
//! snapshot from `datasets/broker`, the api serves them and searches the
//! index it loads, over real HTTP with percent-encoded path parameters.
//! Every discovery answer is held to the contract's shapes
//! (`tests::shape::broker`).

use std::collections::BTreeSet;
use std::sync::OnceLock;

use broker_model::Agent;
use generator::broker;
use reqwest::header::{CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use search::query::{search, AgentIndex};
use serde_json::{json, Value};
use tests::process::{build, Api};
use tests::shape::{self, broker as contract, Shape};
use tests::{workspace_root, TempDir};

struct Fixture {
    api: Api,
    client: reqwest::Client,
    sources: broker_model::Sources,
}

/// `datasets/` built and served once per run of this test binary; the
/// tests that use it only read.
fn start() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tests::shared_folder("broker-api");
        let (site, data) = (dir.join("site"), dir.join("data"));
        let (ledger, agents) = (workspace_root().join("datasets/ledger"), workspace_root().join("datasets/broker"));
        build(&site, &data, &["--ledger-dir", ledger.to_str().unwrap(), "--broker-dir", agents.to_str().unwrap()]);
        let api = Api::start_shared(&site, &data, &[]);
        let sources = broker::load(&workspace_root().join("datasets/broker")).unwrap();
        Fixture { api, client: tests::unpooled_client(), sources }
    })
}

/// `encodeURIComponent`, as the reference client encodes path parameters.
fn encode(value: &str) -> String {
    broker_site::render::segment(value)
}

impl Fixture {
    async fn get(&self, path: &str) -> (u16, Value) {
        let response = self.client.get(self.api.url(path)).send().await.unwrap();
        let status = response.status().as_u16();
        if status < 300 {
            let content_type = response.headers().get(CONTENT_TYPE).map(|v| v.to_str().unwrap().to_string());
            assert_eq!(content_type.as_deref(), Some("application/json"), "{path}");
        }
        (status, response.json().await.unwrap())
    }

    /// GET, 200, and the body holds to `shape`.
    async fn shaped(&self, path: &str, shape: &Shape) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        if let Err(e) = shape::check(&body, shape, "$") {
            panic!("{path}: {e}");
        }
        body
    }

    async fn post(&self, path: &str, body: &str) -> (u16, Value) {
        let request = self.client.post(self.api.url(path)).header("content-type", "application/json");
        let response = request.body(body.to_string()).send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    fn agent(&self, registry: &str) -> &Agent {
        self.sources.agents.iter().find(|a| a.registry == registry).unwrap()
    }
}

fn hit_ids(body: &Value) -> Vec<String> {
    body["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_discovery_answer_holds_to_the_contract() {
    let f = start();
    let mcp = f.agent("mcp-registry");
    assert!(mcp.uaid.contains('/'), "a UAID with a / in its nativeId is the hard case");
    let erc = f.agent("erc-8004");
    let cases: Vec<(String, Shape)> = vec![
        ("/api/v1/search".into(), contract::search()),
        ("/api/v1/search?q=code+review&limit=5&includeAggregations=true".into(), contract::search()),
        ("/api/v1/search/facets".into(), contract::facets()),
        ("/api/v1/search/facets?adapter=mcp-adapter".into(), contract::facets()),
        ("/api/v1/search/facets?adapter=nobody".into(), contract::facets()),
        ("/api/v1/search/status".into(), contract::status()),
        ("/api/v1/stats".into(), contract::stats()),
        ("/api/v1/registries".into(), contract::strings("registries")),
        ("/api/v1/popular".into(), contract::strings("searches")),
        ("/api/v1/adapters".into(), contract::strings("adapters")),
        ("/api/v1/adapters/details".into(), contract::adapter_details()),
        ("/api/v1/adapters/registry/categories".into(), contract::categories()),
        ("/api/v1/adapters/registry/adapters".into(), contract::registry_adapters()),
        ("/api/v1/adapters/registry/adapters?category=payments&limit=1".into(), contract::registry_adapters()),
        ("/api/v1/registries/nanda/search?q=writer".into(), contract::registry_search()),
        (format!("/api/v1/resolve/{}", encode(&mcp.uaid)), contract::resolve()),
        (format!("/api/v1/resolve/{}", encode(&erc.uaid)), contract::resolve()),
        (format!("/api/v1/uaids/validate/{}", encode(&mcp.uaid)), contract::validate()),
        (format!("/api/v1/agents/badge?uaid={}", encode(&mcp.uaid)), contract::badge()),
        ("/api/v1/agents/badge?uaid=uaid%3Aaid%3Anobody%3Buid%3D0".into(), contract::badge()),
        ("/api/v1/register/additional-registries".into(), contract::additional_registries()),
        ("/api/v1/credits/providers".into(), contract::credit_providers()),
        (format!("/api/v1/agents/{}", encode(&mcp.uaid)), contract::resolve()),
    ];
    for (path, shape) in &cases {
        f.shaped(path, shape).await;
    }
    // POST /search/capabilities answers in GET /search's shape.
    let (status, body) = f.post("/api/v1/search/capabilities", r#"{"capabilities":["text-generation"]}"#).await;
    assert_eq!(status, 200);
    shape::check(&body, &contract::search(), "$").unwrap();
    // Browsers may POST searches from any origin.
    let preflight = f
        .client
        .request(reqwest::Method::OPTIONS, f.api.url("/api/v1/search"))
        .header("Origin", "https://app.example")
        .header("Access-Control-Request-Method", "POST")
        .header("Access-Control-Request-Headers", "content-type")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 204);
    assert!(preflight.headers()["access-control-allow-methods"].to_str().unwrap().contains("POST"));
    assert_eq!(preflight.headers()["access-control-allow-headers"], "content-type");
    // Without vector search, POST /search is 501 (the client falls back).
    let (status, body) = f.post("/api/v1/search", r#"{"query":"code"}"#).await;
    assert_eq!(status, 501, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn static_routes_have_validators_and_answer_304() {
    let f = start();
    let erc = f.agent("erc-8004");
    let routes = [
        "/api/v1/stats".to_string(),
        "/api/v1/providers".into(),
        "/api/v1/bridge/federation/registries".into(),
        format!("/api/v1/agents/{}", encode(&erc.uaid)),
        format!("/api/v1/agents/{}/similar", encode(&erc.uaid)),
        format!("/api/v1/agents/{}/feedback?includeRevoked=true", encode(&erc.uaid)),
    ];
    for route in &routes {
        let first = f.client.get(f.api.url(route)).send().await.unwrap();
        assert_eq!(first.status(), 200, "{route}");
        let etag = first.headers().get(ETAG).unwrap_or_else(|| panic!("{route}: no ETag")).clone();
        assert!(first.headers().get("last-modified").is_some(), "{route}");
        assert!(first.headers()["cache-control"].to_str().unwrap().starts_with("public, max-age="), "{route}");
        let again = f.client.get(f.api.url(route)).header(IF_NONE_MATCH, etag).send().await.unwrap();
        assert_eq!(again.status(), 304, "{route}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_resolve_by_any_spelling_of_their_uaid() {
    let f = start();
    for agent in [f.agent("mcp-registry"), f.agent("hashgraph-online"), f.agent("olas")] {
        let canonical = encode(&agent.uaid);
        // Lower-case escapes, and `:`/`;`/`=` left as they are, name the same agent.
        let lower = canonical.replace("%3A", "%3a").replace("%3B", "%3b");
        let loose = agent.uaid.replace('/', "%2F");
        for spelling in [&canonical, &lower, &loose] {
            // The route's own letters may be escaped too (`%61` is `a`).
            for prefix in ["/api/v1/agents", "/%61pi/v1/%61gents"] {
                let (status, body) = f.get(&format!("{prefix}/{spelling}")).await;
                assert_eq!(status, 200, "{prefix}/{spelling}: {body}");
                assert_eq!(body["agent"]["uaid"], json!(agent.uaid));
            }
            let (status, body) = f.get(&format!("/api/v1/agents/{spelling}")).await;
            assert_eq!(status, 200, "{spelling}: {body}");
            assert_eq!(body["agent"]["uaid"], json!(agent.uaid));
            assert_eq!(body["trust"]["score"], json!(agent.trust_score));
        }
        let (_, resolved) = f.get(&format!("/api/v1/resolve/{canonical}")).await;
        assert_eq!(resolved["agent"], serde_json::to_value(agent).unwrap());
    }
    let check_missing = |path: String| {
        let f = &f;
        async move {
            let (status, body) = f.get(&path).await;
            assert_eq!((status, body["code"].as_str()), (404, Some("agent_not_found")), "{path}");
        }
    };
    let unknown = encode("uaid:aid:nobody;uid=0");
    check_missing(format!("/api/v1/agents/{unknown}")).await;
    check_missing(format!("/api/v1/agents/{unknown}/similar")).await;
    check_missing(format!("/api/v1/agents/{unknown}/feedback")).await;
    check_missing(format!("/api/v1/resolve/{unknown}")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn similar_agents_share_capabilities_ranked() {
    let f = start();
    let agent = f.agent("a2a-registry");
    let body = f.shaped(&format!("/api/v1/agents/{}/similar", encode(&agent.uaid)), &contract::registry_search()).await;
    let hits = body["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.len() <= broker_site::render::SIMILAR_LIMIT);
    let mine: BTreeSet<u64> = agent.capabilities.iter().map(|c| u64::from(*c)).collect();
    let mut previous: Option<(usize, f64)> = None;
    for hit in hits {
        assert_ne!(hit["uaid"], json!(agent.uaid), "an agent is not similar to itself");
        let theirs: BTreeSet<u64> =
            hit["capabilities"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).collect();
        let shared = mine.intersection(&theirs).count();
        assert!(shared > 0);
        assert_eq!(hit["sharedCapabilities"].as_array().unwrap().len(), shared);
        let key = (shared, hit["trustScore"].as_f64().unwrap());
        if let Some(p) = previous {
            assert!(p.0 > key.0 || (p.0 == key.0 && p.1 >= key.1), "ranked by shared, then trust");
        }
        previous = Some(key);
    }
    // The best candidate is not missed: no other agent shares more than the first hit.
    let best = f
        .sources
        .agents
        .iter()
        .filter(|a| a.uaid != agent.uaid)
        .map(|a| a.capabilities.iter().filter(|c| agent.capabilities.contains(c)).count())
        .max()
        .unwrap();
    assert_eq!(hits[0]["sharedCapabilities"].as_array().unwrap().len(), best);
}

#[tokio::test(flavor = "multi_thread")]
async fn feedback_lists_erc_8004_entries() {
    let f = start();
    let with_revoked = f.sources.feedback.iter().find(|e| e.revoked).unwrap();
    let uaid = encode(&with_revoked.uaid);
    let all: Vec<_> = f.sources.feedback.iter().filter(|e| e.uaid == with_revoked.uaid).collect();
    let (status, standing) = f.get(&format!("/api/v1/agents/{uaid}/feedback")).await;
    assert_eq!(status, 200);
    let (_, everything) = f.get(&format!("/api/v1/agents/{uaid}/feedback?includeRevoked=true")).await;
    let (_, explicit) = f.get(&format!("/api/v1/agents/{uaid}/feedback?includeRevoked=false")).await;
    assert_eq!(standing, explicit);
    assert_eq!(everything["entries"].as_array().unwrap().len(), all.len());
    assert_eq!(standing["entries"].as_array().unwrap().len(), all.iter().filter(|e| !e.revoked).count());
    assert!(standing["entries"].as_array().unwrap().iter().all(|e| e["revoked"] == json!(false)));
    assert_eq!(standing["summary"]["revokedFeedbacks"], json!(all.iter().filter(|e| e.revoked).count()));
    let scores: Vec<f64> = all.iter().filter(|e| !e.revoked).map(|e| e.score as f64).collect();
    let average = (scores.iter().sum::<f64>() / scores.len() as f64 * 10.0).round() / 10.0;
    assert_eq!(standing["summary"]["averageScore"], json!(average));
    assert_eq!(standing["summary"]["totalFeedbacks"], json!(scores.len()));
    let (status, body) = f.get(&format!("/api/v1/agents/{uaid}/feedback?includeRevoked=maybe")).await;
    assert_eq!((status, body["parameter"].as_str()), (400, Some("includeRevoked")));
    let other = encode(&f.agent("nanda").uaid);
    let (status, body) = f.get(&format!("/api/v1/agents/{other}/feedback")).await;
    assert_eq!((status, body["code"].as_str()), (400, Some("feedback_unsupported")));
}

#[tokio::test(flavor = "multi_thread")]
async fn search_over_http_is_the_library_search() {
    let f = start();
    let index = AgentIndex::build(f.sources.agents.clone());
    let queries = [
        "",
        "q=code",
        "q=market+intelligence&limit=7&page=2",
        "registries=erc-8004,nanda&sortBy=trust-score",
        "capabilities=text-generation,4&sortBy=name&sortOrder=desc",
        "protocols=mcp&type=mcp-servers&online=true",
        "minTrust=70&minSignals=uptime:90&verified=true",
        "verificationStatus=pending&sortBy=oldest&limit=500",
        "metadata.isFree=true&metadata.languages=de&metadata.deployment.region=eu-*",
        "adapter=nanda-adapter&q=writer",
        "page=99",
    ];
    for raw in queries {
        let (status, body) = f.get(&format!("/api/v1/search?{raw}")).await;
        assert_eq!(status, 200, "{raw}: {body}");
        let page = search(&index, &api::broker::search_parameters::parse(raw).unwrap());
        let want: Vec<&str> = page.hits.iter().map(|i| f.sources.agents[*i].id.as_str()).collect();
        assert_eq!(hit_ids(&body), want, "{raw}");
        assert_eq!(body["total"], json!(page.total), "{raw}");
        assert_eq!(body["aggregations"], serde_json::to_value(&page.aggregations).unwrap(), "{raw}");
    }
    let (_, without) = f.get("/api/v1/search?includeAggregations=false").await;
    assert!(without.get("aggregations").is_none());
    for (raw, parameter) in [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("page=0", "page"),
        ("minTrust=101", "minTrust"),
        ("type=bots", "type"),
    ] {
        let (status, body) = f.get(&format!("/api/v1/search?{raw}")).await;
        assert_eq!((status, body["parameter"].as_str()), (400, Some(parameter)), "{raw}");
        assert!(body["error"].is_string());
    }
    // One registry's search is the general search within it.
    let (_, scoped) = f.get("/api/v1/registries/erc-8004/search?q=analyst&limit=50").await;
    let (_, general) = f.get("/api/v1/search?q=analyst&registries=erc-8004&limit=50").await;
    assert_eq!(hit_ids(&scoped), hit_ids(&general));
    let (status, body) = f.get("/api/v1/registries/nowhere/search").await;
    assert_eq!((status, body["code"].as_str()), (404, Some("registry_not_found")));
}

#[tokio::test(flavor = "multi_thread")]
async fn capability_search_needs_every_capability() {
    let f = start();
    let (status, body) =
        f.post("/api/v1/search/capabilities", r#"{"capabilities":["Text Generation", 7], "limit": 100}"#).await;
    assert_eq!(status, 200, "{body}");
    let want = f.sources.agents.iter().filter(|a| a.capabilities.contains(&0) && a.capabilities.contains(&7)).count();
    assert_eq!(body["total"], json!(want));
    assert!(want > 0);
    for hit in body["hits"].as_array().unwrap() {
        let caps = hit["capabilities"].as_array().unwrap();
        assert!(caps.contains(&json!(0)) && caps.contains(&json!(7)));
    }
    for bad in [
        r#"{"capabilities":[]}"#,
        r#"{"capabilities":[19]}"#,
        r#"{"caps":[1]}"#,
        "not json",
        r#"{"capabilities":[1],"limit":0}"#,
    ] {
        let (status, body) = f.post("/api/v1/search/capabilities", bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["error"].is_string() && body["code"].is_string(), "{bad}");
    }
    // A body error names the field and the rule in JSON's words, and echoes
    // no more than a short excerpt of the input.
    let (_, body) = f.post("/api/v1/search/capabilities", r#"{"capabilities":[1],"limit":"ten"}"#).await;
    assert_eq!(body["parameter"], "limit", "{body}");
    assert_eq!(body["error"], "limit: expected a non-negative integer, got a string", "{body}");
    let (_, body) = f.post("/api/v1/search/capabilities", r#"[["text-generation"]]"#).await;
    assert_eq!(body["error"], "the request body must be a JSON object", "{body}");
    let long_field = format!(r#"{{"capabilities":[1],"{}":1}}"#, "f".repeat(5_000));
    let (_, body) = f.post("/api/v1/search/capabilities", &long_field).await;
    assert!(body["error"].as_str().unwrap().len() < 300, "{body}");
    let huge = format!(r#"{{"capabilities":["{}"]}}"#, "x".repeat(70_000));
    let (status, body) = f.post("/api/v1/search/capabilities", &huge).await;
    assert_eq!((status, body["code"].as_str()), (413, Some("body_too_large")));
}

#[tokio::test(flavor = "multi_thread")]
async fn badges_follow_the_shields_endpoint_schema() {
    let f = start();
    let agent = f.agent("hashgraph-online");
    let uaid = encode(&agent.uaid);
    let check = |query: String, label: &'static str, message: String| {
        let f = &f;
        async move {
            let body = f.shaped(&format!("/api/v1/agents/badge?{query}"), &contract::badge()).await;
            assert_eq!(
                (body["label"].as_str(), body["message"].as_str()),
                (Some(label), Some(message.as_str())),
                "{query}"
            );
            assert!(body.get("isError").is_none(), "{query}");
        }
    };
    check(format!("uaid={uaid}"), "status", agent.verification_status.as_str().to_string()).await;
    check(format!("uaid={uaid}&metric=trust"), "trust", agent.trust_score.to_string()).await;
    check(format!("uaid={uaid}&metric=registry"), "registry", agent.registry.clone()).await;
    check(format!("uaid={uaid}&metric=protocol&label=speaks"), "speaks", agent.protocols.join(" | ")).await;
    check(format!("uaid={uaid}&metric=availability"), "availability", agent.availability_status.clone()).await;
    for style in ["flat", "flat-square", "for-the-badge", "plastic", "social"] {
        let body = f.shaped(&format!("/api/v1/agents/badge?uaid={uaid}&style={style}"), &contract::badge()).await;
        assert_eq!(body["style"], json!(style));
    }
    let body = f.shaped("/api/v1/agents/badge?uaid=uaid%3Aaid%3Anobody%3Buid%3D0", &contract::badge()).await;
    assert_eq!(body["isError"], json!(true));
    for (query, parameter) in [("", "uaid"), ("uaid=x&metric=speed", "metric"), ("uaid=x&style=round", "style")] {
        let (status, body) = f.get(&format!("/api/v1/agents/badge?{query}")).await;
        assert_eq!((status, body["parameter"].as_str()), (400, Some(parameter)), "{query}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn catalog_queries_and_facets() {
    let f = start();
    let catalog = &f.sources.catalog;
    let check = |query: &'static str, want: Vec<&'static str>| {
        let f = &f;
        async move {
            let (status, body) = f.get(&format!("/api/v1/adapters/registry/adapters?{query}")).await;
            assert_eq!(status, 200, "{query}: {body}");
            let got: Vec<&str> =
                body["adapters"].as_array().unwrap().iter().map(|a| a["adapterId"].as_str().unwrap()).collect();
            assert_eq!(got, want, "{query}");
        }
    };
    check("category=payments", vec!["hbar-credits-adapter", "x402-adapter"]).await;
    check("keywords=base", vec!["erc8004-adapter", "virtuals-adapter"]).await;
    check("keywords=base,acp", vec!["virtuals-adapter"]).await;
    check("query=MODELS", vec!["openrouter-adapter"]).await;
    check("entity=ALMANAC&limit=2&offset=1", vec!["a2a-adapter", "mcp-adapter"]).await;
    check("category=nothing", vec![]).await;
    let (_, all) = f.get("/api/v1/adapters/registry/adapters").await;
    assert_eq!(all["total"], json!(catalog.adapter_registry.adapters.len()));
    for (query, parameter) in [("limit=0", "limit"), ("limit=201", "limit"), ("offset=-1", "offset")] {
        let (status, body) = f.get(&format!("/api/v1/adapters/registry/adapters?{query}")).await;
        assert_eq!((status, body["parameter"].as_str()), (400, Some(parameter)), "{query}");
    }
    // Facet options per adapter are exactly the values its agents have.
    let (_, facets) = f.get("/api/v1/search/facets?adapter=mcp-adapter").await;
    let registry = facets["facets"].as_array().unwrap().iter().find(|x| x["key"] == "registries").unwrap();
    assert_eq!(registry["options"], json!([{"value": "mcp-registry", "label": "MCP Registry"}]));
    let (_, none) = f.get("/api/v1/search/facets?adapter=nobody").await;
    assert_eq!(none, json!({"facets": []}));
    let (_, stats) = f.get("/api/v1/stats").await;
    assert_eq!(stats["totalAgents"], json!(f.sources.agents.len()));
    let (_, registries) = f.get("/api/v1/registries").await;
    assert_eq!(registries["registries"].as_array().unwrap().len(), 8, "seven and almanac, the demo agents'");
}

#[tokio::test(flavor = "multi_thread")]
async fn uaids_validate() {
    let f = start();
    let check = |raw: &'static str, decoded: &'static str, valid: bool, formats: Value| {
        let f = &f;
        async move {
            let (status, body) = f.get(&format!("/api/v1/uaids/validate/{raw}")).await;
            assert_eq!(status, 200, "{raw}");
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
    let post = f.client.post(f.api.url("/api/v1/uaids/validate/uaid%3Aaid%3Ax%3Buid%3D0")).send().await.unwrap();
    assert_eq!(post.status(), 405);
}

/// `datasets/` built with a real embedding provider on loopback (the
/// model `bag-64`), and an api on it that embeds queries with the same
/// model.
struct Hybrid {
    server: tests::embeddings::EmbeddingServer,
    dir: TempDir,
    f: Fixture,
}

impl Hybrid {
    async fn start(label: &str) -> Hybrid {
        let server = tests::embeddings::EmbeddingServer::start().await;
        let dir = TempDir::new(label);
        Hybrid::build(&dir, &server.base());
        let api = Hybrid::api(&dir, &server.base(), "bag-64");
        let sources = broker::load(&workspace_root().join("datasets/broker")).unwrap();
        Hybrid { server, dir, f: Fixture { api, client: http_client::client(), sources } }
    }

    /// The datasets built into `dir`, embedded by `bag-64` at `base`.
    fn build(dir: &TempDir, base: &str) {
        let (ledger, agents) = (workspace_root().join("datasets/ledger"), workspace_root().join("datasets/broker"));
        let (site, data) = (dir.path().join("site"), dir.path().join("data"));
        let sources = ["--ledger-dir", ledger.to_str().unwrap(), "--broker-dir", agents.to_str().unwrap()];
        build(&site, &data, &[&sources[..], &["--embeddings-url", base, "--embeddings-model", "bag-64"]].concat());
    }

    /// An api on the build, embedding queries by `model` at `base`.
    fn api(dir: &TempDir, base: &str, model: &str) -> Api {
        let (site, data) = (dir.path().join("site"), dir.path().join("data"));
        Api::start_with(&site, &data, &["--embeddings-url", base, "--embeddings-model", model])
    }
}

/// Each agent's text is embedded once; a second run embeds nothing again:
/// the warehouse caches by model and text.
#[tokio::test(flavor = "multi_thread")]
async fn a_build_embeds_each_text_once_and_caches_it_by_model() {
    use std::sync::atomic::Ordering;
    let hybrid = Hybrid::start("hybrid-build").await;
    let counters = &hybrid.server.counters;
    let texts: BTreeSet<String> = hybrid.f.sources.agents.iter().map(embeddings::text).collect();
    assert_eq!(counters.texts.load(Ordering::SeqCst), texts.len());
    let requests = counters.requests.load(Ordering::SeqCst);
    Hybrid::build(&hybrid.dir, &hybrid.server.base());
    assert_eq!(counters.requests.load(Ordering::SeqCst), requests);
    let status = hybrid.f.shaped("/api/v1/search/status", &contract::status()).await;
    assert_eq!(status["vectorStatus"]["mode"], json!("healthy"), "{status}");
    assert_eq!(status["vectorStatus"]["enabled"], json!(true));
}

/// An agent's own text finds it first (cosine 1 and the best BM25F);
/// filters narrow the candidates, offset pages through them, bad bodies
/// are 400; the reference client reads the hybrid answer itself (no
/// fallback).
#[tokio::test(flavor = "multi_thread")]
async fn hybrid_search_finds_an_agent_by_its_own_text_within_its_filters() {
    let hybrid = Hybrid::start("hybrid-search").await;
    let f = &hybrid.f;
    let target = &f.sources.agents[42];
    let body = json!({"query": embeddings::text(target), "limit": 5}).to_string();
    let (status, answer) = f.post("/api/v1/search", &body).await;
    assert_eq!(status, 200, "{answer}");
    shape::check(&answer, &contract::vector_search(), "$").unwrap();
    assert_eq!(answer["hits"][0]["agent"]["uaid"], json!(target.uaid));
    assert_eq!(answer["total"], json!(f.sources.agents.len()));
    let scores: Vec<f64> = answer["hits"].as_array().unwrap().iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");

    let body =
        json!({"query": "fraud detection", "filter": {"registry": "erc-8004", "type": ["ai-agents"]}, "limit": 100});
    let (_, answer) = f.post("/api/v1/search", &body.to_string()).await;
    let erc = f.sources.agents.iter().filter(|a| a.registry == "erc-8004").count();
    assert_eq!(answer["total"], json!(erc));
    assert!(answer["hits"].as_array().unwrap().iter().all(|h| h["agent"]["registry"] == "erc-8004"));
    let body = json!({"query": "fraud detection", "filter": {"registry": "erc-8004"}, "limit": 3, "offset": 2});
    let (_, paged) = f.post("/api/v1/search", &body.to_string()).await;
    assert_eq!(paged["hits"][0]["agent"]["uaid"], answer["hits"][2]["agent"]["uaid"]);

    for bad in [
        r#"{"query":" "}"#,
        r#"{"query":"x","limit":101}"#,
        r#"{"query":"x","filter":{"type":"bots"}}"#,
        r#"{"query":"x","limit":null}"#,
        r#"{"query":"x","offset":null}"#,
        r#"{"query":"x","filter":null}"#,
        r#"{"q":"x"}"#,
        "[]",
    ] {
        let (status, body) = f.post("/api/v1/search", bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }

    let erc = f.sources.feedback[0].uaid.clone();
    let results = reference_client(&f.api.base, &target.uaid, &erc).await;
    assert!(results["vectorSearch"]["value"]["hits"][0]["agent"]["uaid"].is_string(), "{}", results["vectorSearch"]);
    assert_eq!(results["searchStatus"]["value"]["vectorStatus"]["mode"], json!("healthy"));
}

/// A provider failure is a 500 and shows in the status until a call
/// succeeds.
#[tokio::test(flavor = "multi_thread")]
async fn a_provider_failure_shows_in_the_status_until_a_call_succeeds() {
    let hybrid = Hybrid::start("hybrid-failure").await;
    let f = &hybrid.f;
    hybrid.server.counters.failures.store(1, std::sync::atomic::Ordering::SeqCst);
    let (status, body) = f.post("/api/v1/search", r#"{"query":"translation"}"#).await;
    assert_eq!((status, body["code"].as_str()), (500, Some("embedding_failed")));
    let (_, status) = f.get("/api/v1/search/status").await;
    assert_eq!(status["vectorStatus"]["mode"], json!("degraded"));
    assert!(status["vectorStatus"]["lastError"].is_string());
    let (code, _) = f.post("/api/v1/search", r#"{"query":"translation"}"#).await;
    assert_eq!(code, 200);
    let (_, status) = f.get("/api/v1/search/status").await;
    assert_eq!(status["vectorStatus"]["mode"], json!("healthy"));
}

/// Queries embedded by another model than the agents' cannot be compared:
/// the status says so, and hybrid search is 501.
#[tokio::test(flavor = "multi_thread")]
async fn queries_embedded_by_another_model_are_not_compared() {
    let hybrid = Hybrid::start("hybrid-other-model").await;
    let other = Hybrid::api(&hybrid.dir, &hybrid.server.base(), "other");
    let client = &hybrid.f.client;
    let status: Value = client.get(other.url("/api/v1/search/status")).send().await.unwrap().json().await.unwrap();
    assert_eq!(status["vectorStatus"]["mode"], json!("error"));
    let search = client.post(other.url("/api/v1/search")).header("content-type", "application/json");
    assert_eq!(search.body(r#"{"query":"x"}"#).send().await.unwrap().status(), 501);
}

/// The reference client runs every discovery call against the api; none
/// may throw.
async fn reference_client(base: &str, uaid: &str, erc_uaid: &str) -> Value {
    tests::reference_client("discovery.mjs", &[base, uaid, erc_uaid]).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_client_parses_every_discovery_answer() {
    let f = start();
    let (mcp, erc) = (f.agent("mcp-registry"), f.sources.feedback.iter().find(|e| e.revoked).unwrap());
    let results = reference_client(&f.api.base, &mcp.uaid, &erc.uaid).await;
    let value = |call: &str| results[call]["value"].clone();
    // What the client read is what the routes serve.
    let (_, search) = f.get("/api/v1/search?q=code&limit=3").await;
    assert_eq!(hit_ids(&value("search")), hit_ids(&search));
    assert_eq!(value("resolveUaid")["agent"]["uaid"], json!(mcp.uaid));
    assert_eq!(value("validateUaid")["valid"], json!(true));
    assert_eq!(value("stats")["totalAgents"], json!(f.sources.agents.len()));
    let revoked = f.sources.feedback.iter().filter(|e| e.uaid == erc.uaid).count();
    assert_eq!(value("getAgentFeedbackWithRevoked")["entries"].as_array().unwrap().len(), revoked);
    assert_eq!(value("adapterRegistryAdapters")["adapters"].as_array().unwrap().len(), 2);
    // Without vector search the client falls back to keyword search.
    assert!(value("vectorSearch")["hits"].is_array());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_next_build_includes_the_journal() {
    let dir = TempDir::new("broker-journal");
    let (site, data) = (dir.path().join("site"), dir.path().join("data"));
    let (ledger, agents) = (workspace_root().join("datasets/ledger"), workspace_root().join("datasets/broker"));
    // The first build lacks the public topic's newest page.
    let partial = dir.path().join("ledger");
    for entry in walk(&ledger) {
        let to = partial.join(entry.strip_prefix(&ledger).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        if !entry.ends_with("0.0.4350190/000000000201-000000000290.json") {
            std::fs::copy(&entry, &to).unwrap();
        }
    }
    build(&site, &data, &["--ledger-dir", partial.to_str().unwrap(), "--broker-dir", agents.to_str().unwrap()]);
    let api = Api::start(&site, &data);
    let sources = broker::load(&agents).unwrap();
    let f = Fixture { api, client: http_client::client(), sources };
    let (_, before) = f.get("/health").await;
    assert_eq!(before["broker"]["agents"], json!(302), "300 generated and the 2 demo agents");

    // A build that changes only the ledger keeps the api's agent index.
    let args = ["--ledger-dir", ledger.to_str().unwrap(), "--broker-dir", agents.to_str().unwrap()];
    build(&site, &data, &args);
    let after = wait_for_build(&f, &before["build"]).await;
    assert_eq!(after["broker"], before["broker"], "the agent index was loaded again");

    let mut newcomer = broker_model::generate::agents(1, 4242).pop().unwrap();
    newcomer.id = format!("{}:journal-newcomer", newcomer.registry);
    newcomer.name = "Zephyrine Cartographer".into();
    let gone = f.agent("nanda").clone();
    let journal = data.join("journal");
    std::fs::create_dir_all(&journal).unwrap();
    let lines = [
        json!({"seq": 1, "at": "2026-11-20T09:00:00Z", "event": "register", "agent": newcomer}),
        json!({"seq": 2, "at": "2026-11-20T09:05:00Z", "event": "delete", "uaid": gone.uaid}),
        json!({"seq": 3, "at": "2026-11-20T09:06:00Z", "event": "search", "query": "Zephyrine", "hits": 1}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(journal.join("20261120T090000Z.jsonl"), text).unwrap();
    build(&site, &data, &args);
    let journaled = wait_for_build(&f, &after["build"]).await;
    assert_ne!(journaled["broker"]["fingerprint"], after["broker"]["fingerprint"]);
    let (status, body) = f.get(&format!("/api/v1/agents/{}", encode(&newcomer.uaid))).await;
    assert_eq!((status, body["agent"]["name"].as_str()), (200, Some("Zephyrine Cartographer")));
    let (_, found) = f.get("/api/v1/search?q=zephyrine").await;
    assert_eq!(found["hits"][0]["uaid"], json!(newcomer.uaid));
    let (status, _) = f.get(&format!("/api/v1/agents/{}", encode(&gone.uaid))).await;
    assert_eq!(status, 404);
    let (_, popular) = f.get("/api/v1/popular").await;
    assert_eq!(popular["searches"][0], json!("zephyrine"));
    let (_, stats) = f.get("/api/v1/stats").await;
    assert_eq!(stats["totalAgents"], json!(f.sources.agents.len()));

    // A line that does not apply fails the build and names itself; the live build stays.
    let bad = json!({"seq": 4, "at": "2026-11-20T10:00:00Z", "event": "update", "agent": gone});
    std::fs::write(journal.join("20261120T100000Z.jsonl"), format!("{bad}\n")).unwrap();
    let mut run = vec!["build", "--site-dir", site.to_str().unwrap(), "--data-dir", data.to_str().unwrap()];
    run.extend_from_slice(&args);
    let out = tests::process::generator(&run);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(log.contains("20261120T100000Z.jsonl:1") && log.contains("not indexed"), "{log}");
    let (status, _) = f.get(&format!("/api/v1/agents/{}", encode(&newcomer.uaid))).await;
    assert_eq!(status, 200);
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// `/health` once the api serves a build other than `old`.
async fn wait_for_build(f: &Fixture, old: &Value) -> Value {
    let mut health = Value::Null;
    tests::wait::until("the api serving a new build", 100, std::time::Duration::from_millis(50), async || {
        health = f.get("/health").await.1;
        health["build"] != *old
    })
    .await;
    health
}
