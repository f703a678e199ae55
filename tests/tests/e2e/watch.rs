//! `generator build --watch INTERVAL --json`, the real binary: it builds at
//! once and again at each interval, prints one summary per build, keeps
//! the live build when a run fails (and goes on watching), and stops on
//! SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tests::process::binary;
use tests::{workspace_root, TempDir};

#[test]
fn a_watched_build_runs_again_survives_a_failed_run_and_stops_on_sigterm() {
    let dir = TempDir::new("watch");
    let broker = dir.path().join("broker");
    std::fs::create_dir_all(&broker).unwrap();
    for name in ["agents.json", "catalog.json", "feedback.json", "demo-agents.json"] {
        std::fs::copy(workspace_root().join("datasets/broker").join(name), broker.join(name)).unwrap();
    }
    let (site, data, log) = (dir.path().join("site"), dir.path().join("data"), dir.path().join("watch.log"));
    let ledger = workspace_root().join("datasets/ledger");
    let mut child = Command::new(binary("generator"))
        .args(["build", "--watch", "1s", "--json", "--guard-dir", "/nonexistent"])
        .arg("--ledger-dir")
        .arg(&ledger)
        .arg("--broker-dir")
        .arg(&broker)
        .arg("--site-dir")
        .arg(&site)
        .arg("--data-dir")
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };

    let first = next();
    assert_eq!(first["published"], Value::Bool(true), "{first}");
    let steps: Vec<&str> = first["stepsMs"].as_object().unwrap().keys().map(String::as_str).collect();
    for step in ["sources", "embed", "ingest", "apply", "stage", "publish"] {
        assert!(steps.contains(&step), "{step} in {first}");
    }
    assert!(first["files"].as_u64().unwrap() > 100 && first["durationMs"].is_u64(), "{first}");
    let live = std::fs::read_link(site.join("current")).unwrap();
    // The next run finds nothing new: nothing published.
    let second = next();
    assert_eq!((&second["published"], &second["build"]), (&Value::Bool(false), &first["build"]), "{second}");

    // A broken source: the runs fail, the live build stands, the watch goes on.
    std::fs::write(broker.join("agents.json"), "{ not json").unwrap();
    tests::wait::until_blocking("a failed run logged", 200, Duration::from_millis(100), || {
        std::fs::read_to_string(&log).unwrap().contains("build failed")
    });
    assert_eq!(std::fs::read_link(site.join("current")).unwrap(), live, "the live build stands");
    std::fs::copy(workspace_root().join("datasets/broker/agents.json"), broker.join("agents.json")).unwrap();
    let after = next();
    assert_eq!(after["build"], first["build"], "mended: the same sources give the same build");

    // SIGTERM ends the watch cleanly.
    // SAFETY: kill(2) with a pid this test spawned and still owns.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut exit = None;
    tests::wait::until_blocking("the watch stopped", 600, Duration::from_millis(50), || {
        exit = child.try_wait().unwrap();
        exit.is_some()
    });
    assert!(exit.unwrap().success(), "{exit:?}");
    assert!(std::fs::read_to_string(&log).unwrap().contains("watch stopped"));
}
