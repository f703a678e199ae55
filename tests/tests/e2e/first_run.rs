//! A newcomer's first run: the api as `make run` starts it (its flags
//! from `make run-flags`, the demo agents on their loopback ports, and a
//! chain for Programmable Secrets as `evmnet` starts one) over the
//! datasets' build.
//!
//! It sends nothing off the machine: the only resolver it is given, a DNS
//! server on loopback that records every question, is asked none while
//! every agent it can chat with is checked, and every check either
//! reached a demo agent on loopback or was refused unsent. Its pages agree
//! with its api: the directory, a search and the agents' pages show the
//! demo agents online as `GET /search` does, the datasets' agents offline
//! with the reason, and each page's footer says what made it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use tests::dns::DnsServer;
use tests::live::Broker;

/// The api's flags `make run` gives it besides its address and folders.
fn make_run_flags() -> Vec<String> {
    let out = std::process::Command::new("make")
        .args(["-s", "--no-print-directory", "run-flags"])
        .current_dir(tests::workspace_root())
        .output()
        .expect("make runs");
    assert!(out.status.success(), "make run-flags: {}", String::from_utf8_lossy(&out.stderr));
    let flags: Vec<String> = String::from_utf8(out.stdout).unwrap().split_whitespace().map(str::to_string).collect();
    assert!(flags.contains(&"--demo-agents".to_string()), "{flags:?}");
    flags
}

/// Every agent search lists, in one page.
async fn everyone(broker: &Broker) -> Vec<Value> {
    let (status, body) = broker.send("GET", "/api/v1/search?limit=500", None, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["total"].as_u64().unwrap() <= 500, "one page holds them all");
    body["hits"].as_array().unwrap().clone()
}

async fn page(broker: &Broker, route: &str) -> (u16, String) {
    let answer = broker.client.get(broker.api.url(route)).send().await.unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

/// The availability cell of `uaid`'s row on a directory or search page.
fn shown_available(html: &str, uaid: &str) -> Option<bool> {
    let href = format!("href=\"{}\"", pages::routes::agent_route(uaid));
    let line = html.lines().find(|line| line.contains(&href))?;
    Some(line.ends_with("<span class=\"good\">yes</span></td></tr>"))
}

#[tokio::test(flavor = "multi_thread")]
async fn make_runs_api_sends_nothing_off_the_machine_and_its_pages_agree_with_it() {
    let dns = DnsServer::start(&[]).await;
    let resolver = dns.addr.to_string();
    let mut flags = make_run_flags();
    flags.extend(["--egress-dns", &resolver, "--verification-dns", &resolver].map(str::to_string));
    flags.extend(["--availability-every-s", "3600"].map(str::to_string));
    // The chain `make run` starts beside it (`evmnet`), and its master key.
    let anvil = tests::evm::Anvil::start().unwrap();
    let deployment = tests::evm::deploy_protocol(&tests::evm::Chain::new(&anvil.url), "anvil").await.unwrap();
    let files = tests::TempDir::new("first-run-chain");
    let (chain, master) = (files.path().join("manifest.json"), files.path().join("secrets-master-key"));
    std::fs::write(&chain, deployment.manifest().to_string()).unwrap();
    std::fs::write(&master, "11".repeat(32)).unwrap();
    flags.extend(["--secrets-chain".into(), chain.display().to_string()]);
    flags.extend(["--secrets-master-key-file".into(), master.display().to_string()]);
    let broker = Broker::start("first-run", &tests::strs(&flags));

    let chattable = |h: &Value| h["communicationSupported"] == true;
    let mut hits = Vec::new();
    tests::wait::until("every agent the broker can chat with checked", 600, Duration::from_millis(50), async || {
        hits = everyone(&broker).await;
        hits.iter().filter(|h| chattable(h)).all(|h| h["availabilityStatus"] != "unknown")
    })
    .await;
    let demo: Vec<&Value> = hits.iter().filter(|h| h["registry"] == "almanac").collect();
    assert_eq!(demo.len(), 2, "the two demo agents");
    assert!(demo.iter().all(|h| h["available"] == true), "the demo agents answer: {demo:?}");
    let elsewhere: Vec<&Value> = hits.iter().filter(|h| chattable(h) && h["registry"] != "almanac").collect();
    assert!(elsewhere.len() > 100 && elsewhere.iter().all(|h| h["availabilityStatus"] == "offline"));

    // The indexer read the chain on loopback.
    tests::wait::until("the indexer's first checkpoint", 400, Duration::from_millis(50), async || {
        broker.rows("secret_index_blocks") > 0
    })
    .await;
    // Nothing asked, nothing sent: every check reached loopback or was
    // refused before a connection.
    assert_eq!(dns.queries.load(Ordering::SeqCst), 0, "no name was looked up");
    let outcomes: Vec<(String, i64)> = {
        let sql = "SELECT outcome, COUNT(*) FROM availability GROUP BY outcome";
        broker.with_store(|s| s.query_map(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))).unwrap()
    };
    let outcome = |name: &str| outcomes.iter().find(|(o, _)| o == name).map_or(0, |(_, n)| *n as usize);
    assert_eq!(outcome("reached"), 2, "{outcomes:?}");
    assert_eq!(outcome("not_allowed"), elsewhere.len(), "{outcomes:?}");

    // The directory's pages say what search says; a page whose rows the
    // checks changed (the demo agents', now online) says the api made it.
    let mut directory = String::new();
    let mut route = Some(pages::routes::AGENTS.to_string());
    while let Some(at) = route.take() {
        let (status, html) = page(&broker, &at).await;
        assert_eq!(status, 200, "{at}");
        if demo.iter().any(|h| shown_available(&html, h["uaid"].as_str().unwrap()).is_some()) {
            assert!(html.contains(pages::Made::Live.says()), "{at} says it is made by the api");
        }
        route = html.split("rel=\"next\" href=\"").nth(1).and_then(|rest| rest.split('"').next()).map(str::to_string);
        directory.push_str(&html);
    }
    for hit in hits.iter().filter(|h| chattable(h)) {
        let uaid = hit["uaid"].as_str().unwrap();
        let shown = shown_available(&directory, uaid).unwrap_or_else(|| panic!("{uaid} in the directory"));
        assert_eq!(shown, hit["available"] == true, "{uaid}: the directory and search agree");
    }

    // A search page answers as `GET /search` does, filters included.
    let (status, html) = page(&broker, "/agents/search?q=almanac&registries=almanac&online=true").await;
    assert_eq!(status, 200, "{html}");
    for hit in &demo {
        assert_eq!(shown_available(&html, hit["uaid"].as_str().unwrap()), Some(true), "{html}");
    }
    assert!(html.contains("2 agents found") && html.contains(pages::Made::Live.says()), "{html}");
    let (status, _) = page(&broker, "/agents/search?online=maybe").await;
    assert_eq!(status, 400, "a bad filter is the search's 400");

    // An agent's page: a demo agent online; a datasets' agent offline, and why.
    let (_, echo) = page(&broker, &pages::routes::agent_route(demo[0]["uaid"].as_str().unwrap())).await;
    assert!(echo.contains(">available</span> (online, checked "), "{echo}");
    let (_, offline) = page(&broker, &pages::routes::agent_route(elsewhere[0]["uaid"].as_str().unwrap())).await;
    assert!(offline.contains("(offline, checked ") && offline.contains("special-use name"), "{offline}");
    // A page of the build says it is one.
    let (_, landing) = page(&broker, "/").await;
    assert!(landing.contains(pages::Made::Build.says()), "{landing}");
}
