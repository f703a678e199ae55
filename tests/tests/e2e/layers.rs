//! Layers (`generator::layer`): over a large live build whose agents did not
//! change, a run writes a folder of only the files that changed, over the
//! live build's base. Here every build counts as large
//! (`--layer-min-routes 0`); each layer is checked against a whole build
//! of the same sources, route by route, through the api.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use hcs20::Topics;
use shared::manifest::{Entry, Manifest};
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
    for entry in manifest.routes.iter().filter(|e| e.route() != shared::http::OPENAPI_ROUTE) {
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
    let index = shared::index::Stack::open(&site.join("builds"), &live.build).unwrap();
    assert_eq!(index.len(), manifest.routes.len());
    for route in gone {
        assert!(index.get(route).is_none(), "{route} is no longer served");
    }
}

/// The live build of `site` holds every route of `reference` (a whole
/// build) with its file's bytes and headers, and no other route: read
/// from its index and folders, as a static host or the api finds them.
/// (What the api answers of agents changed since a layer's search index
/// comes from its live overlay, which the api's own store fills: a
/// journal written by hand is not in it.)
fn holds(site: &Path, reference: &(TempDir, Manifest), gone: &[String]) {
    let (dir, manifest) = (current(&reference.0.path().join("site")).0, &reference.1);
    let live = current(site).1;
    let builds = site.join("builds");
    let index = shared::index::Stack::open(&builds, &live.build).unwrap();
    assert_eq!(index.len(), manifest.routes.len());
    for entry in &manifest.routes {
        let (record, layer) = index.get(entry.route()).unwrap_or_else(|| panic!("{} is served", entry.route()));
        let build = match layer {
            shared::index::Layer::Top => live.build.clone(),
            shared::index::Layer::Base => live.base.clone().unwrap(),
        };
        let modified = std::time::UNIX_EPOCH + std::time::Duration::from_secs(record.last_modified);
        assert_eq!(
            (record.etag_text(), httpdate::fmt_http_date(modified), record.content_type, record.cache_control),
            (entry.etag.to_string(), entry.last_modified.to_string(), entry.content_type, entry.cache_control),
            "{}",
            entry.route()
        );
        let bytes = std::fs::read(builds.join(build).join(record.file)).unwrap();
        assert_eq!(bytes, std::fs::read(dir.join(entry.file())).unwrap(), "{}", entry.route());
    }
    for route in gone {
        assert!(index.get(route).is_none(), "{route} is no longer served");
    }
}

/// The routes of `reference` (a whole build) whose entries the whole
/// build `base` does not have as they are: what a layer over `base` holds.
fn changed_routes<'a>(base: &Manifest, reference: &'a Manifest) -> Vec<&'a str> {
    let unchanged = |e: &Entry| base.routes.iter().any(|b| b.route() == e.route() && b == e);
    reference.routes.iter().filter(|e| !unchanged(e)).map(|e| e.route()).collect()
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
    let changed = changed_routes(&base, &reference.1);
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
    let gone = vec![shared::http::OPENAPI_ROUTE.to_string()];
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
    assert!(log.contains("the broker's sources changed"), "{log}");
    let whole_again = current(&site).1;
    assert!(whole_again.base.is_none());
    let reference = whole(root.path(), &as_strs(&flags(&missing, &[])));
    assert_eq!(whole_again.build, reference.1.build, "a whole build after layers is the whole build of its sources");
}

/// One journal line: `event` with its `seq` and time.
fn journal_line(seq: u64, mut event: serde_json::Value) -> String {
    event["seq"] = seq.into();
    event["at"] = "2026-11-24T10:00:00Z".into();
    event.to_string() + "\n"
}

