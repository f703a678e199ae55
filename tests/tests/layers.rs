//! Layers (`almanac::layer`): over a large live build whose agents did not
//! change, a run writes a folder of only the files that changed, over the
//! live build's base. Here every build counts as large
//! (`--layer-min-routes 0`); each layer is checked against a whole build
//! of the same sources, route by route, through the api.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use almanac::hcs20::Topics;
use almanac::manifest::Manifest;
use tests::datagen::random_corpus_scaled;
use tests::process::{build, Api};
use tests::{unpooled_client, workspace_root, TempDir};

fn as_strs(flags: &[String]) -> Vec<&str> {
    flags.iter().map(String::as_str).collect()
}

fn current(site: &Path) -> (PathBuf, Manifest) {
    let dir = std::fs::canonicalize(site.join("current")).unwrap();
    let manifest = Manifest::load(&dir).unwrap();
    (dir, manifest)
}

/// A whole build of the same sources, in a folder of its own.
fn whole(root: &Path, flags: &[&str]) -> (TempDir, Manifest) {
    let dir = TempDir::new("layers-whole");
    let mut all = flags.to_vec();
    all.extend(["--layer-min-routes", "max"]);
    build(&dir.path().join("site"), &dir.path().join("data"), &all);
    let manifest = current(&dir.path().join("site")).1;
    assert!(manifest.base.is_none() && root.exists());
    (dir, manifest)
}

/// The api over `site` answers every route of `reference` (a whole build)
/// with its bytes and validators (but the OpenAPI document, which the api
/// answers with its own), and the build's index has none of `gone`.
async fn serves(site: &Path, data: &Path, reference: &(TempDir, Manifest), gone: &[String]) {
    let api = Api::start(site, data);
    let client = unpooled_client();
    let (dir, manifest) = (current(&reference.0.path().join("site")).0, &reference.1);
    for entry in manifest.routes.iter().filter(|e| e.route() != almanac::http::OPENAPI_ROUTE) {
        let response = client.get(api.url(entry.route())).send().await.unwrap();
        assert_eq!(response.status(), 200, "{}", entry.route());
        let header = |name: &str| response.headers()[name].to_str().unwrap().to_string();
        assert_eq!(
            (header("etag"), header("last-modified")),
            (entry.etag.to_string(), entry.last_modified.to_string()),
            "{}",
            entry.route()
        );
        let body = response.bytes().await.unwrap();
        assert_eq!(body, std::fs::read(dir.join(entry.file())).unwrap(), "{}", entry.route());
    }
    let live = current(site).1;
    let index = almanac::index::Stack::open(&site.join("builds"), &live.build).unwrap();
    assert_eq!(index.len(), manifest.routes.len());
    for route in gone {
        assert!(index.get(route).is_none(), "{route} is no longer served");
    }
}

