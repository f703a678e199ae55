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

/// 2,000 agent routes drawn from the live build's index, the token
/// statistics, a search.
fn load_routes(site: &std::path::Path) -> Vec<String> {
    let index = shared::index::Index::open(&site.join("current")).unwrap();
    let mut routes: Vec<String> = index
        .iter()
        .filter(|r| r.route.starts_with("/api/v1/agents/") && r.route.matches('/').count() == 4)
        .step_by(AGENTS / 2_000)
        .map(|r| r.route.to_string())
        .collect();
    routes.extend(["/hcs20/stats".into(), "/api/v1/search?q=analyst&limit=5".into()]);
    routes
}

/// Four clients asking for `routes` without pause, answers counted, and
/// the api's peak resident memory sampled, until [`Load::stop`].
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    peak: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(api: &Api, routes: Vec<String>) -> Load {
        let routes = Arc::new(routes);
        let (stop, ok, failed) =
            (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut tasks = Vec::new();
        for worker in 0..4usize {
            let (stop, ok, failed, routes, base) =
                (stop.clone(), ok.clone(), failed.clone(), routes.clone(), api.url(""));
            let client = http_client::client();
            tasks.push(tokio::spawn(async move {
                let mut i = worker * 97;
                while !stop.load(Ordering::Relaxed) {
                    i = (i + 7919) % routes.len();
                    let answered = match client.get(format!("{base}{}", routes[i])).send().await {
                        Ok(r) => r.status() == 200 && r.bytes().await.is_ok(),
                        Err(_) => false,
                    };
                    let counter = if answered { &ok } else { &failed };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        let peak = Arc::new(AtomicU64::new(rss_kib(api.pid())));
        let (sampling, sampled, pid) = (stop.clone(), peak.clone(), api.pid());
        // The sampler's cadence: memory is read, not waited for.
        tasks.push(tokio::spawn(async move {
            while !sampling.load(Ordering::Relaxed) {
                sampled.fetch_max(rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }));
        Load { stop, ok, failed, peak, tasks }
    }

    /// Waits for `more` answers beyond those counted so far (or a failure).
    async fn answered(&self, more: u64) {
        let (ok, failed) = (&self.ok, &self.failed);
        let until = ok.load(Ordering::Relaxed) + more;
        tests::wait::until("the load going on after the swap", 6000, Duration::from_millis(10), async || {
            ok.load(Ordering::Relaxed) >= until || failed.load(Ordering::Relaxed) > 0
        })
        .await;
    }

    /// Ends the load: the requests answered, those failed, the peak RSS in KiB.
    async fn stop(self) -> (u64, u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.unwrap();
        }
        (self.ok.load(Ordering::Relaxed), self.failed.load(Ordering::Relaxed), self.peak.load(Ordering::Relaxed))
    }
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
            let sources = ["--ledger-dir", corpus.to_str().unwrap(), "--broker-dir", agents.to_str().unwrap()];
            let started = Instant::now();
            build(&site, &data, &[&sources[..], &["--layer-min-routes", "0"]].concat());
            eprintln!("a build of {messages} messages in {:.1} s", started.elapsed().as_secs_f64());
            live_build(&site)
        }
    };
    let first = tokio::task::spawn_blocking(generate(5_000)).await.unwrap();
    let api = Api::start(&site, &data);
    let health = api.url("/health");
    tokio::task::spawn_blocking({
        let (health, first) = (health.clone(), first.clone());
        move || served(&health, &first)
    })
    .await
    .unwrap();
    let routes = load_routes(&site);
    let client = unpooled_client();
    for route in &routes {
        assert_eq!(client.get(api.url(route)).send().await.unwrap().status(), 200, "{route}");
    }
    let before = rss_kib(api.pid());
    let load = Load::start(&api, routes);

    let second = tokio::task::spawn_blocking(generate(6_000)).await.unwrap();
    assert_ne!(second, first, "new messages give a new build");
    let layer = shared::manifest::Manifest::load(&site.join("builds").join(&second)).unwrap();
    assert_eq!(layer.base.as_deref(), Some(first.as_str()), "a layer over the first build");
    assert!(layer.routes.len() < AGENTS, "holding what changed: {} routes", layer.routes.len());
    tokio::task::spawn_blocking({
        let second = second.clone();
        move || served(&health, &second)
    })
    .await
    .unwrap();
    // The load goes on over the new build for a few thousand requests
    // more, counted, not timed.
    load.answered(2_000).await;
    let (ok, failed, peak) = load.stop().await;
    assert_eq!(failed, 0, "{failed} of {} requests failed across the swap", ok + failed);
    assert!(ok > 1_000, "only {ok} requests");
    let (before, peak) = (before / 1024, peak / 1024);
    assert!(peak < before * 3 / 2, "memory went from {before} MiB to a peak of {peak} MiB across the swap");
    eprintln!("{ok} requests, none failed; RSS {before} MiB before, peak {peak} MiB");
}

/// Waits until `/health` names `build`.
fn served(health: &str, build: &str) {
    tests::wait::until_blocking(&format!("the api serving {build}"), 1200, Duration::from_millis(50), || {
        let named = http_client::blocking::get(health)
            .ok()
            .and_then(|r| r.json::<serde_json::Value>().ok())
            .and_then(|h| h["build"].as_str().map(String::from));
        named.as_deref() == Some(build)
    });
}
