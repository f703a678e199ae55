//! The build's own nginx configuration, served by real nginx (Debian's):
//! for a sample of every kind of route, nginx answers with the api's status,
//! bytes and headers, and a conditional request with the api's 304; then,
//! with `--nginx-api`, what the build does not hold goes to the api.

use std::collections::BTreeMap;

use reqwest::{Client, StatusCode};
use serde_json::Value;
use tests::nginx::{free_port, Nginx};
use tests::process::{build, Api};
use tests::{workspace_root, TempDir};

/// The headers a static answer carries, compared between the two.
const COMPARED: [&str; 8] = [
    "content-type",
    "cache-control",
    "etag",
    "last-modified",
    "vary",
    "access-control-allow-origin",
    "access-control-expose-headers",
    "x-content-type-options",
];

/// A route's kind: its path with each segment that holds a value as `*`,
/// its query parameters' names, and its content type.
fn kind(route: &str, content_type: &str) -> String {
    let (path, query) = route.split_once('?').unwrap_or((route, ""));
    let value = |s: &str| s.chars().any(|c| c.is_ascii_digit() || matches!(c, '%' | '.' | ':' | '~'));
    let path: Vec<&str> = path.split('/').map(|s| if value(s) { "*" } else { s }).collect();
    let names: Vec<&str> = query.split('&').filter_map(|p| p.split('=').next()).collect();
    format!("{}?{} {content_type}", path.join("/"), names.join("&"))
}

struct Answer {
    status: StatusCode,
    headers: BTreeMap<&'static str, String>,
    body: Vec<u8>,
}

async fn get(client: &Client, url: &str, header: Option<(&str, &str)>) -> Answer {
    let mut request = client.get(url);
    if let Some((name, value)) = header {
        request = request.header(name, value);
    }
    let reply = request.send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = reply.status();
    let headers = COMPARED
        .iter()
        .filter_map(|name| reply.headers().get(*name).map(|v| (*name, v.to_str().unwrap().to_string())))
        .collect();
    Answer { status, headers, body: reply.bytes().await.unwrap().to_vec() }
}

/// The datasets built with an nginx configuration listening on a port of
/// loopback, served by nginx and by the api.
struct Hosts {
    dir: TempDir,
    listen: String,
    api: Api,
    nginx: Nginx,
}

impl Hosts {
    fn start(label: &str) -> Hosts {
        let dir = TempDir::new(label);
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        Hosts::build(&dir, &listen, &[]);
        let (site, data) = (dir.path().join("site"), dir.path().join("data"));
        let api = Api::start_with(&site, &data, &["--guard-rate", "1000000", "--guard-burst", "1000000"]);
        let nginx = Nginx::start(dir.path(), &site.join("current/_nginx.conf"), port);
        Hosts { dir, listen, api, nginx }
    }

    /// The three datasets built into `dir`, nginx's configuration
    /// listening on `listen`, with `extra` flags.
    fn build(dir: &TempDir, listen: &str, extra: &[&str]) {
        let dataset = |name: &str| workspace_root().join("datasets").join(name).display().to_string();
        let (ledger, broker, guard) = (dataset("ledger"), dataset("broker"), dataset("guard"));
        let sources = ["--ledger-dir", &ledger, "--broker-dir", &broker, "--guard-dir", &guard];
        let flags = [&sources[..], &["--guard-date", "2026-11-21", "--nginx-listen", listen], extra].concat();
        build(&dir.path().join("site"), &dir.path().join("data"), &flags);
    }

    fn on_nginx(&self, path: &str) -> String {
        format!("http://{}{path}", self.listen)
    }

    /// The first and last route of every kind the build serves, and other
    /// spellings the api answers with the same file.
    fn sample(&self) -> Vec<String> {
        let manifest = self.dir.path().join("site/current/_manifest.json");
        let manifest: Value = serde_json::from_slice(&std::fs::read(manifest).unwrap()).unwrap();
        let mut kinds: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for entry in manifest["routes"].as_array().unwrap() {
            let route = entry["route"].as_str().unwrap();
            kinds.entry(kind(route, entry["contentType"].as_str().unwrap())).or_default().push(route);
        }
        assert!(kinds.len() >= 20, "{} kinds of route: {:?}", kinds.len(), kinds.keys());
        let mut sample: Vec<String> = kinds.values().flat_map(|r| [r[0], r[r.len() - 1]]).map(String::from).collect();
        sample.extend(["/hcs20/transactions", "/hcs20/stats?unrelated=1", "/tokens/"].map(String::from));
        let holders = sample.iter().find(|r| r.starts_with("/hcs20/holders?") && r.contains("&page=1&")).unwrap();
        sample.push(holders.split("&page=").next().unwrap().to_string());
        sample.sort();
        sample.dedup();
        sample
    }
}

