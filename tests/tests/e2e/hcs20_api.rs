//! Section C end to end: the generator builds the checked-in corpus, the
//! api serves it on loopback, and real HTTP requests check every route,
//! shape, header and error.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::OnceLock;

use reqwest::{Client, StatusCode};
use serde_json::Value;
use shared::manifest::Manifest;
use tests::process::{build, Api};
use tests::workspace_root;

struct Site {
    api: Api,
    manifest: Manifest,
    build_dir: std::path::PathBuf,
    client: Client,
}

/// The checked-in corpus, built and served once per run of this test
/// binary; every test reads it, none changes it.
fn site() -> &'static Site {
    static SITE: OnceLock<Site> = OnceLock::new();
    SITE.get_or_init(|| {
        let dir = tests::shared_folder("hcs20-api");
        let (site, data) = (dir.join("site"), dir.join("data"));
        let ledger = workspace_root().join("datasets/ledger");
        build(&site, &data, &["--ledger-dir", ledger.to_str().unwrap()]);
        let build_dir = std::fs::canonicalize(site.join("current")).unwrap();
        let manifest = Manifest::load(&build_dir).unwrap();
        let api = Api::start_shared(&site, &data, &[]);
        Site { api, manifest, build_dir, client: tests::unpooled_client() }
    })
}

impl Site {
    async fn get(&self, path: &str) -> (StatusCode, reqwest::header::HeaderMap, Vec<u8>) {
        let response = self.client.get(self.api.url(path)).send().await.unwrap();
        (response.status(), response.headers().clone(), response.bytes().await.unwrap().to_vec())
    }

