//! Atomic publishing under failure and load: a generator ended at any of
//! its fault points (`shared::fault`) leaves the previous build serving,
//! and the api swaps builds under concurrent requests without failing one.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hcs20::Topics;
use shared::manifest::Manifest;
use tests::datagen::random_corpus_scaled;
const SCALE: usize = 5_000;

use tests::process::{binary, build, Api};
use tests::TempDir;

fn live_manifest(site: &Path) -> Manifest {
    Manifest::load(&std::fs::canonicalize(site.join("current")).unwrap()).unwrap()
}

/// Every file the live manifest names exists with the bytes its ETag says.
fn assert_complete(site: &Path) -> Manifest {
    let dir = std::fs::canonicalize(site.join("current")).unwrap();
    let manifest = Manifest::load(&dir).unwrap();
    for entry in &manifest.routes {
        let bytes = std::fs::read(dir.join(entry.file())).unwrap_or_else(|_| panic!("{} missing", entry.file()));
        assert_eq!(shared::manifest::etag(&bytes), entry.etag, "{} torn", entry.file());
    }
    manifest
}

#[test]
fn a_run_ended_at_any_step_leaves_the_previous_build_serving() {
    use std::os::unix::process::ExitStatusExt;
    let topics = Topics::MAINNET;
    let root = TempDir::new("fault");
    let corpus = root.path().join("corpus");
    random_corpus_scaled(20_000, SCALE, 5, topics).write_pages(&corpus, false).unwrap();
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    build(&site, &data, &["--ledger-dir", corpus.to_str().unwrap()]);
    assert_complete(&site);
    let api = Api::start(&site, &data);

    // At each fault point in turn, a run with something new to publish is
    // ended there, as kill -9 would end it.
    for (n, point) in shared::fault::POINTS.iter().enumerate() {
        random_corpus_scaled(20_000 + 2_000 * (n + 1), SCALE, 5, topics).write_pages(&corpus, false).unwrap();
        let before = live_manifest(&site).build;
        let status = Command::new(binary("generator-with-faults"))
            .args(["build", "--ledger-dir", corpus.to_str().unwrap()])
            .arg("--site-dir")
            .arg(&site)
            .arg("--data-dir")
            .arg(&data)
            .env("RUST_LOG", "warn")
            .env(tests::process::FAULT, point)
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.signal(), Some(libc::SIGABRT), "{point}: the run reached its fault point ({status})");
        let live = assert_complete(&site);
        let published = matches!(*point, "published" | "pruned");
        assert_eq!(live.build != before, published, "{point}: only a run past the flip is live");
        assert_eq!(api.served_build(&live.build), live.build, "{point}: the api serves the live build");
    }

    // Then a normal run works, gives exactly what a clean replay of the
    // same corpus gives, and the api serves it.
    build(&site, &data, &["--ledger-dir", corpus.to_str().unwrap()]);
    let clean = TempDir::new("fault-clean");
    build(
        &clean.path().join("site"),
        &clean.path().join("data"),
        &["--ledger-dir", corpus.to_str().unwrap(), "--full"],
    );
    let live = live_manifest(&site).build;
    assert_eq!(live, live_manifest(&clean.path().join("site")).build);
    assert_eq!(api.served_build(&live), live);
    let body = http_client::blocking::get(api.url("/hcs20/stats")).unwrap();
    assert_eq!(body.status(), 200);
}

