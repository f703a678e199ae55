//! The generator's pipeline end to end: determinism, the mirror source over
//! real HTTP (paging, cursor, retries, a missing topic), and incremental
//! runs that rewrite only changed files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hcs20::Topics;
use reqwest::StatusCode;
use shared::manifest::Manifest;
use tests::datagen::{random_corpus_scaled, Corpus};
const SCALE: usize = 5_000;

use tests::mirror::MirrorServer;
use tests::process::{build, generator};
use tests::{workspace_root, TempDir};

/// Every file of a build directory, by relative path. The nginx
/// configuration names the folder it serves; that name is the one part of
/// a build that depends on where it lives, so it is left out.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for path in tests::files_under(dir) {
        let rel = path.strip_prefix(dir).unwrap().to_string_lossy().to_string();
        let mut bytes = std::fs::read(&path).unwrap();
        if rel == generator::hosts::NGINX {
            let text = String::from_utf8(bytes).unwrap();
            assert!(text.contains(&format!("root \"{}\";", dir.display())), "{rel} serves its own folder");
            bytes = text.replace(&dir.display().to_string(), "<build>").into_bytes();
        }
        out.insert(rel, bytes);
    }
    out
}

fn current(site: &Path) -> (std::path::PathBuf, Manifest) {
    let dir = std::fs::canonicalize(site.join("current")).unwrap();
    let manifest = Manifest::load(&dir).unwrap();
    (dir, manifest)
}

fn captured_build(corpus_dir: &Path, root: &Path) -> Manifest {
    let (site, data) = (root.join("site"), root.join("data"));
    build(&site, &data, &["--ledger-dir", corpus_dir.to_str().unwrap()]);
    current(&site).1
}

#[test]
fn two_builds_of_the_same_sources_are_byte_identical() {
    let ledger = workspace_root().join("datasets/ledger");
    let (a, b) = (TempDir::new("det-a"), TempDir::new("det-b"));
    let ma = captured_build(&ledger, a.path());
    let mb = captured_build(&ledger, b.path());
    assert_eq!(ma.build, mb.build);
    let (ta, tb) = (tree(&current(&a.path().join("site")).0), tree(&current(&b.path().join("site")).0));
    assert_eq!(ta.len(), tb.len());
    for (path, bytes) in &ta {
        assert_eq!(Some(bytes), tb.get(path), "{path} differs between two builds");
    }
    // A second run over the same sources publishes nothing new.
    let log = build(&a.path().join("site"), &a.path().join("data"), &["--ledger-dir", ledger.to_str().unwrap()]);
    assert!(log.contains("nothing new since the live build"), "{log}");
    assert_eq!(current(&a.path().join("site")).1.build, ma.build);
}

/// Runs the `datagen` binary.
fn datagen(args: &[&str]) -> std::process::Output {
    std::process::Command::new(tests::process::binary("datagen")).args(args).output().expect("running datagen")
}

