//! Layers (`generator::layer`): over a large live build whose agents did not
//! change, a run writes a folder of only the files that changed, over the
//! live build's base. Here every build counts as large
//! (`--layer-min-routes 0`); each layer is checked against a whole build
//! of the same sources, route by route, through the api.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use broker_model::Agent;
use hcs20::Topics;
use serde_json::json;
use shared::manifest::{Entry, Manifest};
use tests::datagen::random_corpus_scaled;
use tests::process::{build, Api};
use tests::{unpooled_client, workspace_root, TempDir};

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

/// A copy of the checked-in broker datasets in `root`.
fn broker_sources(root: &Path) -> PathBuf {
    let broker = root.join("broker");
    std::fs::create_dir_all(&broker).unwrap();
    for name in ["agents.json", "catalog.json", "demo-agents.json", "feedback.json"] {
        std::fs::copy(workspace_root().join("datasets/broker").join(name), broker.join(name)).unwrap();
    }
    broker
}

/// A ledger of 5,000 messages, the broker's and the guard's datasets and
/// an OpenAPI document, built whole ([`Ledger::new`] gives that build);
/// every later run may make a layer (`--layer-min-routes 0`) and keeps one
/// build besides the live one.
struct Ledger {
    root: TempDir,
    corpus: PathBuf,
    broker: PathBuf,
    site: PathBuf,
    data: PathBuf,
    openapi: PathBuf,
}

/// The first build: whole, the base of the layers after it.
struct Base {
    dir: PathBuf,
    manifest: Manifest,
}

/// Which of the optional sources a run reads.
#[derive(Clone, Copy)]
enum Sections {
    /// The guard's datasets and the OpenAPI document.
    All,
    /// The guard's datasets, no OpenAPI document.
    NoOpenapi,
    /// Neither: the guard's folder is missing.
    Neither,
}

impl Ledger {
    fn new(label: &str) -> (Ledger, Base) {
        let root = TempDir::new(label);
        let (corpus, broker) = (root.path().join("corpus"), broker_sources(root.path()));
        let (site, data, openapi) =
            (root.path().join("site"), root.path().join("data"), root.path().join("openapi.json"));
        std::fs::write(&openapi, r#"{"openapi":"3.1.0","info":{"title":"layers","version":"1"},"paths":{}}"#).unwrap();
        let ledger = Ledger { root, corpus, broker, site, data, openapi };
        ledger.grow(5_000);
        ledger.run(Sections::All, &[]);
        let (dir, manifest) = current(&ledger.site);
        assert!(manifest.base.is_none(), "the first build is whole");
        (ledger, Base { dir, manifest })
    }

    /// The ledger grown to `messages`.
    fn grow(&self, messages: usize) {
        random_corpus_scaled(messages, 5_000, 3, Topics::MAINNET).write_pages(&self.corpus, false).unwrap();
    }

    fn flags(&self, sections: Sections) -> Vec<String> {
        let guard = match sections {
            Sections::All | Sections::NoOpenapi => workspace_root().join("datasets/guard"),
            Sections::Neither => self.root.path().join("no-guard"),
        };
        let path = |p: &Path| p.to_str().unwrap().to_string();
        let mut flags = vec!["--ledger-dir".into(), path(&self.corpus), "--broker-dir".into(), path(&self.broker)];
        flags.extend(["--guard-dir".into(), path(&guard), "--guard-date".into(), "2026-11-21".into()]);
        if let Sections::All = sections {
            flags.extend(["--openapi".into(), path(&self.openapi)]);
        }
        flags
    }

    /// A run over the sources: its log.
    fn run(&self, sections: Sections, extra: &[&str]) -> String {
        run_layered(&self.site, &self.data, &self.flags(sections), extra)
    }

    /// A whole build of the same sources, in a folder of its own.
    fn whole(&self, sections: Sections) -> (TempDir, Manifest) {
        whole(self.root.path(), &tests::strs(&self.flags(sections)))
    }
}

/// Nothing new, no build; new ledger messages, a layer over the first
/// build holding only the files whose bytes changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_holds_only_the_files_new_messages_changed() {
    let (ledger, base) = Ledger::new("layers-messages");
    let log = ledger.run(Sections::All, &[]);
    assert!(log.contains("nothing new since the live build"), "{log}");
    assert_eq!(current(&ledger.site).1.build, base.manifest.build);