/// For a sample of every kind of route, nginx answers with the api's
/// status, bytes and headers, and a conditional request (by entity tag,
/// also weak and in a list, and by date) with the api's 304.
#[tokio::test(flavor = "multi_thread")]
async fn nginx_answers_every_kind_of_route_as_the_api_does() {
    let hosts = Hosts::start("static-hosts");
    let client = http_client::client();
    for route in &hosts.sample() {
        let (from_api, from_nginx) =
            (get(&client, &hosts.api.url(route), None).await, get(&client, &hosts.on_nginx(route), None).await);
        assert_eq!(from_nginx.status, StatusCode::OK, "{route}: nginx");
        assert_eq!(from_api.status, StatusCode::OK, "{route}: api");
        assert_eq!(from_nginx.headers, from_api.headers, "{route}");
        assert!(from_nginx.body == from_api.body, "{route}: the bodies differ");
        let etag = from_api.headers["etag"].clone();
        let modified = from_api.headers["last-modified"].clone();
        for (name, value) in [
            ("if-none-match", etag.clone()),
            ("if-none-match", format!("\"other\", W/{etag}")),
            ("if-modified-since", modified),
        ] {
            let (a, n) = (
                get(&client, &hosts.api.url(route), Some((name, &value))).await,
                get(&client, &hosts.on_nginx(route), Some((name, &value))).await,
            );
            assert_eq!((a.status, n.status), (StatusCode::NOT_MODIFIED, StatusCode::NOT_MODIFIED), "{route} {name}");
            for header in ["etag", "last-modified", "cache-control", "vary"] {
                assert_eq!(n.headers.get(header), a.headers.get(header), "{route} {name}: {header} on the 304");
            }
            assert!(!n.headers.contains_key("content-type"), "{route}: a 304 names no content type");
        }
        let stale = get(&client, &hosts.on_nginx(route), Some(("if-none-match", "\"other\""))).await;
        assert_eq!(stale.status, StatusCode::OK, "{route}: another entity tag");
    }
}

/// Without an api, what the build does not hold is a JSON 404.
#[tokio::test(flavor = "multi_thread")]
async fn nginx_alone_answers_a_json_404_for_what_the_build_does_not_hold() {
    let hosts = Hosts::start("static-hosts-alone");
    let client = http_client::client();
    for path in ["/hcs20/account/0.0.999999", "/nope", "/HCS20/stats"] {
        let answer = get(&client, &hosts.on_nginx(path), None).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
        let body: Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(body["code"], "not_found", "{path}");
    }
}

/// With --nginx-api the same data gives the same build, whose
/// configuration is rewritten in place; after a reload, what the build
/// does not hold (live routes, other spellings, preconditions nginx cannot
/// check) is the api's.
#[tokio::test(flavor = "multi_thread")]
async fn nginx_before_the_api_passes_it_what_the_build_does_not_hold() {
    let hosts = Hosts::start("static-hosts-api");
    let api_address = hosts.api.base.trim_start_matches("http://").trim_end_matches('/').to_string();
    Hosts::build(&hosts.dir, &hosts.listen, &["--nginx-api", &api_address]);
    let config = std::fs::read_to_string(hosts.dir.path().join("site/current/_nginx.conf")).unwrap();
    assert!(config.contains(&format!("proxy_pass http://{api_address};")), "the configuration was rewritten");
    hosts.nginx.reload();
    let client = http_client::client();
    let stats = get(&client, &hosts.api.url("/hcs20/stats"), None).await;
    for (path, header) in [
        ("/hcs20/account/0.0.999999", None),
        ("/api/v1/search?q=agent&limit=2", None),
        ("/hcs20/holders?topic=0.0.4350190&tick=ape0", None),
        ("/hcs20/stats", Some(("if-match", stats.headers["etag"].as_str()))),
        ("/hcs20/stats", Some(("if-match", "\"other\""))),
    ] {
        let url = hosts.on_nginx(path);
        let (a, n) = (get(&client, &hosts.api.url(path), header).await, get(&client, &url, header).await);
        assert_eq!(n.status, a.status, "{path} {header:?}");
        // (A search answer says how long it took.)
        if !path.contains("search") {
            assert!(n.body == a.body, "{path} {header:?}: the bodies differ");
        }
    }
}
