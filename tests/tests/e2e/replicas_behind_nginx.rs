//! Two api replicas behind nginx (round robin), sharing one PostgreSQL
//! store and one bucket and no disk: 10,000 concurrent paid updates split
//! across both spend the balance exactly; an agent registered through one
//! is found through the other; a build published while both serve is
//! picked up with no failed request; and the replica holding the duties,
//! killed while it delivers a registration, leaves the delivery to the
//! other, which completes the attempt without billing it twice.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use tests::live::{call, sign_in, Askers, Broker};
use tests::nginx::{free_port, Nginx};
use tests::process::{build, Api};
use tests::s3::S3;
use tests::TempDir;
use warp::Filter;

const DEBITS: usize = 10_000;
/// Each update costs one credit, a registration ten; a dev account starts
/// with 1,000.
const PRICING: &str =
    r#"{"registration": {"base": 10}, "update": {"base": 1}, "creditsPerHbar": 100, "centsPerHbar": 17}"#;

/// An additional registry on loopback whose first call stalls (past
/// every timeout of the test) and whose later calls are accepted.
struct Registry {
    url: String,
    calls: Arc<Mutex<usize>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn registry() -> Registry {
    let calls = Arc::new(Mutex::new(0));
    let counted = calls.clone();
    let route = warp::post().and(warp::body::json()).then(move |_: Value| {
        let calls = counted.clone();
        async move {
            let first = {
                let mut calls = calls.lock().unwrap();
                *calls += 1;
                *calls == 1
            };
            if first {
                tokio::time::sleep(Duration::from_secs(120)).await;
            }
            warp::reply::json(&json!({"agentId": "remote-1"}))
        }
    });
    let (addr, stop) = tests::serve_on_loopback(route).await;
    Registry { url: format!("http://{addr}/"), calls, _stop: stop }
}

/// The holder of the duties' lease: `<pid>-<random>`.
fn duties_holder(url: &str) -> Option<u32> {
    let location = live_store::Location::Postgres(url.to_string());
    let holder = tests::process::with_store_at(&location, |conn| live_store::leases::holder(conn, "duties").unwrap());
    holder.and_then(|(holder, _)| holder.split('-').next()?.parse().ok())
}

fn publish(s3: &S3, site: &std::path::Path, data: &std::path::Path) {
    let out = s3.publish_command("generator", "main", site, data).output().unwrap();
    assert!(out.status.success(), "publish: {}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_behind_nginx_share_the_store_and_the_bucket_and_outlive_each_other() {
    let root = TempDir::new("behind-nginx");
    let url = pg_scratch::shared().create_database("behind_nginx").unwrap();
    let s3 = S3::start("almanac");
    let registry = registry().await;

    // The generator's folders, published; each api has its own, empty.
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    build(&site, &data, &tests::strs(&Broker::sources()));
    publish(&s3, &site, &data);
    let pricing = root.path().join("pricing.json");
    std::fs::write(&pricing, PRICING).unwrap();
    let endpoints = root.path().join("registries.json");
    std::fs::write(&endpoints, json!({"erc-8004:ethereum-mainnet": registry.url}).to_string()).unwrap();
    let agents = "http://127.0.0.1:9";
    let allowed = tests::allowing(&[agents, &registry.url]);
    let bucket = s3.url("main");
    let flags = [
        "--store",
        url.as_str(),
        "--site-bucket",
        bucket.as_str(),
        "--duties-lease-ms",
        "600",
        "--egress-allow",
        allowed.as_str(),
        "--pricing",
        pricing.to_str().unwrap(),
        "--registry-endpoints",
        endpoints.to_str().unwrap(),
        "--registry-timeout-ms",
        "300000",
        "--registration-wait-ms",
        "100",
    ];
    let env = s3.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let start = |name: &str| {
        let dir = root.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let journal = dir.join("journal");
        let flags = [&flags[..], &["--journal-dir", journal.to_str().unwrap()]].concat();
        let api = Api::start_logged_with_env(&dir.join("site"), &dir.join("data"), &flags, &dir.join("api.log"), &env);
        (api, journal)
    };
    let mut apis = [start("one"), start("two")];
    let first = std::fs::read_link(site.join("current")).unwrap().file_name().unwrap().to_string_lossy().to_string();
    for (api, _) in &apis {
        assert_eq!(api.served_build(&first), first, "each api serves the bucket's build");
    }
    let port = free_port();
    let upstreams: String =
        apis.iter().map(|(api, _)| format!("server {};", api.base.trim_start_matches("http://"))).collect();
    let balancer = root.path().join("balancer.conf");
    std::fs::write(
        &balancer,
        format!(
            "upstream almanac {{ {upstreams} keepalive 16; }}\n\
             server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://almanac; \
             proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_read_timeout 300s; }} }}\n"
        ),
    )
    .unwrap();
    let nginx = Nginx::start(&root.path().join("nginx"), &balancer, port);
    let front = format!("http://127.0.0.1:{port}");
    let client = http_client::builder().build().unwrap();
    let owner = sign_in(&client, &front, "0.0.1001").await;
    let auth = [("x-api-key", owner.as_str())];

    // 10,000 paid updates of one agent at once, split across the replicas
    // by nginx: exactly the balance is spent, never more.
    let profile = |bio: String| {
        json!({"version": "1.0", "type": 1, "display_name": "Ledger Keeper", "bio": bio,
               "aiAgent": {"type": 1, "model": "rule-based", "capabilities": [0]}})
    };
    let registration = json!({"profile": profile("keeps ledgers".into()), "endpoint": format!("{agents}/keeper"),
                              "communicationProtocol": "a2a"});
    let (status, created) = call(&client, "POST", format!("{front}/api/v1/register"), &auth, Some(registration)).await;
    assert_eq!(status, 200, "{created}");
    let uaid = created["uaid"].as_str().unwrap().to_string();
    let balance = || async {
        call(&client, "GET", format!("{front}/api/v1/credits/balance"), &auth, None).await.1["balance"]
            .as_i64()
            .unwrap()
    };
    let before = balance().await;
    assert_eq!(before, 990);
    let path = format!("{front}/api/v1/register/{}", broker_site::render::segment(&uaid));
    let (updated, short) = (AtomicU64::new(0), AtomicU64::new(0));
    futures_util::stream::iter(0..DEBITS)
        .for_each_concurrent(64, |n| {
            let body = json!({"profile": profile(format!("keeps ledgers, edition {n}")), "endpoint": format!("{agents}/keeper"),
                              "communicationProtocol": "a2a"});
            let (client, path, auth, updated, short) = (&client, &path, &auth, &updated, &short);
            async move {
                match call(client, "PUT", path.clone(), auth, Some(body)).await {
                    (200, _) => updated.fetch_add(1, Ordering::Relaxed),
                    (402, _) => short.fetch_add(1, Ordering::Relaxed),
                    (status, answer) => panic!("update {n}: {status} {answer}"),
                };
            }
        })
        .await;
    assert_eq!(updated.load(Ordering::Relaxed), before as u64, "one update per credit");
    assert_eq!(short.load(Ordering::Relaxed), (DEBITS as i64 - before) as u64, "the rest refused, 402");
    assert_eq!(balance().await, 0, "spent exactly");

    // Registered through one, found through the other within the bound
    // of following (a notice, then one read).
    let found_through = |index: usize, name: &'static str| {
        let base = apis[index].0.base.clone();
        let client = client.clone();
        async move {
            let query = format!("{base}/api/v1/search?q={}", name.replace(' ', "+"));
            call(&client, "GET", query, &[], None).await.1["total"].as_u64().unwrap_or(0) > 0
        }
    };
    let other_key = sign_in(&client, &apis[0].0.base, "0.0.1002").await;
    let mut body = json!({"profile": profile("charts harbours".into()), "endpoint": format!("{agents}/charts"),
                          "communicationProtocol": "a2a"});
    body["profile"]["display_name"] = json!("Harbour Charter");
    let (status, answer) =
        call(&client, "POST", format!("{}/api/v1/register", apis[0].0.base), &[("x-api-key", &other_key)], Some(body))
            .await;
    assert_eq!(status, 200, "{answer}");
    tests::wait::until("the other replica finding it", 100, Duration::from_millis(20), async || {
        found_through(1, "Harbour Charter").await
    })
    .await;

    // A build published while both serve: no request through nginx fails.
    let askers = Askers::start((0..4).map(|_| format!("{front}/api/v1/search?q=agent&limit=5")));
    tests::wait::until("the outbox journaled", 200, Duration::from_millis(50), async || {
        tests::process::with_store_at(&live_store::Location::Postgres(url.clone()), |conn| {
            conn.query_row("SELECT COUNT(*) FROM outbox", [], |r| r.get::<i64>(0)).unwrap()
        }) == 0
    })
    .await;
    // The journal of the holder of the duties (either, if they moved).
    let journal =
        apis.iter().map(|(_, journal)| journal).find(|j| std::fs::read_dir(j).is_ok_and(|mut d| d.next().is_some()));
    let journal = journal.expect("a journal written").display().to_string();
    let grown = [Broker::sources(), vec!["--journal-dir".into(), journal]].concat();
    build(&site, &data, &tests::strs(&grown));
    publish(&s3, &site, &data);
    let second = std::fs::read_link(site.join("current")).unwrap().file_name().unwrap().to_string_lossy().to_string();
    assert_ne!(second, first, "a new build");
    for (api, _) in &apis {
        assert_eq!(api.served_build(&second), second, "each api follows the bucket");
    }
    let (answered, failed) = askers.stop().await;
    assert!(answered > 0 && failed == 0, "{answered} answered, {failed} failed across the publish");

    // The holder of the duties dies while it delivers a registration to
    // the additional registry: the other takes the duties over and
    // delivers it, and the attempt completes, billed once.
    let third_key = sign_in(&client, &front, "0.0.1003").await;
    let mut body = json!({"profile": profile("maps currents".into()), "endpoint": format!("{agents}/currents"),
                          "communicationProtocol": "a2a", "additionalRegistries": ["erc-8004:ethereum-mainnet"]});
    body["profile"]["display_name"] = json!("Current Mapper");
    let (status, pending) =
        call(&client, "POST", format!("{front}/api/v1/register"), &[("x-api-key", &third_key)], Some(body)).await;
    assert_eq!((status, &pending["status"]), (202, &json!("pending")), "{pending}");
    let attempt = pending["attemptId"].as_str().unwrap().to_string();
    let calls = || *registry.calls.lock().unwrap();
    tests::wait::until("the registry called", 500, Duration::from_millis(10), async || calls() == 1).await;
    let holder = duties_holder(&url).expect("a holder of the duties");
    let dying = apis.iter().position(|(api, _)| api.pid() == holder).expect("the holder is one of the apis");
    let charged = call(&client, "GET", format!("{front}/api/v1/credits/balance"), &[("x-api-key", &third_key)], None)
        .await
        .1["balance"]
        .as_i64()
        .unwrap();
    apis[dying].0.kill();
    let progress = format!("{}/api/v1/register/progress/{attempt}", apis[1 - dying].0.base);
    let mut last = Value::Null;
    tests::wait::until("the survivor completing the delivery", 300, Duration::from_millis(50), async || {
        last = call(&client, "GET", progress.clone(), &[("x-api-key", &third_key)], None).await.1["progress"].clone();
        last["status"] == json!("completed")
    })
    .await;
    assert_eq!(last["additionalRegistries"]["erc-8004:ethereum-mainnet"]["agentId"], json!("remote-1"), "{last}");
    assert_eq!(calls(), 2, "delivered again once, by the survivor");
    let (_, now) =
        call(&client, "GET", format!("{front}/api/v1/credits/balance"), &[("x-api-key", &third_key)], None).await;
    assert_eq!(now["balance"].as_i64(), Some(charged), "nothing billed twice, nothing refunded");
    drop(nginx);
}