    ledger.grow(5_020);
    let log = ledger.run(Sections::All, &[]);
    assert!(log.contains("staged a layer"), "{log}");
    let (first_dir, first) = current(&ledger.site);
    assert_eq!(first.base.as_deref(), Some(base.manifest.build.as_str()));
    let reference = ledger.whole(Sections::All);
    let changed = changed_routes(&base.manifest, &reference.1);
    let held: Vec<&str> = first.routes.iter().map(|e| e.route()).collect();
    assert_eq!(held, changed, "a layer holds exactly the routes whose files or headers changed");
    let base_routes = base.manifest.routes.len();
    assert!(!held.is_empty() && held.len() < base_routes / 4, "{} of {base_routes}", held.len());
    let mut expected: BTreeSet<String> = first.routes.iter().map(|e| e.file().to_string()).collect();
    expected.extend(["_manifest.json", "_manifest.idx"].map(String::from));
    assert_eq!(files_in(&first_dir), expected, "and its folder only their files");
    assert!(ledger.data.join("search").join(&first.build).join("meta.json").exists(), "the search index is named");
    serves(&ledger.site, &ledger.data, &reference, &[]).await;
}

/// More messages: a layer over the same base (not over the live layer),
/// carrying what the live layer holds; the layer before is pruned, the
/// base is kept while a kept layer needs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_layer_sits_on_the_same_base_and_the_first_is_pruned() {
    let (ledger, base) = Ledger::new("layers-second");
    ledger.grow(5_020);
    ledger.run(Sections::All, &[]);
    let first_dir = current(&ledger.site).0;
    ledger.grow(5_100);
    ledger.run(Sections::All, &[]);
    let second = current(&ledger.site).1;
    assert_eq!(second.base.as_deref(), Some(base.manifest.build.as_str()));
    assert!(!first_dir.exists() && base.dir.exists(), "the first layer pruned, the base kept");
    serves(&ledger.site, &ledger.data, &ledger.whole(Sections::All), &[]).await;
}

/// Without the OpenAPI document, a layer removes the base's route of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_removes_the_routes_of_a_source_that_went() {
    let (ledger, base) = Ledger::new("layers-removed");
    ledger.run(Sections::NoOpenapi, &[]);
    let layer = current(&ledger.site).1;
    assert_eq!(layer.base.as_deref(), Some(base.manifest.build.as_str()));
    let gone = vec![shared::http::OPENAPI_ROUTE.to_string()];
    assert!(base.manifest.routes.iter().any(|e| e.route() == gone[0]), "the base serves it");
    assert_eq!(layer.removed, gone);
    serves(&ledger.site, &ledger.data, &ledger.whole(Sections::NoOpenapi), &gone).await;
}

/// Whole builds: after a layer past --layer-max-routes, when the guard's
/// section goes (every page's frame changes), and when the agents'
/// sources change; a whole build after layers is the whole build of its
/// sources.
#[test]
fn whole_builds_follow_a_big_layer_a_section_gone_and_changed_agents() {
    let (ledger, _) = Ledger::new("layers-whole-again");
    ledger.grow(5_020);
    ledger.run(Sections::All, &[]);
    assert!(current(&ledger.site).1.base.is_some(), "a layer");
    ledger.grow(5_100);
    let log = ledger.run(Sections::All, &["--layer-max-routes", "0"]);
    assert!(log.contains("more than --layer-max-routes"), "{log}");
    assert!(current(&ledger.site).1.base.is_none());
    ledger.grow(5_200);
    let log = ledger.run(Sections::Neither, &[]);
    assert!(log.contains("the guard's section came or went"), "{log}");
    assert!(current(&ledger.site).1.base.is_none());
    let catalog = ledger.broker.join("catalog.json");
    std::fs::write(&catalog, std::fs::read_to_string(&catalog).unwrap() + "\n").unwrap();
    let log = ledger.run(Sections::Neither, &[]);
    assert!(log.contains("the broker's sources changed"), "{log}");
    let whole_again = current(&ledger.site).1;
    assert!(whole_again.base.is_none());
    assert_eq!(whole_again.build, ledger.whole(Sections::Neither).1.build);
}

/// One journal line: `event` with its `seq` and time.
fn journal_line(seq: u64, mut event: serde_json::Value) -> String {
    event["seq"] = seq.into();
    event["at"] = "2026-11-24T10:00:00Z".into();
    event.to_string() + "\n"
}