/// Every file in a build's folder, relative to it.
fn files_in(dir: &Path) -> BTreeSet<String> {
    let relative = |path: PathBuf| path.strip_prefix(dir).unwrap().to_string_lossy().to_string();
    tests::files_under(dir).into_iter().map(relative).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layers_hold_only_what_changed_and_serve_what_a_whole_build_serves() {
    let root = TempDir::new("layers");
    let (corpus, broker) = (root.path().join("corpus"), root.path().join("broker"));
    std::fs::create_dir_all(&broker).unwrap();
    for name in ["agents.json", "catalog.json", "demo-agents.json", "feedback.json"] {
        std::fs::copy(workspace_root().join("datasets/broker").join(name), broker.join(name)).unwrap();
    }
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    let (ledger, agents) = (corpus.to_str().unwrap().to_string(), broker.to_str().unwrap().to_string());
    let guard = workspace_root().join("datasets/guard").to_str().unwrap().to_string();
    let missing = root.path().join("no-guard").to_str().unwrap().to_string();
    let openapi = root.path().join("openapi.json");
    std::fs::write(&openapi, r#"{"openapi":"3.1.0","info":{"title":"layers","version":"1"},"paths":{}}"#).unwrap();
    let openapi = openapi.to_str().unwrap().to_string();
    let flags = |guard: &str, openapi: &[&str]| -> Vec<String> {
        let mut flags: Vec<String> =
            ["--ledger-dir", &ledger, "--broker-dir", &agents, "--guard-dir", guard, "--guard-date", "2026-11-21"]
                .map(String::from)
                .to_vec();
        flags.extend(openapi.iter().map(|s| s.to_string()));
        flags
    };
    let with_openapi = ["--openapi", openapi.as_str()];
    let run = |flags: &[String], extra: &[&str]| {
        let mut all: Vec<&str> = flags.iter().map(String::as_str).collect();
        all.extend(["--layer-min-routes", "0", "--keep-builds", "1"]);
        all.extend(extra);
        build(&site, &data, &all)
    };

    random_corpus_scaled(5_000, 5_000, 3, Topics::MAINNET).write_pages(&corpus, false).unwrap();
    run(&flags(&guard, &with_openapi), &[]);
    let (base_dir, base) = current(&site);
    assert!(base.base.is_none(), "the first build is whole");

    // Nothing new: no build.
    let log = run(&flags(&guard, &with_openapi), &[]);
    assert!(log.contains("nothing new since the live build"), "{log}");
    assert_eq!(current(&site).1.build, base.build);

    // New ledger messages: a layer over the first build, holding only the
    // files whose bytes changed.
    random_corpus_scaled(5_020, 5_000, 3, Topics::MAINNET).write_pages(&corpus, false).unwrap();
    let log = run(&flags(&guard, &with_openapi), &[]);
    assert!(log.contains("staged a layer"), "{log}");
    let (first_dir, first) = current(&site);
    assert_eq!(first.base.as_deref(), Some(base.build.as_str()));
    let reference = whole(root.path(), &as_strs(&flags(&guard, &with_openapi)));
    let changed: Vec<&str> = reference
        .1
        .routes
        .iter()
        .filter(|e| !base.routes.iter().any(|b| b.route() == e.route() && b == *e))
        .map(|e| e.route())
        .collect();
    let held: Vec<&str> = first.routes.iter().map(|e| e.route()).collect();
    assert_eq!(held, changed, "a layer holds exactly the routes whose files or headers changed");
    assert!(!held.is_empty() && held.len() < base.routes.len() / 4, "{} of {}", held.len(), base.routes.len());
    let mut expected: BTreeSet<String> = first.routes.iter().map(|e| e.file().to_string()).collect();
    expected.extend(["_manifest.json", "_manifest.idx"].map(String::from));
    assert_eq!(files_in(&first_dir), expected, "and its folder only their files");
    assert!(data.join("search").join(&first.build).join("meta.json").exists(), "the agents' search index is named");
    serves(&site, &data, &reference, &[]).await;

    // More messages: a layer over the same base (not over the live layer),
    // carrying what the live layer holds; the layer before is pruned, the
    // base is kept while a kept layer needs it.
    random_corpus_scaled(5_100, 5_000, 3, Topics::MAINNET).write_pages(&corpus, false).unwrap();
    run(&flags(&guard, &with_openapi), &[]);
    let second = current(&site).1;
    assert_eq!(second.base.as_deref(), Some(base.build.as_str()));
    assert!(!first_dir.exists() && base_dir.exists(), "the first layer pruned, the base kept");
    let reference = whole(root.path(), &as_strs(&flags(&guard, &with_openapi)));
    serves(&site, &data, &reference, &[]).await;

    // Without the OpenAPI document, the base's route of it is removed.
    run(&flags(&guard, &[]), &[]);
    let third = current(&site).1;
    assert_eq!(third.base.as_deref(), Some(base.build.as_str()));
    let gone = vec![almanac::http::OPENAPI_ROUTE.to_string()];
    assert!(base.routes.iter().any(|e| e.route() == gone[0]) && third.removed == gone, "{:?}", third.removed);
    let reference = whole(root.path(), &as_strs(&flags(&guard, &[])));
    serves(&site, &data, &reference, &gone).await;

    // Whole builds: after a layer past --layer-max-routes, when the guard's
    // section goes (every page's frame changes), and when the agents'
    // sources change.
    let log = run(&flags(&guard, &[]), &["--layer-max-routes", "0"]);
    assert!(log.contains("more than --layer-max-routes"), "{log}");
    assert!(current(&site).1.base.is_none());
    random_corpus_scaled(5_200, 5_000, 3, Topics::MAINNET).write_pages(&corpus, false).unwrap();
    let log = run(&flags(&missing, &[]), &[]);
    assert!(log.contains("the guard's section came or went"), "{log}");
    assert!(current(&site).1.base.is_none());
    let document = std::fs::read_to_string(broker.join("catalog.json")).unwrap();
    std::fs::write(broker.join("catalog.json"), format!("{document}\n")).unwrap();
    let log = run(&flags(&missing, &[]), &[]);
    assert!(log.contains("the broker's sources or journal changed"), "{log}");
    let whole_again = current(&site).1;
    assert!(whole_again.base.is_none());
    let reference = whole(root.path(), &as_strs(&flags(&missing, &[])));
    assert_eq!(whole_again.build, reference.1.build, "a whole build after layers is the whole build of its sources");
}
