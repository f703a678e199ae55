//! A build swapped in under load, at scale: 100,000 agents, random agent
//! routes, the token statistics and searches asked for without pause while
//! the generator publishes the next build (new ledger messages, the same
//! agents). No request fails, and the api's memory does not double: the
//! new build is opened beside the old one by its index, its files are read
//! as they are asked for, and the agent index, unchanged, is kept. The new
//! build is a layer over the first (`generator::layer`: every build here
//! counts as large): its folder holds only the files that changed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hcs20::Topics;
use tests::datagen::random_corpus_scaled;
use tests::process::{binary, build, Api};
use tests::{unpooled_client, workspace_root, TempDir};

const AGENTS: usize = 100_000;

/// The process's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

fn live_build(site: &std::path::Path) -> String {
    let dir = std::fs::canonicalize(site.join("current")).unwrap();
    dir.file_name().unwrap().to_string_lossy().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_build_swaps_in_under_load_with_no_failed_request_and_no_second_copy() {
    let root = TempDir::new("swap-load");
    let (agents, corpus) = (root.path().join("agents"), root.path().join("corpus"));
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    let made = std::process::Command::new(binary("datagen"))
        .args(["--preset", "agents", "--agents", &AGENTS.to_string(), "--out"])
        .arg(&agents)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    std::fs::copy(workspace_root().join("datasets/broker/catalog.json"), agents.join("catalog.json")).unwrap();
    let generate = |messages: usize| {
        let (corpus, agents, site, data) = (corpus.clone(), agents.clone(), site.clone(), data.clone());
        move || {
            random_corpus_scaled(messages, 5_000, 3, Topics::MAINNET).write_pages(&corpus, false).unwrap();
            let flags = [
                "--ledger-dir",
                corpus.to_str().unwrap(),
                "--broker-dir",
                agents.to_str().unwrap(),
                "--layer-min-routes",
                "0",
            ];
            let started = Instant::now();
            build(&site, &data, &flags);
            eprintln!("a build of {messages} messages in {:.1} s", started.elapsed().as_secs_f64());
            live_build(&site)
        }
    };
    let first = tokio::task::spawn_blocking(generate(5_000)).await.unwrap();
    let api = Api::start(&site, &data);
    tokio::task::spawn_blocking({
        let (url, first) = (api.url("/health"), first.clone());
        move || served(&url, &first)
    })
    .await
    .unwrap();

    // What the load asks for: 2,000 agent routes drawn from the build's
    // index, the token statistics, a search.
    let index = shared::index::Index::open(&site.join("current")).unwrap();
    let mut routes: Vec<String> = index
        .iter()
        .filter(|r| r.route.starts_with("/api/v1/agents/") && r.route.matches('/').count() == 4)
        .step_by(AGENTS / 2_000)
        .map(|r| r.route.to_string())
        .collect();
    routes.extend(["/hcs20/stats".into(), "/api/v1/search?q=analyst&limit=5".into()]);
    let routes = Arc::new(routes);
    let client = unpooled_client();
    for route in routes.iter() {
        assert_eq!(client.get(api.url(route)).send().await.unwrap().status(), 200, "{route}");
    }
    let before = rss_kib(api.pid());

    let (stop, ok, failed) =
        (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut workers = Vec::new();
    for worker in 0..4usize {
        let (stop, ok, failed, routes, base) = (stop.clone(), ok.clone(), failed.clone(), routes.clone(), api.url(""));
        let client = reqwest::Client::new();
        workers.push(tokio::spawn(async move {
            let mut i = worker * 97;
            while !stop.load(Ordering::Relaxed) {
                i = (i + 7919) % routes.len();
                let answered = match client.get(format!("{base}{}", routes[i])).send().await {
                    Ok(r) => r.status() == 200 && r.bytes().await.is_ok(),
                    Err(_) => false,
                };
                match answered {
                    true => ok.fetch_add(1, Ordering::Relaxed),
                    false => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    let peak = Arc::new(AtomicU64::new(before));
    let sampler = {
        let (stop, peak, pid) = (stop.clone(), peak.clone(), api.pid());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        })
    };

    let second = tokio::task::spawn_blocking(generate(6_000)).await.unwrap();
    assert_ne!(second, first, "new messages give a new build");
    let layer = shared::manifest::Manifest::load(&site.join("builds").join(&second)).unwrap();
    assert_eq!(layer.base.as_deref(), Some(first.as_str()), "a layer over the first build");
    assert!(layer.routes.len() < AGENTS, "holding what changed: {} routes", layer.routes.len());
    tokio::task::spawn_blocking({
        let (url, second) = (api.url("/health"), second.clone());
        move || served(&url, &second)
    })
    .await
    .unwrap();
    // The load goes on over the new build for a few thousand requests
    // more, counted, not timed.
    let after_swap = ok.load(Ordering::Relaxed) + 2_000;
    tests::wait::until("the load going on after the swap", 6000, Duration::from_millis(10), async || {
        ok.load(Ordering::Relaxed) >= after_swap || failed.load(Ordering::Relaxed) > 0
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.unwrap();
    }
    sampler.await.unwrap();

    let (ok, failed, peak) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed), peak.load(Ordering::Relaxed));
    assert_eq!(failed, 0, "{failed} of {} requests failed across the swap", ok + failed);
    assert!(ok > 1_000, "only {ok} requests");
    assert!(
        peak < before * 3 / 2,
        "memory went from {} MiB to a peak of {} MiB across the swap",
        before / 1024,
        peak / 1024
    );
    eprintln!("{ok} requests, none failed; RSS {} MiB before, peak {} MiB", before / 1024, peak / 1024);
}

/// Waits until `/health` names `build`.
fn served(health: &str, build: &str) {
    tests::wait::until_blocking(&format!("the api serving {build}"), 1200, Duration::from_millis(50), || {
        let named = reqwest::blocking::get(health)
            .ok()
            .and_then(|r| r.json::<serde_json::Value>().ok())
            .and_then(|h| h["build"].as_str().map(String::from));
        named.as_deref() == Some(build)
    });
}