/// Agents registered, updated and deleted through the api's journal: a
/// layer over the live build's base holding exactly the routes whose files
/// changed (the changed agents' own, the directory, the catalog files,
/// the exports) and removing the deleted agents' routes, every route as a whole
/// build of the same sources and journal serves it. A refused record fails
/// the run and changes nothing; other events give a whole build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_holds_what_the_journal_changed_of_the_agents() {
    use broker_model::Agent;
    use serde_json::json;
    let root = TempDir::new("layers-agents");
    let (corpus, broker, journal) =
        (root.path().join("corpus"), root.path().join("broker"), root.path().join("journal"));
    std::fs::create_dir_all(&broker).unwrap();
    std::fs::create_dir_all(&journal).unwrap();
    for name in ["agents.json", "catalog.json", "demo-agents.json", "feedback.json"] {
        std::fs::copy(workspace_root().join("datasets/broker").join(name), broker.join(name)).unwrap();
    }
    random_corpus_scaled(800, 800, 3, Topics::MAINNET).write_pages(&corpus, false).unwrap();
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    let flags: Vec<String> = [
        "--ledger-dir",
        corpus.to_str().unwrap(),
        "--broker-dir",
        broker.to_str().unwrap(),
        "--journal-dir",
        journal.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let run = |extra: &[&str]| {
        let mut all = as_strs(&flags);
        all.extend(["--layer-min-routes", "0", "--keep-builds", "1"]);
        all.extend(extra);
        build(&site, &data, &all)
    };
    run(&[]);
    let base = current(&site).1;
    assert!(base.base.is_none());

    let sources = generator::broker::load(&broker).unwrap();
    let with_feedback = |n: usize| -> Agent {
        let uaid = &sources.feedback.iter().map(|f| &f.uaid).collect::<BTreeSet<_>>().into_iter().nth(n).unwrap();
        sources.agents.iter().find(|a| a.uaid.as_str() == uaid.as_str()).unwrap().clone()
    };
    let mut newcomers = broker_model::generate::agents(40, 77);
    for (i, agent) in newcomers.iter_mut().enumerate() {
        agent.id = format!("nanda:journal-{i}");
        agent.trust_score = 99.0 - i as f64;
    }
    // An ERC-8004 agent with feedback updated: trusted more, with another
    // agent's capabilities (its sets' counts change).
    let mut updated = with_feedback(0);
    updated.name = "Aardvark Updated".into();
    updated.trust_score = 98.5;
    updated.updated_at = "2026-11-24T09:00:00Z".into();
    (updated.capabilities, updated.capability_labels) =
        (sources.agents[7].capabilities.clone(), sources.agents[7].capability_labels.clone());
    let deleted = with_feedback(1);
    let mut lines = String::new();
    lines += &journal_line(1, json!({"event": "register", "agent": newcomers[0]}));
    lines += &journal_line(2, json!({"event": "register", "agent": newcomers[1]}));
    lines += &journal_line(3, json!({"event": "update", "agent": updated}));
    lines += &journal_line(4, json!({"event": "delete", "uaid": deleted.uaid}));
    std::fs::write(journal.join("0001.jsonl"), &lines).unwrap();

    let check = |layer: &Manifest, reference: &Manifest, gone: &[String]| {
        assert_eq!(layer.base.as_deref(), Some(base.build.as_str()), "a layer over the first build");
        let changed = changed_routes(&base, reference);
        let held: Vec<&str> = layer.routes.iter().map(|e| e.route()).collect();
        assert_eq!(held, changed, "a layer holds exactly the routes whose files or headers changed");
        let removed: Vec<&str> = base
            .routes
            .iter()
            .map(|e| e.route())
            .filter(|r| !reference.routes.iter().any(|e| e.route() == *r))
            .collect();
        assert_eq!(layer.removed, removed, "and removes the base's routes the sources no longer have");
        for route in gone {
            assert!(removed.contains(&route.as_str()), "{route}");
        }
    };
    let routes_of = |agent: &Agent| -> Vec<String> {
        let uaid = broker_site::render::segment(&agent.uaid);
        base.routes.iter().map(|e| e.route().to_string()).filter(|r| r.contains(&uaid)).collect()
    };

    let log = run(&[]);
    assert!(log.contains("agents changed") && log.contains("staged a layer"), "{log}");
    let first = current(&site).1;
    let reference = whole(root.path(), &as_strs(&flags));
    let gone = routes_of(&deleted);
    assert!(gone.len() >= 5, "the deleted agent's detail, resolve, two feedback files and page: {gone:?}");
    check(&first, &reference.1, &gone);
    assert!(!first.routes.iter().any(|e| e.route().ends_with("/similar")), "the api ranks similar agents");
    assert!(first.routes.len() < base.routes.len() / 4, "{} of {}", first.routes.len(), base.routes.len());
    holds(&site, &reference, &gone);

    // More changes: a layer over the same base, carrying what the live
    // layer holds that this run does not make again. An agent registered
    // by the last layer goes; the agent it deleted comes back; another
    // changes.
    let mut again = updated.clone();
    again.description = "Updated twice".into();
    again.updated_at = "2026-11-24T11:00:00Z".into();
    lines += &journal_line(5, json!({"event": "delete", "uaid": newcomers[0].uaid}));
    lines += &journal_line(6, json!({"event": "register", "agent": deleted}));
    lines += &journal_line(7, json!({"event": "update", "agent": again}));
    lines += &journal_line(8, json!({"event": "register", "agent": newcomers[2]}));
    // A source agent the api checked and found offline: its record and
    // page change, as a whole build makes them.
    let checked = sources
        .agents
        .iter()
        .find(|a| a.uaid != updated.uaid && broker_model::availability::checked_endpoint(a).is_some())
        .unwrap();
    let measurement = json!({"uaid": checked.uaid, "endpoint": broker_model::availability::checked_endpoint(checked),
        "status": "offline", "checkedAt": "2026-11-24T12:00:00.000Z", "latencyMs": 4, "uptime": 0.0});
    lines += &journal_line(9, json!({"event": "availability", "availability": measurement}));
    std::fs::write(journal.join("0001.jsonl"), &lines).unwrap();
    let log = run(&[]);
    assert!(log.contains("agents changed"), "{log}");
    let second = current(&site).1;
    let reference = whole(root.path(), &as_strs(&flags));
    check(&second, &reference.1, &[]);
    holds(&site, &reference, &[]);

    // A refused record: the run fails, naming its line; nothing changes,
    // and once it is gone the live build is current again.
    let mut unknown = newcomers[3].clone();
    unknown.id = "nanda:journal-unknown".into();
    let bad = lines.clone() + &journal_line(10, json!({"event": "update", "agent": unknown}));
    std::fs::write(journal.join("0001.jsonl"), &bad).unwrap();
    let mut args = vec!["build", "--site-dir", site.to_str().unwrap(), "--data-dir", data.to_str().unwrap()];
    args.extend(as_strs(&flags));
    args.extend(["--layer-min-routes", "0", "--keep-builds", "1"]);
    let out = tests::process::generator_logged(&args, "info");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{log}");
    assert!(log.contains("0001.jsonl:10") && log.contains("which is not indexed"), "{log}");
    assert_eq!(current(&site).1.build, second.build);
    std::fs::write(journal.join("0001.jsonl"), &lines).unwrap();
    let log = run(&[]);
    assert!(log.contains("nothing new since the live build"), "{log}");

    // Feedback is not taken by a layer: a whole build.
    let mut entry = sources.feedback.iter().find(|f| again.uaid == f.uaid).unwrap().clone();
    entry.client = "0x00000000000000000000000000000000000000aa".into();
    lines += &journal_line(10, json!({"event": "feedback", "entry": entry}));
    std::fs::write(journal.join("0001.jsonl"), &lines).unwrap();
    let log = run(&[]);
    assert!(log.contains("not only agents registered, updated, deleted or measured"), "{log}");
    let whole_again = current(&site).1;
    assert!(whole_again.base.is_none());
    assert_eq!(whole_again.build, whole(root.path(), &as_strs(&flags)).1.build);
}