/// The agents' sources and a small ledger built whole (`base`), with a
/// journal folder beside them as the api writes one. `lines` registers two
/// newcomers, updates an ERC-8004 agent with feedback (trusted more, with
/// another agent's capabilities: its sets' counts change) and deletes
/// another; nothing is in the journal until a test writes it.
struct Journal {
    root: TempDir,
    journal: PathBuf,
    site: PathBuf,
    data: PathBuf,
    flags: Vec<String>,
    base: Manifest,
    sources: broker_model::Sources,
    newcomers: Vec<Agent>,
    updated: Agent,
    deleted: Agent,
    lines: String,
}

impl Journal {
    fn new(label: &str) -> Journal {
        let root = TempDir::new(label);
        let (corpus, broker) = (root.path().join("corpus"), broker_sources(root.path()));
        let journal = root.path().join("journal");
        std::fs::create_dir_all(&journal).unwrap();
        random_corpus_scaled(800, 800, 3, Topics::MAINNET).write_pages(&corpus, false).unwrap();
        let (site, data) = (root.path().join("site"), root.path().join("data"));
        let flags: Vec<String> = [("--ledger-dir", &corpus), ("--broker-dir", &broker), ("--journal-dir", &journal)]
            .into_iter()
            .flat_map(|(flag, path)| [flag.to_string(), path.to_str().unwrap().to_string()])
            .collect();
        run_layered(&site, &data, &flags, &[]);
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
        let mut updated = with_feedback(0);
        updated.name = "Aardvark Updated".into();
        updated.trust_score = 98.5;
        updated.updated_at = "2026-11-24T09:00:00Z".into();
        (updated.capabilities, updated.capability_labels) =
            (sources.agents[7].capabilities.clone(), sources.agents[7].capability_labels.clone());
        let deleted = with_feedback(1);
        let mut lines = journal_line(1, json!({"event": "register", "agent": newcomers[0]}));
        lines += &journal_line(2, json!({"event": "register", "agent": newcomers[1]}));
        lines += &journal_line(3, json!({"event": "update", "agent": updated}));
        lines += &journal_line(4, json!({"event": "delete", "uaid": deleted.uaid}));
        Journal { root, journal, site, data, flags, base, sources, newcomers, updated, deleted, lines }
    }

    /// The journal holds `lines`.
    fn write(&self, lines: &str) {
        std::fs::write(self.journal.join("0001.jsonl"), lines).unwrap();
    }

    /// A run over the sources and the journal: its log.
    fn run(&self) -> String {
        run_layered(&self.site, &self.data, &self.flags, &[])
    }

    /// A whole build of the same sources and journal.
    fn whole(&self) -> (TempDir, Manifest) {
        whole(self.root.path(), &tests::strs(&self.flags))
    }

    /// `layer` is over the base and holds exactly the routes whose files
    /// or headers changed from the base to `reference` (a whole build),
    /// removing the base's routes `reference` has not (`gone` among them).
    fn check(&self, layer: &Manifest, reference: &Manifest, gone: &[String]) {
        assert_eq!(layer.base.as_deref(), Some(self.base.build.as_str()), "a layer over the first build");
        let changed = changed_routes(&self.base, reference);
        let held: Vec<&str> = layer.routes.iter().map(|e| e.route()).collect();
        assert_eq!(held, changed, "a layer holds exactly the routes whose files or headers changed");
        let kept = |r: &&str| reference.routes.iter().any(|e| e.route() == *r);
        let removed: Vec<&str> = self.base.routes.iter().map(|e| e.route()).filter(|r| !kept(r)).collect();
        assert_eq!(layer.removed, removed, "and removes the base's routes the sources no longer have");
        for route in gone {
            assert!(removed.contains(&route.as_str()), "{route}");
        }
    }

    /// The journal's first four events made into a layer.
    fn first_layer(&self) -> Manifest {
        self.write(&self.lines);
        let log = self.run();
        assert!(log.contains("agents changed") && log.contains("staged a layer"), "{log}");
        current(&self.site).1
    }
}

/// A run over `flags` that may make a layer and keeps one other build.
fn run_layered(site: &Path, data: &Path, flags: &[String], extra: &[&str]) -> String {
    let mut all = tests::strs(flags);
    all.extend(["--layer-min-routes", "0", "--keep-builds", "1"]);
    all.extend(extra);
    build(site, data, &all)
}