#[test]
fn datasets_ledger_is_what_datagen_writes() {
    let dir = TempDir::new("datagen");
    let out = datagen(&["--preset", "rules", "--out", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let checked_in = tree(&workspace_root().join("datasets/ledger"));
    let fresh = tree(dir.path());
    assert_eq!(checked_in.keys().collect::<Vec<_>>(), fresh.keys().collect::<Vec<_>>());
    assert!(checked_in == fresh, "datasets/ledger is stale: run `make datasets`");
}

#[test]
fn datasets_broker_agents_is_what_datagen_writes() {
    let dir = TempDir::new("datagen-agents");
    let out = datagen(&["--preset", "agents", "--agents", "300", "--out", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for name in ["feedback.json", "agents.json", "demo-agents.json"] {
        let fresh = std::fs::read(dir.path().join(name)).unwrap();
        let checked_in = std::fs::read(workspace_root().join("datasets/broker").join(name)).unwrap();
        assert!(checked_in == fresh, "datasets/broker/{name} is stale: run `make datasets`");
    }
    let checked_in = std::fs::read(workspace_root().join("datasets/broker/agents.json")).unwrap();
    let index: serde_json::Value = serde_json::from_slice(&checked_in).unwrap();
    let agents: Vec<broker_model::Agent> = serde_json::from_value(index["agents"].clone()).unwrap();
    assert_eq!(agents.len(), 300);
    broker_model::validate_index(&agents).unwrap();
}

/// The agent index as JSON Lines (`datagen --lines`) builds the same files
/// as the checked-in document: the two forms are one index.
#[test]
fn an_index_as_json_lines_builds_what_the_document_builds() {
    let dir = TempDir::new("datagen-lines");
    let sources = dir.path().join("broker");
    let out = datagen(&["--preset", "agents", "--agents", "300", "--lines", "--out", sources.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!sources.join("agents.json").exists() && sources.join("agents.jsonl").exists());
    let lines = std::fs::read_to_string(sources.join("agents.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 300, "one agent per line");
    std::fs::copy(workspace_root().join("datasets/broker/catalog.json"), sources.join("catalog.json")).unwrap();
    let ledger = workspace_root().join("datasets/ledger");
    let built = |root: &Path, broker: &Path| {
        let (site, data) = (root.join("site"), root.join("data"));
        build(&site, &data, &["--ledger-dir", ledger.to_str().unwrap(), "--broker-dir", broker.to_str().unwrap()]);
        current(&site).1
    };
    let from_lines = built(&dir.path().join("a"), &sources);
    let from_document = built(&dir.path().join("b"), &workspace_root().join("datasets/broker"));
    assert_eq!(from_lines, from_document);
    // One resolve route per agent: all 300 are in.
    assert!(from_lines.routes.iter().filter(|e| e.route().starts_with("/api/v1/resolve/")).count() >= 300);
}

/// A mirror node on loopback serving a corpus of 3,000 messages
/// (`first`), and a site the generator builds from it.
struct Mirrored {
    mirror: MirrorServer,
    first: Corpus,
    root: TempDir,
}

impl Mirrored {
    async fn start(label: &str) -> Mirrored {
        let first = random_corpus_scaled(3_000, SCALE, 11, Topics::MAINNET);
        let mirror = MirrorServer::start(first.topic_messages().clone(), Duration::ZERO).await;
        Mirrored { mirror, first, root: TempDir::new(label) }
    }

    fn site(&self) -> PathBuf {
        self.root.path().join("site")
    }

    /// A run of the generator over the mirror, with `extra` flags.
    async fn run(&self, extra: &[&str]) -> std::process::Output {
        let (site, data) = (self.site(), self.root.path().join("data"));
        let args: Vec<String> = ["build", "--site-dir", site.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]
            .into_iter()
            .chain(["--mirror", self.mirror.url().as_str(), "--mirror-concurrency", "4"])
            .chain(extra.iter().copied())
            .map(String::from)
            .collect();
        tokio::task::spawn_blocking(move || generator(&tests::strs(&args))).await.unwrap()
    }

    /// A run that succeeds.
    async fn ran(&self) {
        let out = self.run(&[]).await;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

/// The build the captured pages of `corpus` give.
fn captured(corpus: &Corpus) -> String {
    let (pages, reference) = (TempDir::new("mirror-pages"), TempDir::new("mirror-ref"));
    corpus.write_pages(pages.path(), false).unwrap();
    captured_build(pages.path(), reference.path()).build
}

/// Paging: the whole corpus arrives, in pages of at most 100, and gives
/// the build the captured pages of the same corpus give.
#[tokio::test(flavor = "multi_thread")]
async fn the_mirror_is_paged_into_the_build_its_captured_pages_give() {
    let mirrored = Mirrored::start("mirror-paged").await;
    mirrored.ran().await;
    assert_eq!(current(&mirrored.site()).1.build, captured(&mirrored.first));
    let requests = mirrored.mirror.requests();
    assert!(requests.len() >= 30, "3000 messages need at least 30 pages: {}", requests.len());
    for q in &requests {
        let limit: u64 = q.split("limit=").nth(1).and_then(|v| v.split('&').next()).unwrap().parse().unwrap();
        assert!(limit <= 100, "{q}");
    }
}

/// Cursor: the next run asks only for what follows what it has.
#[tokio::test(flavor = "multi_thread")]
async fn a_later_run_asks_the_mirror_only_for_what_follows() {
    let mirrored = Mirrored::start("mirror-cursor").await;
    mirrored.ran().await;
    let second = random_corpus_scaled(3_400, SCALE, 11, Topics::MAINNET);
    mirrored.mirror.set_topics(second.topic_messages().clone());
    let before = mirrored.mirror.requests().len();
    mirrored.ran().await;
    for q in mirrored.mirror.requests()[before..].iter().filter(|q| q.contains("order=asc")) {
        let topic: shared::entity::EntityId = q.split('?').next().unwrap().parse().unwrap();
        let had = mirrored.first.topic_messages()[&topic].len() as u64;
        // Our ranges say `gte:first`; the mirror's next links say `gt:last`.
        let bound = |op: &str| -> Option<u64> { q.split(op).nth(1)?.split('&').next()?.parse().ok() };
        let after =
            bound("sequencenumber=gte:").map(|first| first - 1).or_else(|| bound("sequencenumber=gt:")).unwrap();
        assert!(after >= had, "refetched what the warehouse has: {q} (had {had})");
    }
    assert_eq!(current(&mirrored.site()).1.build, captured(&second));
}

/// 503s and 429s are retried and the run succeeds, within a bound: a
/// mirror that keeps failing fails the run, and the live build stays.
#[tokio::test(flavor = "multi_thread")]
async fn mirror_failures_are_retried_within_a_bound() {
    let mirrored = Mirrored::start("mirror-retries").await;
    for status in [StatusCode::SERVICE_UNAVAILABLE, StatusCode::TOO_MANY_REQUESTS] {
        mirrored.mirror.fail_next(3, status);
        mirrored.ran().await;
    }
    let live = current(&mirrored.site()).1.build;
    mirrored.mirror.fail_next(1_000, StatusCode::INTERNAL_SERVER_ERROR);
    let out = mirrored.run(&["--mirror-attempts", "2"]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("giving up after 2 attempts"));
    assert_eq!(current(&mirrored.site()).1.build, live);
}

/// A topic the registry announces but the mirror does not know is an
/// error naming it, not a silent skip.
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_the_mirror_does_not_know_fails_the_run_naming_it() {
    let mirrored = Mirrored::start("mirror-missing").await;
    let topics = Topics::MAINNET;
    let mut missing = mirrored.first.topic_messages().clone();
    let gone = *missing.keys().find(|t| **t != topics.public && **t != topics.registry).unwrap();
    missing.remove(&gone);
    mirrored.mirror.set_topics(missing);
    let out = mirrored.run(&[]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("topic {gone} does not exist")), "{stderr}");
}

#[test]
fn incremental_run_rewrites_only_changed_files() {
    let topics = Topics::MAINNET;
    let root = TempDir::new("incremental");
    let corpus_dir = root.path().join("corpus");
    random_corpus_scaled(5_000, SCALE, 3, topics).write_pages(&corpus_dir, false).unwrap();
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    let ledger = corpus_dir.to_str().unwrap().to_string();
    build(&site, &data, &["--ledger-dir", &ledger]);
    let (dir_a, a) = current(&site);

    random_corpus_scaled(5_020, SCALE, 3, topics).write_pages(&corpus_dir, false).unwrap();
    let log = build(&site, &data, &["--ledger-dir", &ledger]);
    assert!(log.contains("incremental=true"), "the second run applies only what is new: {log}");
    let (dir_b, b) = current(&site);
    assert_ne!(a.build, b.build);
    assert!(dir_a.exists(), "the previous build is kept");

    let old = a.by_route();
    let mut changed = 0;
    for entry in &b.routes {
        let path = dir_b.join(entry.file());
        let unchanged = old.get(entry.route()).is_some_and(|o| o.etag == entry.etag);
        let same_inode = {
            use std::os::unix::fs::MetadataExt;
            let before = std::fs::metadata(dir_a.join(entry.file())).ok();
            let after = std::fs::metadata(&path).unwrap();
            before.is_some_and(|m| m.ino() == after.ino())
        };
        assert_eq!(unchanged, same_inode, "{}: unchanged files are linked, changed ones written", entry.route());
        changed += usize::from(!unchanged);
    }
    assert!(
        changed > 0 && changed < b.routes.len() / 2,
        "20 new messages change a few files, not most: {changed}/{}",
        b.routes.len()
    );

    // The incremental run gives exactly what a full replay of the same
    // messages gives.
    let fresh = TempDir::new("incremental-full");
    let (site2, data2) = (fresh.path().join("site"), fresh.path().join("data"));
    build(&site2, &data2, &["--ledger-dir", &ledger, "--full"]);
    let (dir_c, c) = current(&site2);
    assert_eq!(b.build, c.build, "incremental and full builds differ");
    assert_eq!(tree(&dir_b), tree(&dir_c));

    // And several increments in a row still agree with a replay.
    for size in [5_100, 5_333, 6_000] {
        random_corpus_scaled(size, SCALE, 3, topics).write_pages(&corpus_dir, false).unwrap();
        let log = build(&site, &data, &["--ledger-dir", &ledger]);
        assert!(log.contains("incremental=true"), "{log}");
        let again = TempDir::new("incremental-again");
        build(&again.path().join("site"), &again.path().join("data"), &["--ledger-dir", &ledger, "--full"]);
        assert_eq!(current(&site).1.build, current(&again.path().join("site")).1.build, "after {size} messages");
    }
}