#[test]
fn a_swap_that_fails_at_any_step_leaves_the_previous_build_serving() {
    let topics = Topics::MAINNET;
    for (n, point) in shared::fault::SWAP_POINTS.iter().enumerate() {
        let root = TempDir::new("swap-fault");
        let corpus = root.path().join("corpus");
        let (site, data) = (root.path().join("site"), root.path().join("data"));
        let grow = |messages: usize| {
            random_corpus_scaled(messages, SCALE, 7 + n as u64, topics).write_pages(&corpus, false).unwrap();
            build(&site, &data, &["--ledger-dir", corpus.to_str().unwrap()]);
            live_manifest(&site).build
        };
        let first = grow(10_000);
        let log = root.path().join("api.log");
        let api = Api::start_logged_with_env(&site, &data, &[], &log, &[(tests::process::FAULT, point)]);
        assert_eq!(api.served_build(&first), first, "{point}: the first load is not a swap");

        // The next build fails to load at the point: the api says so and
        // keeps serving the first.
        let second = grow(12_000);
        tests::wait::until_blocking(&format!("{point}: the swap tried"), 500, Duration::from_millis(20), || {
            std::fs::read_to_string(&log).unwrap().contains("could not load the published build")
        });
        assert!(std::fs::read_to_string(&log).unwrap().contains(&format!("injected fault at {point}")), "{point}");
        assert_eq!(api.served_build(&first), first, "{point}: still the previous build, not {second}");

        // The build after it loads.
        let third = grow(14_000);
        assert_eq!(api.served_build(&third), third, "{point}: the next build is served");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn api_swaps_builds_under_concurrent_requests_without_losing_one() {
    let topics = Topics::MAINNET;
    let root = TempDir::new("swap");
    let corpus = root.path().join("corpus");
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    random_corpus_scaled(5_000, SCALE, 9, topics).write_pages(&corpus, false).unwrap();
    build(&site, &data, &["--ledger-dir", corpus.to_str().unwrap()]);
    let api = Api::start(&site, &data);
    let mut manifests = vec![live_manifest(&site)];

    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let client = http_client::client();
    let mut clients = Vec::new();
    for i in 0..8 {
        let (stop, served, client) = (stop.clone(), served.clone(), client.clone());
        // Requests spelled as the manifest spells its routes.
        let paths = ["/hcs20/stats", "/hcs20", "/hcs20/transactions?pageSize=25", "/hcs20/ecosystem-stats"];
        let route = paths[i % paths.len()];
        let url = api.url(route);
        clients.push(tokio::spawn(async move {
            let mut etags = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let response = client.get(&url).send().await.expect("request failed during a swap");
                assert_eq!(response.status(), 200, "{url}");
                let etag = response.headers()["etag"].to_str().unwrap().to_string();
                let body = response.bytes().await.expect("body cut during a swap");
                assert_eq!(shared::manifest::etag(&body), etag, "{url}: body and ETag from different builds");
                etags.push(etag);
                served.fetch_add(1, Ordering::Relaxed);
            }
            (route, etags)
        }));
    }

    for (step, size) in [5_400, 5_800, 6_200].into_iter().enumerate() {
        random_corpus_scaled(size, SCALE, 9, topics).write_pages(&corpus, false).unwrap();
        let (s, d, c) = (site.clone(), data.clone(), corpus.clone());
        tokio::task::spawn_blocking(move || build(&s, &d, &["--ledger-dir", c.to_str().unwrap()])).await.unwrap();
        manifests.push(live_manifest(&site));
        // Wait until the api serves the new build.
        let wanted = manifests.last().unwrap().build.clone();
        tests::wait::until(&format!("swap {step}"), 1000, Duration::from_millis(20), async || {
            let health: serde_json::Value = client.get(api.url("/health")).send().await.unwrap().json().await.unwrap();
            health["build"] == wanted.as_str()
        })
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    for handle in clients {
        let (route, etags) = handle.await.expect("a client failed");
        for etag in etags {
            assert!(
                manifests.iter().any(|m| m.by_route().get(route).is_some_and(|e| e.etag == etag)),
                "{route}: served an ETag no published build had"
            );
        }
    }
    assert!(served.load(Ordering::Relaxed) > 100, "clients should have been busy during the swaps");
}

/// A disk that fills while a build is staged: the run fails naming the file
/// it could not write and the device's error, and publishes nothing. The
/// site folder is a 256 KiB tmpfs, mounted in a mount namespace of the
/// generator's own (`unshare`), so nothing outside the test sees it.
#[test]
fn a_full_disk_while_staging_names_the_file_and_publishes_nothing() {
    let root = TempDir::new("full-disk");
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    std::fs::create_dir_all(&site).unwrap();
    let ledger = tests::workspace_root().join("datasets/ledger");
    let output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o size=256k tmpfs "$0" && exec "$@""#)
        .arg(&site)
        .arg(binary("generator"))
        .args(["build", "--ledger-dir", ledger.to_str().unwrap()])
        .arg("--site-dir")
        .arg(&site)
        .arg("--data-dir")
        .arg(&data)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the build fit in 256 KiB? {stderr}");
    assert!(stderr.contains("No space left on device"), "the device's error: {stderr}");
    let named = stderr.lines().any(|line| line.contains("writing ") && line.contains(&*site.to_string_lossy()));
    assert!(named, "the file it failed on: {stderr}");
    // The tmpfs went with the namespace; nothing was published under it.
    assert!(!site.join("current").exists());
}