/// Agents registered, updated and deleted through the api's journal: a
/// layer over the live build's base holding exactly the routes whose files
/// changed (the changed agents' own, the directory, the catalog files,
/// the exports) and removing the deleted agents' routes, every route as a
/// whole build of the same sources and journal serves it.
#[test]
fn a_layer_holds_what_the_journal_changed_of_the_agents() {
    let journal = Journal::new("layers-agents");
    let first = journal.first_layer();
    let reference = journal.whole();
    let uaid = broker_site::render::segment(&journal.deleted.uaid);
    let gone: Vec<String> =
        journal.base.routes.iter().map(|e| e.route().to_string()).filter(|r| r.contains(&uaid)).collect();
    assert!(gone.len() >= 5, "the deleted agent's detail, resolve, two feedback files and page: {gone:?}");
    journal.check(&first, &reference.1, &gone);
    assert!(!first.routes.iter().any(|e| e.route().ends_with("/similar")), "the api ranks similar agents");
    assert!(
        first.routes.len() < journal.base.routes.len() / 4,
        "{} of {}",
        first.routes.len(),
        journal.base.routes.len()
    );
    holds(&journal.site, &reference, &gone);
}

/// More changes: a layer over the same base, carrying what the live
/// layer holds that this run does not make again. An agent registered by
/// the last layer goes; the agent it deleted comes back; another changes;
/// a source agent the api checked and found offline changes as a whole
/// build makes it.
#[test]
fn a_second_journal_layer_carries_the_first_and_takes_availability() {
    let journal = Journal::new("layers-agents-again");
    journal.first_layer();
    let mut again = journal.updated.clone();
    again.description = "Updated twice".into();
    again.updated_at = "2026-11-24T11:00:00Z".into();
    let mut lines = journal.lines.clone();
    lines += &journal_line(5, json!({"event": "delete", "uaid": journal.newcomers[0].uaid}));
    lines += &journal_line(6, json!({"event": "register", "agent": journal.deleted}));
    lines += &journal_line(7, json!({"event": "update", "agent": again}));
    lines += &journal_line(8, json!({"event": "register", "agent": journal.newcomers[2]}));
    let checked_endpoint = broker_model::availability::checked_endpoint;
    let checked =
        journal.sources.agents.iter().find(|a| a.uaid != again.uaid && checked_endpoint(a).is_some()).unwrap();
    let measurement = json!({"uaid": checked.uaid, "endpoint": checked_endpoint(checked),
        "status": "offline", "checkedAt": "2026-11-24T12:00:00.000Z", "latencyMs": 4, "uptime": 0.0});
    lines += &journal_line(9, json!({"event": "availability", "availability": measurement}));
    journal.write(&lines);
    let log = journal.run();
    assert!(log.contains("agents changed"), "{log}");
    let second = current(&journal.site).1;
    let reference = journal.whole();
    journal.check(&second, &reference.1, &[]);
    holds(&journal.site, &reference, &[]);
}

/// A refused record: the run fails, naming its line; nothing changes, and
/// once it is gone the live build is current again.
#[test]
fn a_refused_journal_record_fails_the_run_and_changes_nothing() {
    let journal = Journal::new("layers-refused");
    let first = journal.first_layer();
    let mut unknown = journal.newcomers[3].clone();
    unknown.id = "nanda:journal-unknown".into();
    journal.write(&(journal.lines.clone() + &journal_line(5, json!({"event": "update", "agent": unknown}))));
    let (site, data) = (journal.site.to_str().unwrap(), journal.data.to_str().unwrap());
    let mut args = vec!["build", "--site-dir", site, "--data-dir", data];
    args.extend(tests::strs(&journal.flags));
    args.extend(["--layer-min-routes", "0", "--keep-builds", "1"]);
    let out = tests::process::generator_logged(&args, "info");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{log}");
    assert!(log.contains("0001.jsonl:5") && log.contains("which is not indexed"), "{log}");
    assert_eq!(current(&journal.site).1.build, first.build);
    journal.write(&journal.lines);
    let log = journal.run();
    assert!(log.contains("nothing new since the live build"), "{log}");
}

/// Feedback is not taken by a layer: a whole build, the whole build of
/// its sources.
#[test]
fn feedback_in_the_journal_gives_a_whole_build() {
    let journal = Journal::new("layers-feedback");
    let mut entry = journal.sources.feedback.iter().find(|f| journal.updated.uaid == f.uaid).unwrap().clone();
    entry.client = "0x00000000000000000000000000000000000000aa".into();
    journal.write(&(journal.lines.clone() + &journal_line(5, json!({"event": "feedback", "entry": entry}))));
    let log = journal.run();
    assert!(log.contains("not only agents registered, updated, deleted, measured or owned"), "{log}");
    let whole_again = current(&journal.site).1;
    assert!(whole_again.base.is_none());
    assert_eq!(whole_again.build, journal.whole().1.build);
}
