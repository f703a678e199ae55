//! The route table against a real build of `datasets/`: every file the
//! generator publishes is reachable through the table, served with the
//! headers the manifest gives it, and the table's cache policy for that
//! route is the one the generator wrote. So the table, the manifest and the
//! api cannot drift apart.

use api::routes::{table, Table};
use api::{serve, Config};
use clap::Parser;
use tests::process::build;
use tests::{workspace_root, TempDir};
use warp::http::Method;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_published_route_is_in_the_table_and_served_as_the_manifest_says() {
    let root = TempDir::new("route-table");
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    let dataset = |name: &str| workspace_root().join("datasets").join(name).to_str().unwrap().to_string();
    let (ledger, broker, guard) = (dataset("ledger"), dataset("broker"), dataset("guard"));
    let (site2, data2) = (site.clone(), data.clone());
    tokio::task::spawn_blocking(move || {
        let flags =
            ["--ledger-dir", &ledger, "--broker-dir", &broker, "--guard-dir", &guard, "--guard-date", "2026-11-21"];
        build(&site2, &data2, &flags)
    })
    .await
    .unwrap();
    let manifest = shared::manifest::Manifest::load(&site.join("current")).unwrap();

    // Every route kind is in this build, so the check covers all three
    // surfaces.
    for prefix in ["/hcs20/", "/guard/", "/api/v1/agents/"] {
        assert!(manifest.routes.iter().any(|e| e.route().starts_with(prefix)), "{prefix}");
    }

    let routes = Table::new(table());
    for entry in &manifest.routes {
        let path = entry.route().split('?').next().unwrap();
        let normal = api::path::normalize(path).unwrap();
        let found = routes.find(&normal).unwrap_or_else(|| panic!("{} is not in the route table", entry.route()));
        let get = found.endpoint.operation_for(&Method::GET).expect("published routes answer GET");
        assert_eq!(get.cache.header(), entry.cache_control, "{}: the table's cache policy", entry.route());
    }

    let dirs = ["--site-dir", site.to_str().unwrap(), "--data-dir", data.to_str().unwrap()];
    let config = Config::parse_from(
        ["api", "--availability-every-s", "0", "--guard-rate", "1000000", "--guard-burst", "1000000"]
            .into_iter()
            .chain(dirs),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, config.app().unwrap(), async {
        let _ = stopped.await;
    }));
    let client = http_client::client();
    for entry in &manifest.routes {
        let response = client.get(format!("{base}{}", entry.route())).send().await.unwrap();
        assert_eq!(response.status(), 200, "{}", entry.route());
        let headers = response.headers();
        assert_eq!(headers["etag"], entry.etag.as_str(), "{}", entry.route());
        assert_eq!(headers["last-modified"], entry.last_modified.as_str(), "{}", entry.route());
        assert_eq!(headers["cache-control"], entry.cache_control, "{}", entry.route());
        assert_eq!(headers["content-type"], entry.content_type, "{}", entry.route());
        assert_eq!(response.bytes().await.unwrap().len() as u64, entry.length, "{}", entry.route());
    }

    // OPTIONS and 405 agree on Allow, endpoint by endpoint: both come from
    // the table.
    for endpoint in routes.endpoints() {
        let mut path = String::new();
        for part in endpoint.pattern.split_inclusive(['{', '}']) {
            match part.strip_suffix('{') {
                Some(text) => path.push_str(text),
                None if part.ends_with('}') => path.push('x'),
                None => path.push_str(part),
            }
        }
        let allow = |method: reqwest::Method| {
            let request = client.request(method, format!("{base}{path}")).send();
            async move { request.await.unwrap().headers().get("allow").map(|v| v.to_str().unwrap().to_string()) }
        };
        // A method no endpoint has (PATCH is one now) gets 405 with Allow.
        let unused = reqwest::Method::from_bytes(b"PURGE").unwrap();
        let (options, refused) = (allow(reqwest::Method::OPTIONS).await, allow(unused).await);
        assert_eq!(options.as_deref(), Some(endpoint.allow.to_str().unwrap()), "{path}: OPTIONS");
        assert_eq!(options, refused, "{path}: OPTIONS and 405 agree");
    }
    stop.send(()).unwrap();
    server.await.unwrap();
}