    async fn json(&self, path: &str) -> Value {
        let (status, headers, body) = self.get(path).await;
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
        assert_eq!(headers["content-type"], "application/json", "{path}");
        serde_json::from_slice(&body).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_manifest_route_is_served_with_its_headers() {
    let site = site();
    assert!(site.manifest.routes.len() > 50, "the corpus should give many routes");
    for entry in &site.manifest.routes {
        let (status, headers, body) = site.get(entry.route()).await;
        assert_eq!(status, 200, "{}", entry.route());
        let file = std::fs::read(site.build_dir.join(entry.file())).unwrap();
        assert_eq!(body, file, "{}: body differs from its file", entry.route());
        assert_eq!(headers["etag"], entry.etag.as_str());
        assert_eq!(headers["last-modified"], entry.last_modified.as_str());
        assert_eq!(headers["cache-control"], entry.cache_control);
        assert_eq!(headers["content-type"], entry.content_type);
        assert_eq!(headers["access-control-allow-origin"], "*");
        assert_eq!(shared::manifest::etag(&body), entry.etag, "ETag is the SHA-256 of the bytes");
    }
}

fn assert_types(value: &Value, fields: &[(&str, &str)], context: &str) {
    for (field, kind) in fields {
        let v = value.get(*field).unwrap_or_else(|| panic!("{context}: missing {field} in {value}"));
        let ok = match *kind {
            "string" => v.is_string(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            "string|null" => v.is_string() || v.is_null(),
            other => panic!("unknown kind {other}"),
        };
        assert!(ok, "{context}: {field} should be {kind}, got {v}");
    }
}

fn is_iso(text: &str) -> bool {
    text.len() == 24 && text.ends_with('Z') && text.as_bytes()[10] == b'T'
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tick_list_and_stats_match_the_spec() {
    let site = site();
    let ticks = site.json("/hcs20").await;
    let ticks = ticks.as_array().expect("/hcs20 is an array");
    assert!(ticks.len() >= 10);
    for tick in ticks {
        assert_types(
            tick,
            &[
                ("tick", "string"),
                ("topic", "string"),
                ("maxSupply", "number"),
                ("decimals", "number"),
                ("memo", "string"),
                ("holders", "number"),
                ("mints", "number"),
                ("_created_at", "string"),
            ],
            "/hcs20",
        );
        assert!(is_iso(tick["_created_at"].as_str().unwrap()));
    }

    let stats = site.json("/hcs20/stats").await;
    assert_types(&stats, &[("success", "boolean"), ("data", "object"), ("timestamp", "string")], "stats");
    assert_types(
        &stats["data"],
        &[
            ("totalTicks", "number"),
            ("totalMints", "number"),
            ("totalBurns", "number"),
            ("totalTransfers", "number"),
            ("totalHolders", "number"),
        ],
        "stats.data",
    );
    assert!(is_iso(stats["timestamp"].as_str().unwrap()));
    assert_eq!(stats["data"]["totalTicks"].as_u64().unwrap() as usize, ticks.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn ecosystem_stats_and_accounts_match_the_spec() {
    let site = site();
    let eco = site.json("/hcs20/ecosystem-stats").await;
    for entry in eco["topTicksByHolders"].as_array().unwrap() {
        assert_types(entry, &[("tick", "string"), ("holderCount", "number")], "topTicksByHolders");
    }
    for entry in eco["topTicksByMints"].as_array().unwrap() {
        assert_types(entry, &[("tick", "string"), ("mintCount", "number")], "topTicksByMints");
    }
    let holders: Vec<u64> =
        eco["topTicksByHolders"].as_array().unwrap().iter().map(|e| e["holderCount"].as_u64().unwrap()).collect();
    assert!(holders.windows(2).all(|w| w[0] >= w[1]), "ranked by holders");

    let account = site.json("/hcs20/account/0.0.1001").await;
    assert_types(
        &account,
        &[("success", "boolean"), ("accountId", "string"), ("balances", "array"), ("count", "number")],
        "account",
    );
    for b in account["balances"].as_array().unwrap() {
        assert_types(
            b,
            &[("tick", "string"), ("topic", "string"), ("balance", "number"), ("holder", "string")],
            "balance",
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn holders_and_transactions_match_the_spec() {
    let site = site();
    let page = site.json("/hcs20/holders?tick=alm&topic=0.0.4350190").await;
    for h in page["holders"].as_array().unwrap() {
        assert_types(
            h,
            &[("holderId", "string"), ("balance", "number"), ("tick", "string"), ("topic", "string")],
            "holder",
        );
    }
    assert_types(
        &page["pagination"],
        &[
            ("page", "number"),
            ("pageSize", "number"),
            ("total", "number"),
            ("totalPages", "number"),
            ("hasNextPage", "boolean"),
            ("hasPreviousPage", "boolean"),
        ],
        "pagination",
    );

    for path in ["/hcs20/transactions", "/hcs20/transactions?tick=alm&topic=0.0.4350190"] {
        let tx = site.json(path).await;
        assert_types(
            &tx,
            &[
                ("mints", "array"),
                ("burns", "array"),
                ("transfers", "array"),
                ("totalMints", "number"),
                ("totalBurns", "number"),
                ("totalTransfers", "number"),
            ],
            path,
        );
        for kind in ["mints", "burns", "transfers"] {
            let list = tx[kind].as_array().unwrap();
            assert!(list.len() <= 25);
            for t in list {
                assert_types(
                    t,
                    &[
                        ("id", "string"),
                        ("op", "string"),
                        ("tick", "string"),
                        ("topic", "string"),
                        ("amount", "number"),
                        ("from", "string|null"),
                        ("to", "string|null"),
                        ("payer", "string"),
                        ("memo", "string|null"),
                        ("consensusTimestamp", "string"),
                        ("timestamp", "string"),
                        ("sequenceNumber", "number"),
                    ],
                    path,
                );
            }
            let times: Vec<&str> = list.iter().map(|t| t["consensusTimestamp"].as_str().unwrap()).collect();
            assert!(times.windows(2).all(|w| w[0] >= w[1]), "{path} {kind}: newest first");
        }
    }
}

fn balance_of(account: &Value, tick: &str, topic: &str) -> Option<u64> {
    account["balances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["tick"] == tick && b["topic"] == topic)
        .map(|b| b["balance"].as_u64().unwrap())
}

/// Figures that follow from the scripted part of the corpus (see
/// `datagen::rules_corpus`): each names the rule that decides it.
#[tokio::test(flavor = "multi_thread")]
async fn balances_follow_the_rules() {
    let site = site();
    const PUBLIC: &str = "0.0.4350190";
    const GUILD: &str = "0.0.5000001";
    const COMMUNITY: &str = "0.0.5000002";
    let cases: &[(&str, &str, &str, Option<u64>, &str)] = &[
        (
            "0.0.1001",
            "alm",
            PUBLIC,
            Some(750),
            "mint 1000, transfer 250 out; a transfer paid by someone else is refused; a self-transfer changes nothing",
        ),
        ("0.0.1002", "alm", PUBLIC, Some(400), "leading zeros (0500) and a checksummed id; burn by the owner only"),
        ("0.0.1003", "alm", PUBLIC, None, "over-limit, zero, negative, 19-digit and unknown-tick mints all refused"),
        ("0.0.1007", "alm", PUBLIC, None, "balance back to zero: not listed"),
        ("0.0.1008", "alm", PUBLIC, Some(200), "the three-chunk transfer of 50 applied"),
        ("0.0.1009", "alm", PUBLIC, Some(50), "a chunked mint with parts from two payers refused"),
        ("0.0.1005", "loud", PUBLIC, Some(500), "upper-case p/op and tick deploy; mint past max refused"),
        ("0.0.1006", "tiny", PUBLIC, Some(6), "burnt points are not mintable again"),
        ("0.0.3100", "guild", GUILD, Some(3800), "private topic: a third party's transfer is authorised"),
        ("0.0.3101", "guild", GUILD, Some(1000), "private topic: burn authorised"),
        ("0.0.2001", "alm", COMMUNITY, Some(1000), "one namespace per topic: alm exists on two topics"),
        (
            "0.0.2001",
            "early",
            COMMUNITY,
            Some(10),
            "deploy before the registration counts; public registered topic keeps the payer rule",
        ),
        ("0.0.2009", "early", COMMUNITY, None, "transfer paid by the receiver refused"),
    ];
    for (account, tick, topic, expected, rule) in cases {
        let value = site.json(&format!("/hcs20/account/{account}")).await;
        assert_eq!(balance_of(&value, tick, topic), *expected, "{account} {tick}@{topic}: {rule}");
    }
    let ticks = site.json("/hcs20").await;
    let names: Vec<&str> = ticks.as_array().unwrap().iter().map(|t| t["tick"].as_str().unwrap()).collect();
    for absent in ["nolim", "num", "wrong", "stray", "ghost"] {
        assert!(!names.contains(&absent), "{absent} must not be deployed: {names:?}");
    }
    let alm = ticks.as_array().unwrap().iter().find(|t| t["tick"] == "alm" && t["topic"] == PUBLIC).unwrap();
    assert_eq!(alm["maxSupply"], 21_000_000);
    assert_eq!(alm["memo"], "the first token");
    assert_eq!(alm["holders"], 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn other_parameters_are_answered_live() {
    let site = site();
    let page = site.json("/hcs20/holders?tick=ALM&topic=0.0.4350190-abcde&pageSize=2&page=2").await;
    let holders: Vec<(&str, u64)> = page["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["holderId"].as_str().unwrap(), h["balance"].as_u64().unwrap()))
        .collect();
    assert_eq!(holders, [("0.0.1008", 200), ("0.0.1009", 50)]);
    assert_eq!(page["pagination"]["totalPages"], 2);
    assert_eq!(page["pagination"]["hasNextPage"], false);

    let past_end = site.json("/hcs20/holders?tick=alm&topic=0.0.4350190&page=9").await;
    assert_eq!(past_end["holders"].as_array().unwrap().len(), 0);
    assert_eq!(past_end["pagination"]["total"], 4);

    let tx = site.json("/hcs20/transactions?pageSize=3").await;
    assert_eq!(tx["mints"].as_array().unwrap().len(), 3);
    let full = site.json("/hcs20/transactions").await;
    assert_eq!(tx["mints"][0], full["mints"][0], "same query function, same first entry");
    assert_eq!(tx["totalMints"], full["totalMints"]);

    let nobody = site.json("/hcs20/account/0.0.424242").await;
    assert_eq!(nobody["balances"].as_array().unwrap().len(), 0);
    assert_eq!(nobody["count"], 0);

    let checksummed = site.get("/hcs20/account/0.0.1001-abcde").await;
    let plain = site.get("/hcs20/account/0.0.1001").await;
    assert_eq!(checksummed.2, plain.2);
    assert_eq!(checksummed.1["etag"], plain.1["etag"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_json_errors() {
    let site = site();
    let cases: &[(&str, u16, &str, Option<&str>)] = &[
        ("/hcs20/account/alice", 400, "invalid_parameter", Some("accountId")),
        ("/hcs20/account/0.0.1.2", 400, "invalid_parameter", Some("accountId")),
        ("/hcs20/holders?topic=0.0.4350190", 400, "invalid_parameter", Some("tick")),
        ("/hcs20/holders?tick=alm", 400, "invalid_parameter", Some("topic")),
        ("/hcs20/holders?tick=alm&topic=0.0.4350190&pageSize=0", 400, "invalid_parameter", Some("pageSize")),
        ("/hcs20/holders?tick=alm&topic=0.0.4350190&pageSize=101", 400, "invalid_parameter", Some("pageSize")),
        ("/hcs20/holders?tick=alm&topic=0.0.4350190&page=x", 400, "invalid_parameter", Some("page")),
        ("/hcs20/transactions?tick=alm", 400, "invalid_parameter", Some("topic")),
        ("/hcs20/holders?tick=nope&topic=0.0.4350190", 404, "tick_not_found", None),
        ("/hcs20/transactions?tick=alm&topic=0.0.999", 404, "tick_not_found", None),
        ("/hcs20/nothing", 404, "not_found", None),
        ("/nothing", 404, "not_found", None),
    ];
    for (path, status, code, parameter) in cases {
        let (got, headers, body) = site.get(path).await;
        assert_eq!(got.as_u16(), *status, "{path}");
        assert_eq!(headers["content-type"], "application/json", "{path}");
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["code"], *code, "{path}: {body}");
        assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{path}");
        if let Some(p) = parameter {
            assert_eq!(body["parameter"], *p, "{path}");
            assert!(body["error"].as_str().unwrap().contains(p), "{path}: the message names the parameter");
        }
    }
    let post = site.client.post(site.api.url("/hcs20/stats")).send().await.unwrap();
    assert_eq!(post.status(), 405);
    assert!(post.headers()["allow"].to_str().unwrap().contains("GET"));
}

#[tokio::test(flavor = "multi_thread")]
async fn conditional_requests() {
    let site = site();
    let (_, headers, _) = site.get("/hcs20/stats").await;
    let etag = headers["etag"].to_str().unwrap().to_string();
    let last_modified = headers["last-modified"].to_str().unwrap().to_string();
    let earlier =
        httpdate::fmt_http_date(httpdate::parse_http_date(&last_modified).unwrap() - std::time::Duration::from_secs(1));
    let send = |pairs: Vec<(&'static str, String)>| {
        let mut request = site.client.get(site.api.url("/hcs20/stats"));
        for (name, value) in pairs {
            request = request.header(name, value);
        }
        request.send()
    };
    // (name, request headers, expected status)
    type Case = (&'static str, Vec<(&'static str, String)>, u16);
    let cases: Vec<Case> = vec![
        ("If-None-Match matching", vec![("if-none-match", etag.clone())], 304),
        ("If-None-Match weak form", vec![("if-none-match", format!("W/{etag}"))], 304),
        ("If-None-Match in a list", vec![("if-none-match", format!("\"zzz\", {etag}"))], 304),
        ("If-None-Match star", vec![("if-none-match", "*".into())], 304),
        ("If-None-Match other", vec![("if-none-match", "\"zzz\"".into())], 200),
        ("If-Modified-Since equal", vec![("if-modified-since", last_modified.clone())], 304),
        ("If-Modified-Since earlier", vec![("if-modified-since", earlier.clone())], 200),
        (
            "INM wins over IMS",
            vec![("if-none-match", "\"zzz\"".into()), ("if-modified-since", last_modified.clone())],
            200,
        ),
        ("If-Match other", vec![("if-match", "\"zzz\"".into())], 412),
        ("If-Unmodified-Since earlier", vec![("if-unmodified-since", earlier.clone())], 412),
    ];
    for (name, headers, status) in cases {
        let response = send(headers).await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{name}");
        if status == 304 {
            let h = response.headers().clone();
            assert_eq!(h["etag"], etag.as_str(), "{name}");
            for required in ["cache-control", "vary", "date"] {
                assert!(h.contains_key(required), "{name}: 304 must carry {required}");
            }
            assert!(response.bytes().await.unwrap().is_empty(), "{name}: 304 has no body");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn head_and_cors() {
    let site = site();
    let head = site.client.head(site.api.url("/hcs20")).send().await.unwrap();
    assert_eq!(head.status(), 200);
    let (_, get_headers, body) = site.get("/hcs20").await;
    assert_eq!(head.headers()["etag"], get_headers["etag"]);
    assert_eq!(head.headers()["content-length"].to_str().unwrap(), body.len().to_string());
    assert!(head.bytes().await.unwrap().is_empty());

    let preflight = site
        .client
        .request(reqwest::Method::OPTIONS, site.api.url("/hcs20/stats"))
        .header("origin", "https://example.org")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "if-none-match")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 204);
    let h = preflight.headers();
    assert_eq!(h["access-control-allow-origin"], "*");
    assert!(h["access-control-allow-methods"].to_str().unwrap().contains("GET"));
    assert!(h["access-control-allow-headers"].to_str().unwrap().contains("if-none-match"));

    for path in ["/health", "/api/v1/health"] {
        let health = site.json(path).await;
        assert_eq!(health["status"], "ok");
        assert_eq!(health["build"], site.manifest.build.as_str());
    }
}

/// Raw requests, so no client normalises the dot segments away.
fn raw_get(addr: &str, target: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(stream, "GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response)
}

#[tokio::test(flavor = "multi_thread")]
async fn traversal_never_reaches_the_filesystem() {
    let site = site();
    let addr = site.api.base.trim_start_matches("http://").to_string();
    let manifest_name = shared::manifest::FILE_NAME;
    for target in [
        "/../../../../etc/passwd",
        "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/hcs20/account/..%2f..%2f..%2fetc%2fpasswd",
        "/hcs20/../../Cargo.toml",
        "/hcs20/account/0.0.1001.json",
        &format!("/{manifest_name}"),
        "/hcs20/index.json",
    ] {
        let (status, response) = raw_get(&addr, target);
        assert!(status == 400 || status == 404, "{target}: {status}");
        assert!(!response.contains("root:"), "{target} leaked a file");
        assert!(!response.contains("[workspace]"), "{target} leaked a file");
        assert!(!Path::new(target).is_absolute() || !response.contains("\"routes\""), "{target} leaked the manifest");
    }
}
