//! The OpenAPI document: the build publishes the bytes the api serves, and
//! schemathesis (the field's property-based API tester, from PyPI) finds
//! nothing wrong when it runs against the live api: no server error, every
//! status, content type, header and body what the document says, and data
//! the document calls invalid refused.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tests::process::{binary, build, Api};
use tests::{workspace_root, TempDir};

/// `api openapi` into `path`.
fn write_document(path: &Path) {
    let out = Command::new(binary("api")).arg("openapi").output().unwrap();
    assert!(out.status.success(), "api openapi: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(path, &out.stdout).unwrap();
}

/// A build of the datasets with the document (and `build_extra`), and the
/// api on it (with `extra`).
fn site(root: &Path, build_extra: &[&str], extra: &[&str]) -> Api {
    let (site, data) = (root.join("site"), root.join("data"));
    std::fs::create_dir_all(&data).unwrap();
    let document = root.join("openapi.json");
    write_document(&document);
    let datasets = workspace_root().join("datasets");
    let ledger = datasets.join("ledger");
    let broker = datasets.join("broker");
    let guard = datasets.join("guard");
    build(
        &site,
        &data,
        &[
            "--ledger-dir",
            ledger.to_str().unwrap(),
            "--broker-dir",
            broker.to_str().unwrap(),
            "--guard-dir",
            guard.to_str().unwrap(),
            "--openapi",
            document.to_str().unwrap(),
        ]
        .into_iter()
        .chain(build_extra.iter().copied())
        .collect::<Vec<_>>(),
    );
    Api::start_with(&site, &data, extra)
}

#[tokio::test]
async fn the_build_publishes_the_document_the_api_serves() {
    let root = TempDir::new("openapi-build");
    let api = site(root.path(), &[], &[]);
    let served = http_client::get(api.url("/api/v1/openapi.json")).await.unwrap();
    assert_eq!(served.status(), 200);
    let etag = served.headers()["etag"].to_str().unwrap().to_string();
    assert_eq!(served.headers()["content-type"], "application/json");
    let body = served.bytes().await.unwrap();
    let built = std::fs::read(root.path().join("site/current/api/v1/openapi.json")).unwrap();
    assert_eq!(body.as_ref(), built.as_slice(), "the build holds the bytes the api serves");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.path().join("site/current/_manifest.json")).unwrap()).unwrap();
    let entry = manifest["routes"].as_array().unwrap().iter().find(|e| e["route"] == "/api/v1/openapi.json").unwrap();
    assert_eq!(entry["etag"], etag.as_str(), "with the same ETag");
    let document: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    assert!(document["paths"]["/hcs20/holders"]["get"]["parameters"].is_array());
    // A 304 for the ETag, as for any published file.
    let again =
        http_client::client().get(api.url("/api/v1/openapi.json")).header("if-none-match", &etag).send().await.unwrap();
    assert_eq!(again.status(), 304);
}

/// Values for path parameters that name things the build has, so the
/// run reaches answers and not only 404s.
fn parameters(root: &Path) -> String {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("site/current/_manifest.json")).unwrap()).unwrap();
    let routes: Vec<&str> =
        manifest["routes"].as_array().unwrap().iter().map(|e| e["route"].as_str().unwrap()).collect();
    let uaid = routes.iter().find_map(|r| r.strip_prefix("/api/v1/agents/").filter(|u| !u.contains('/'))).unwrap();
    let uaid = percent_encoding::percent_decode_str(uaid).decode_utf8().unwrap();
    let account = routes.iter().find_map(|r| r.strip_prefix("/hcs20/account/")).unwrap();
    // A token with a second page of holders (the directory has one too).
    let token = routes.iter().find_map(|r| r.strip_prefix("/tokens/")?.strip_suffix("/holders/2")).unwrap();
    let (topic, tick) = token.split_once('/').unwrap();
    format!(
        "[parameters]\n\"path.uaid\" = {uaid:?}\n\"path.accountId\" = {account:?}\n\"path.file\" = \"ticks.parquet\"\n\
         \"path.registry\" = \"hashgraph-online\"\n\"path.topic\" = {topic:?}\n\"path.tick\" = {tick:?}\n\
         \"path.page\" = \"2\"\n\n{UNREACHABLE}"
    )
}

/// The datasets' agents live at addresses no test can reach. Opening a
/// session with one, or routing to one, is a 500 the spec names (section
/// 4: "500 cannot connect to the agent", `routing_failed`); on these
/// operations, and these only, that 500 is expected.
const UNREACHABLE: &str = r#"[[operations]]
include-operation-id = ["createChatSession", "sendChatMessage", "routeToAgent"]
checks.not_a_server_error.expected-statuses = ["1xx", "2xx", "3xx", "4xx", 500]
"#;

#[tokio::test(flavor = "multi_thread")]
async fn schemathesis_finds_nothing_wrong_with_the_live_api() {
    let st = std::env::var("ALMANAC_SCHEMATHESIS")
        .expect("ALMANAC_SCHEMATHESIS names schemathesis's `st` (`make test` installs it and sets it)");
    let seconds = std::env::var("ALMANAC_SCHEMATHESIS_SECONDS").unwrap_or_else(|_| "120".into());
    let root = TempDir::new("schemathesis");
    // Every optional provider configured, with the strict peers the other
    // tests use, so no route answers 503 for want of one.
    let card = tests::card::CardProvider::start("sk_test_schemathesis").await;
    let models = tests::models::ModelServer::start("sk-summary").await;
    let embeddings = tests::embeddings::EmbeddingServer::start().await;
    let (card_url, model_url, embeddings_url) = (card.url(), models.base(), embeddings.base());
    // A network for inscriptions and the skills registry.
    let mirror = std::sync::Arc::new(tests::mirror::MirrorServer::start(Default::default(), Duration::ZERO).await);
    tests::network::known(&mirror, "0.0.1003");
    let network = tests::network::Network::start(mirror.clone(), &["0.0.3"], &["0.0.1003"]).await;
    let (mirror_url, hapi_nodes, inscription_key) =
        (mirror.url(), network.hapi_nodes(), tests::network::private_key("0.0.1003"));
    // A chain with the Programmable Secrets contracts, and a master key.
    let anvil = tests::evm::Anvil::start().unwrap();
    let deployment = tests::evm::deploy_protocol(&tests::evm::Chain::new(&anvil.url), "anvil").await.unwrap();
    let (chain_file, master_file) = (root.path().join("anvil.json"), root.path().join("master-key"));
    std::fs::write(&chain_file, deployment.manifest().to_string()).unwrap();
    std::fs::write(&master_file, "11".repeat(32)).unwrap();
    let (chain_file, master_file) = (chain_file.to_str().unwrap(), master_file.to_str().unwrap());
    let provider = ["--embeddings-url", &embeddings_url, "--embeddings-model", "bag-64"];
    let api = site(
        root.path(),
        &provider,
        &[
            provider[0],
            provider[1],
            provider[2],
            provider[3],
            "--card-provider-url",
            &card_url,
            "--card-secret-key",
            "sk_test_schemathesis",
            "--card-publishable-key",
            "pk_test_schemathesis",
            "--card-webhook-secret",
            "whsec_schemathesis",
            "--summarizer-url",
            &model_url,
            "--summarizer-model",
            tests::models::MODEL,
            "--summarizer-key",
            "sk-summary",
            "--inscription-account",
            "0.0.1003",
            "--inscription-key",
            &inscription_key,
            "--inscription-mirror-url",
            &mirror_url,
            "--hapi-node",
            &hapi_nodes,
            "--secrets-chain",
            chain_file,
            "--secrets-master-key-file",
            master_file,
            // Quotas far above what the run sends: it tests answers, not
            // the limiter (tested on its own).
            "--guard-rate",
            "1000000",
            "--guard-burst",
            "1000000",
            "--mcp-rate",
            "1000000",
            "--mcp-burst",
            "1000000",
            "--sign-in-rate",
            "1000000",
            "--sign-in-burst",
            "1000000",
        ],
    );
    let config = root.path().join("schemathesis.toml");
    std::fs::write(&config, parameters(root.path())).unwrap();
    let report = root.path().join("report");
    let st = st.clone();
    let url = api.url("/api/v1/openapi.json");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(st)
            .arg("--config-file")
            .arg(&config)
            .args(["run", &url, "--max-time", &seconds, "--workers", "2", "--seed", "1"])
            .args(["--phases", "examples,coverage,fuzzing,stateful"])
            // Whether schema-valid data is accepted depends on what no
            // schema can say (a signature, an open session, an agent that
            // exists): those refusals are 4xx with a reason, and the other
            // checks hold them to the document.
            .args(["--exclude-checks", "positive_data_acceptance"])
            .arg("--report-dir")
            .arg(&report)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
    eprintln!("{summary}");
    assert!(out.status.success(), "schemathesis found failures:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("Tested: "), "the run tested operations:\n{summary}");
}
