//! The plugin catalog against the real api binary on loopback: plugins
//! imported from an archive host on loopback (`local_peers::archive_host`,
//! codeload's paths) built from the scanner's corpus, scanned as the
//! reference scanner scores them, listed, badged and answered by the
//! Guard trust routes by hash and by name; ownership, idempotent commits
//! and new versions; and hostile archives refused, each changing nothing.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use tests::archive_host::{tar_gz, ArchiveHost, Entry};
use tests::live::Broker;

const COMMIT_1: &str = "1111111111111111111111111111111111111111";
const COMMIT_2: &str = "2222222222222222222222222222222222222222";

fn fixture(name: &str) -> PathBuf {
    tests::workspace_root().join("plugins/corpus").join(name).join("plugin")
}

/// The reference scanner's score for a fixture (`expected.json`).
fn reference_score(name: &str) -> u64 {
    let path = tests::workspace_root().join("plugins/corpus").join(name).join("expected.json");
    let expected: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    expected["score"].as_u64().unwrap()
}

/// The content digest of a fixture's files, as the reference computes it
/// (the scanner test holds the two equal).
fn digest(name: &str) -> String {
    let tree = generator::plugin_folder::read(&fixture(name)).unwrap();
    plugins::digest::digest(&tree).value
}

struct Catalog {
    host: ArchiveHost,
    broker: Broker,
}

impl Catalog {
    async fn start(label: &str, flags: &[&str]) -> Catalog {
        let host = ArchiveHost::start().await;
        let allowed = tests::allowing(&[&host.url]);
        let mut all = vec![
            "--plugins-archive-host",
            &host.url,
            "--egress-allow",
            &allowed,
            "--plugins-max-archive-bytes",
            "65536",
            "--plugins-max-expanded-bytes",
            "1048576",
        ];
        all.extend_from_slice(flags);
        let broker = Broker::start(label, &all);
        Catalog { host, broker }
    }

    /// Submits an import and waits for its job to end: the job as it ended.
    async fn import(&self, key: &str, body: Value) -> Value {
        let (status, job) = self.broker.send("POST", "/api/v1/plugins/import", Some(key), Some(body)).await;
        assert_eq!(status, 202, "{job}");
        assert_eq!(job["status"], "pending", "{job}");
        let path = format!("/api/v1/plugins/import/{}", job["jobId"].as_str().unwrap());
        let mut ended = Value::Null;
        tests::wait::until("the import job ending", 400, Duration::from_millis(25), async || {
            let (status, job) = self.broker.send("GET", &path, Some(key), None).await;
            assert_eq!(status, 200, "{job}");
            ended = job.clone();
            job["status"] == "completed" || job["status"] == "failed"
        })
        .await;
        ended
    }

    async fn get(&self, path: &str) -> Value {
        let (status, body) = self.broker.send("GET", path, None, None).await;
        assert_eq!(status, 200, "{path}: {body}");
        body
    }

    /// The slugs of the catalog's first page for `query`.
    async fn slugs(&self, query: &str) -> Vec<String> {
        let body = self.get(&format!("/api/v1/plugins/catalog?{query}")).await;
        body["items"].as_array().unwrap().iter().map(|i| i["slug"].as_str().unwrap().to_string()).collect()
    }

    /// A pre-install verdict under `prefix`.
    async fn verdict(&self, prefix: &str, body: Value) -> Value {
        let (status, answer) =
            self.broker.send("POST", &format!("{prefix}/verdict/pre-install"), None, Some(body)).await;
        assert_eq!(status, 200, "{answer}");
        answer
    }

    /// What the store holds of the catalog, to show a refusal changed nothing.
    fn stored(&self) -> (i64, i64, i64) {
        (self.broker.rows("plugin_repositories"), self.broker.rows("plugins"), self.broker.rows("plugin_versions"))
    }
}

fn repository(owner: &str, repo: &str, commit: &str) -> Value {
    json!({"repository": format!("{owner}/{repo}"), "commit": commit})
}

#[tokio::test(flavor = "multi_thread")]
async fn imported_plugins_are_scanned_listed_badged_and_trusted() {
    let catalog = Catalog::start("plugins-import", &[]).await;
    let archives = &catalog.host.archives;
    let (alice, bob) = (catalog.broker.sign_in("0.0.1001").await, catalog.broker.sign_in("0.0.1004").await);

    // A repository holding one clean plugin at its root.
    archives.put_folder("Acme", "weather", COMMIT_1, &fixture("clean"));
    let job = catalog.import(&alice, repository("Acme", "weather", COMMIT_1)).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["results"][0]["status"], "created", "{job}");
    let slug = job["results"][0]["slug"].as_str().unwrap().to_string();
    assert_eq!(slug, "acme/weather-notes", "the owner and the manifest's name, lowercased");
    assert_eq!(job["results"][0]["digest"], digest("clean"), "the reference's content digest");

    let detail = catalog.get("/api/v1/plugins/acme%2Fweather-notes").await;
    assert_eq!(detail["score"], reference_score("clean"), "the reference scanner's score");
    assert_eq!(detail["scan"]["schema_version"], "scan-result.v1");
    assert_eq!(detail["commit"], COMMIT_1);
    assert_eq!(detail["repository"], "acme/weather");
    assert_eq!(detail["version"], "1.2.0");
    assert_eq!(detail["ecosystem"], "codex");
    assert_eq!(detail["recommendation"], "monitor", "{detail}");
    assert_eq!(detail["ownerVerified"], false);
    let signals: Vec<&str> =
        detail["trust"]["signals"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(signals, ["security", "publisher", "metadata", "scannerCi", "maintenance"]);
    assert!(detail["trust"]["signals"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| !s["evidence"].as_array().unwrap().is_empty()));
    assert!(detail["files"].as_array().unwrap().iter().any(|f| f["path"] == ".codex-plugin/plugin.json"));

    // The same commit again stores nothing; a new commit is a new revision.
    let stored = catalog.stored();
    let again = catalog.import(&alice, repository("Acme", "weather", COMMIT_1)).await;
    assert_eq!(again["results"][0]["status"], "unchanged", "{again}");
    assert_eq!(again["results"][0]["revision"], 1);
    assert_eq!(catalog.stored(), stored);
    archives.put_folder("acme", "weather", COMMIT_2, &fixture("mcp-dangerous"));
    // The fixture's manifest names another plugin: a second slug in the repository.
    let second = catalog.import(&alice, repository("acme", "weather", COMMIT_2)).await;
    assert_eq!(second["results"][0]["status"], "created", "{second}");
    assert_eq!(second["results"][0]["slug"], "acme/mcp-dangerous");

    // Another account cannot import the repository, nor anything under its slugs.
    let before = catalog.stored();
    let (status, body) = catalog
        .broker
        .send("POST", "/api/v1/plugins/import", Some(&bob), Some(repository("acme", "weather", COMMIT_2)))
        .await;
    assert_eq!((status, body["code"].as_str()), (403, Some("not_plugin_owner")), "{body}");
    assert_eq!(catalog.stored(), before, "a refused import claims nothing");
    // Bob's own repository whose plugin takes one of Alice's slugs.
    archives.put_folder("acme-fork", "weather", COMMIT_1, &fixture("clean"));
    let forked = catalog.import(&bob, repository("acme-fork", "weather", COMMIT_1)).await;
    assert_eq!(forked["results"][0]["slug"], "acme-fork/weather-notes", "{forked}");
    // Bob cannot read Alice's job.
    let path = format!("/api/v1/plugins/import/{}", job["jobId"].as_str().unwrap());
    assert_eq!(catalog.broker.send("GET", &path, Some(&bob), None).await.0, 404);
    assert_eq!(
        catalog.broker.send("POST", "/api/v1/plugins/import", None, Some(repository("a", "b", COMMIT_1))).await.0,
        401
    );

    // A marketplace listing plugins in other repositories, by git-subdir and github sources.
    let marketplace_dir = tests::TempDir::new("plugins-marketplace");
    let dir = marketplace_dir.path();
    for (folder, name) in [("plugins/secrets", "secrets-in-code"), ("plugins/skills", "skill-risky")] {
        copy_folder(&fixture(name), &dir.join(folder));
    }
    archives.put_folder("tools", "bundle", COMMIT_1, dir);
    let marketplace = json!({"name": "tools", "plugins": [
        {"name": "secrets", "category": "Security", "source": {"source": "git-subdir",
            "url": "https://github.com/tools/bundle.git", "path": "plugins/secrets", "sha": COMMIT_1}},
        {"name": "skills", "source": {"source": "github", "repo": "tools/bundle", "path": "plugins/skills", "sha": COMMIT_1}},
    ]});
    let listed = catalog.import(&alice, json!({"marketplace": marketplace})).await;
    assert_eq!(listed["status"], "completed", "{listed}");
    let slugs: Vec<&str> = listed["results"].as_array().unwrap().iter().map(|r| r["slug"].as_str().unwrap()).collect();
    assert_eq!(slugs, ["tools/secrets-in-code", "tools/skill-risky"]);
    let secrets = catalog.get("/api/v1/plugins/tools%2Fsecrets-in-code").await;
    assert_eq!(secrets["score"], reference_score("secrets-in-code"));
    assert_eq!(secrets["category"], "Security", "the marketplace entry's category");
    assert_eq!(secrets["subpath"], "plugins/secrets");
    let secrets_recommendation = secrets["recommendation"].clone();
    assert_ne!(secrets_recommendation, "monitor", "hard-coded keys are never only watched: {secrets}");

    // The catalog: newest first, pages whose cursors never repeat an item,
    // even with an import between two pages.
    let first = catalog.get("/api/v1/plugins/catalog?limit=2").await;
    let page: Vec<&str> = first["items"].as_array().unwrap().iter().map(|i| i["slug"].as_str().unwrap()).collect();
    assert_eq!(page, ["tools/skill-risky", "tools/secrets-in-code"]);
    archives.put_folder("late", "one", COMMIT_1, &fixture("minimal"));
    catalog.import(&alice, repository("late", "one", COMMIT_1)).await;
    let mut seen: Vec<String> = page.iter().map(|s| s.to_string()).collect();
    let mut cursor = first["nextCursor"].as_str().map(str::to_string);
    while let Some(c) = cursor {
        let next = catalog.get(&format!("/api/v1/plugins/catalog?limit=2&cursor={c}")).await;
        seen.extend(next["items"].as_array().unwrap().iter().map(|i| i["slug"].as_str().unwrap().to_string()));
        cursor = next["nextCursor"].as_str().map(str::to_string);
    }
    assert_eq!(
        seen,
        [
            "tools/skill-risky",
            "tools/secrets-in-code",
            "acme-fork/weather-notes",
            "acme/mcp-dangerous",
            "acme/weather-notes"
        ]
    );
    let all = catalog.get("/api/v1/plugins/catalog?limit=100").await;
    assert_eq!(all["items"].as_array().unwrap().len(), 6);
    assert_eq!(all["nextCursor"], Value::Null);
    for item in all["items"].as_array().unwrap() {
        assert_eq!(item["sourceRepo"].as_str().unwrap(), item["sourceRepo"].as_str().unwrap().to_lowercase());
    }
    // Filters.

    assert_eq!(catalog.slugs("category=security").await, ["tools/secrets-in-code"]);
    assert_eq!(catalog.slugs("q=weather+notes").await, ["acme-fork/weather-notes", "acme/weather-notes"]);
    assert_eq!(catalog.slugs("ownerVerified=true").await, Vec::<String>::new());
    assert_eq!(catalog.slugs("ecosystem=claude-code").await, Vec::<String>::new());
    for bad in ["cursor=x", "cursor=p0", "limit=0", "limit=101", "ownerVerified=yes", "ecosystem=npm"] {
        let (status, body) = catalog.broker.send("GET", &format!("/api/v1/plugins/catalog?{bad}"), None, None).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["error"].is_string() && body["code"].is_string(), "{body}");
    }
    assert_eq!(catalog.broker.send("GET", "/api/v1/plugins/nobody%2Fnothing", None, None).await.0, 404);

    // Badges, shields.io's endpoint JSON.
    let badge = catalog.get("/api/registry/badges/plugin?slug=acme%2Fweather-notes&metric=security&style=flat").await;
    assert_eq!(badge["schemaVersion"], 1);
    assert_eq!(badge["message"], reference_score("clean").to_string());
    assert_eq!((badge["label"].as_str(), badge["style"].as_str()), (Some("security"), Some("flat")));
    let trust = catalog.get("/api/registry/badges/plugin?slug=acme/weather-notes&metric=trust&label=Trust").await;
    assert_eq!(trust["message"], detail["trustScore"].to_string());
    assert_eq!(trust["label"], "Trust");
    let unknown = catalog.get("/api/registry/badges/plugin?slug=no%2Fone").await;
    assert_eq!(unknown["isError"], true);
    for bad in ["metric=trust", "slug=a%2Fb&metric=stars", "slug=a%2Fb&style=round"] {
        let (status, _) = catalog.broker.send("GET", &format!("/api/registry/badges/plugin?{bad}"), None, None).await;
        assert_eq!(status, 400, "{bad}");
    }

    // A build with the reviewed Guard campaigns, which trust matches findings against.
    let root = tests::workspace_root();
    let mut sources = Broker::sources();
    sources.extend(["--guard-dir".into(), root.join("datasets/guard").to_string_lossy().into_owned()]);
    sources.extend(["--guard-date".into(), "2026-11-15".into()]);
    catalog.broker.rebuild(&tests::strs(&sources)).await;

    // The Guard trust routes, under both prefixes.
    for prefix in ["/api/v1/guard", "/api/guard"] {
        let by_hash = catalog.get(&format!("{prefix}/trust/by-hash/{}", digest("clean"))).await;
        let matched = &by_hash["match"];
        assert_eq!(matched["artifactType"], "plugin", "{by_hash}");
        // Both Alice's and Bob's plugin have these files; the newest is answered.
        assert!(["acme/weather-notes", "acme-fork/weather-notes"].contains(&matched["artifactSlug"].as_str().unwrap()));
        assert_eq!(matched["safetyScore"], reference_score("clean"));
        assert!(by_hash["evidence"].as_array().unwrap().len() > 1);
        let none = catalog.get(&format!("{prefix}/trust/by-hash/{}", "0".repeat(64))).await;
        assert_eq!(none["match"], Value::Null);
        assert_eq!(catalog.broker.send("GET", &format!("{prefix}/trust/by-hash/xyz"), None, None).await.0, 400);

        let resolved =
            catalog.get(&format!("{prefix}/trust/resolve?ecosystem=codex&name=mcp-dangerous&version=1.0.0")).await;
        assert_eq!(resolved["query"], json!({"ecosystem": "codex", "name": "mcp-dangerous", "version": "1.0.0"}));
        let items = resolved["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{resolved}");
        assert_eq!(items[0]["artifactSlug"], "acme/mcp-dangerous");
        assert_eq!(items[0]["recommendation"], "review", "a plain-http MCP server matches a reviewed campaign");
        let none = catalog.get(&format!("{prefix}/trust/resolve?name=mcp-dangerous&version=9.9.9")).await;
        assert_eq!(none["items"], json!([]));

        let feed = catalog.get(&format!("{prefix}/feed?limit=2")).await;
        assert_eq!(feed["items"].as_array().unwrap().len(), 2);
        let summary = &feed["summary"];
        assert_eq!(summary["total"], 6);
        let counted =
            ["monitorCount", "reviewCount", "blockCount"].iter().map(|k| summary[k].as_u64().unwrap()).sum::<u64>();
        assert_eq!(counted, 6);

        let clean = catalog
            .verdict(
                prefix,
                json!({"harness": "codex", "artifactName": "weather-notes", "artifactType": "plugin",
            "artifactSlug": "acme/weather-notes"}),
            )
            .await;
        assert_eq!(
            (clean["decision"].as_str(), clean["recommendation"].as_str()),
            (Some("allow"), Some("monitor")),
            "{clean}"
        );
        assert_eq!(clean["trustMatch"]["artifactSlug"], "acme/weather-notes");
        assert_eq!(clean["principal"]["signedIn"], false);
        let mcp = catalog
            .verdict(
                prefix,
                json!({"harness": "codex", "artifactName": "mcp-dangerous", "artifactType": "plugin",
            "artifactId": "plugin:acme/mcp-dangerous"}),
            )
            .await;
        assert_eq!((mcp["decision"].as_str(), mcp["category"].as_str()), (Some("review"), Some("watchlist")), "{mcp}");
        let campaign = mcp["matchedEvidence"].as_array().unwrap().iter().find(|e| e["category"] == "watchlist");
        assert!(
            campaign.is_some_and(|e| e["source"].as_str().unwrap().starts_with("guard:campaign:camp-mcp")),
            "{mcp}"
        );
        let risky = catalog
            .verdict(
                prefix,
                json!({"harness": "codex", "artifactName": "secrets-in-code", "artifactType": "plugin",
            "artifactHash": digest("secrets-in-code")}),
            )
            .await;
        assert_eq!(risky["recommendation"], secrets_recommendation);
        assert!(
            risky["matchedEvidence"].as_array().unwrap().iter().any(|e| e["source"] == "scan:HARDCODED_SECRET"),
            "{risky}"
        );
        let changed = catalog
            .verdict(
                prefix,
                json!({"harness": "codex", "artifactName": "weather-notes", "artifactType": "plugin",
            "artifactSlug": "acme/weather-notes", "artifactHash": "ab".repeat(32)}),
            )
            .await;
        assert_eq!(changed["decision"], "review", "files that are not an imported version: {changed}");
        let unknown = catalog
            .verdict(prefix, json!({"harness": "codex", "artifactName": "nothing-here", "artifactType": "skill"}))
            .await;
        assert_eq!((unknown["decision"].as_str(), unknown["trustMatch"].is_null()), (Some("review"), true));
        let (status, body) = catalog
            .broker
            .send(
                "POST",
                &format!("{prefix}/verdict/pre-execution"),
                None,
                Some(json!({"harness": "x", "artifactName": "y", "artifactType": "app"})),
            )
            .await;
        assert_eq!((status, body["code"].as_str()), (400, Some("invalid_body")), "{body}");

        let advisories = catalog.get(&format!("{prefix}/advisories")).await;
        let ids: Vec<&str> =
            advisories["items"].as_array().unwrap().iter().map(|a| a["artifactId"].as_str().unwrap()).collect();
        assert!(ids.contains(&"plugin:tools/secrets-in-code"), "{advisories}");
        assert!(!ids.contains(&"plugin:acme/weather-notes"), "{advisories}");
        for item in advisories["items"].as_array().unwrap() {
            assert!(["low", "medium", "high"].contains(&item["severity"].as_str().unwrap()), "{item}");
        }
        let revocations = catalog.get(&format!("{prefix}/revocations")).await;
        for item in revocations["items"].as_array().unwrap() {
            let slug = item["artifactId"].as_str().unwrap().strip_prefix("plugin:").unwrap();
            let plugin = catalog.get(&format!("/api/v1/plugins/{}", slug.replace('/', "%2F"))).await;
            assert_eq!(plugin["recommendation"], "block", "only blocked plugins are revoked");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_archives_are_refused_and_change_nothing() {
    let catalog = Catalog::start("plugins-hostile", &[]).await;
    let archives = &catalog.host.archives;
    let key = catalog.broker.sign_in("0.0.1001").await;
    let manifest = br#"{"name":"x","version":"1.0.0"}"#.to_vec();
    let top = |path: &str| format!("r-{COMMIT_1}/{path}");
    let hostile: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "link",
            tar_gz(&[
                Entry::file(top(".codex-plugin/plugin.json"), manifest.clone()),
                Entry::symlink(top("secret"), "/etc/passwd"),
            ]),
            "archive_refused",
        ),
        (
            "climb",
            tar_gz(&[
                Entry::file(top(".codex-plugin/plugin.json"), manifest.clone()),
                Entry::file("../../evil.sh", b"rm -rf /".to_vec()),
            ]),
            "archive_refused",
        ),
        ("absolute", tar_gz(&[Entry::file("/tmp/evil.sh", b"x".to_vec())]), "archive_refused"),
        // Two megabytes of zeros: a few kilobytes compressed, past the 1 MiB expansion bound.
        (
            "bomb",
            tar_gz(&[
                Entry::file(top(".codex-plugin/plugin.json"), manifest.clone()),
                Entry::file(top("zeros"), vec![0; 2 << 20]),
            ]),
            "archive_refused",
        ),
        ("not-gzip", b"this is not an archive".to_vec(), "archive_refused"),
        ("empty", tar_gz(&[Entry::file(top("README.md"), b"# nothing".to_vec())]), "no_plugin"),
    ];
    // Past the 64 KiB download bound: bytes that do not compress.
    let mut noise = Vec::with_capacity(200_000);
    let mut x: u32 = 1;
    for _ in 0..200_000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        noise.push((x >> 16) as u8);
    }
    let large = tar_gz(&[
        Entry::file(top(".codex-plugin/plugin.json"), manifest.clone()),
        Entry::file(top("noise.bin"), noise),
    ]);
    let mut cases = hostile;
    cases.push(("large", large, "archive_too_large"));
    for (repo, archive, code) in cases {
        archives.put("evil", repo, COMMIT_1, archive);
        let before = (catalog.broker.rows("plugins"), catalog.broker.rows("plugin_versions"));
        let job = catalog.import(&key, repository("evil", repo, COMMIT_1)).await;
        assert_eq!(job["status"], "failed", "{repo}: {job}");
        assert_eq!(job["results"][0]["code"], code, "{repo}: {job}");
        assert!(job["error"].as_str().is_some_and(|e| !e.is_empty()), "{repo}: {job}");
        assert_eq!((catalog.broker.rows("plugins"), catalog.broker.rows("plugin_versions")), before, "{repo}");
    }
    // A commit the host does not have, and a destination the gate refuses.
    let job = catalog.import(&key, repository("evil", "missing", COMMIT_1)).await;
    assert_eq!(job["results"][0]["code"], "archive_unavailable", "{job}");
    let (status, body) = catalog
        .broker
        .send(
            "POST",
            "/api/v1/plugins/import",
            Some(&key),
            Some(json!({"repository": "evil/x", "commit": COMMIT_1, "archiveUrl": "http://10.0.0.1/x.tar.gz"})),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (403, Some("destination_not_allowed")), "{body}");

    // A manifest that is not JSON is imported with the scan that says so.
    archives.put_folder("evil", "broken", COMMIT_1, &fixture("not-json"));
    let job = catalog.import(&key, repository("evil", "broken", COMMIT_1)).await;
    assert_eq!(job["status"], "completed", "{job}");
    let plugin = catalog
        .get(&format!("/api/v1/plugins/{}", job["results"][0]["slug"].as_str().unwrap().replace('/', "%2F")))
        .await;
    assert_eq!(plugin["score"], reference_score("not-json"));
    assert!(plugin["scan"]["findings"].as_array().unwrap().iter().any(|f| f["ruleId"] == "PLUGIN_JSON_INVALID"));
    assert_ne!(plugin["recommendation"], "monitor");

    // Bodies refused, naming the field, storing nothing.
    let stored = catalog.stored();
    let refusals = [
        (json!({"repository": "evil/x", "commit": "main"}), "commit"),
        (json!({"repository": "not a repo", "commit": COMMIT_1}), "repository"),
        (json!({"repository": "evil/x", "commit": COMMIT_1, "path": "../up"}), "path"),
        (json!({"source": {"source": "github", "repo": "evil/x", "ref": "main"}}), "source"),
        (json!({"source": {"source": "npm", "package": "x"}}), "source"),
        (
            json!({"marketplace": {"name": "m", "plugins": [{"name": "a", "source": "./local"}]}}),
            "marketplace.plugins[0].source",
        ),
        (json!({"repository": "evil/x", "commit": COMMIT_1, "extra": 1}), ""),
        (json!({}), ""),
    ];
    for (body, field) in refusals {
        let (status, answer) =
            catalog.broker.send("POST", "/api/v1/plugins/import", Some(&key), Some(body.clone())).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(answer["error"].is_string(), "{answer}");
        if !field.is_empty() {
            assert_eq!(answer["parameter"], field, "{body}: {answer}");
        }
    }
    assert_eq!(catalog.stored(), stored);
}

/// Copies the files under `from` to `to`.
fn copy_folder(from: &std::path::Path, to: &std::path::Path) {
    for file in tests::files_under(from) {
        let target = to.join(file.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&file, &target).unwrap();
    }
}

/// A route's status, `Cache-Control` and body bytes.
async fn fetch(catalog: &Catalog, path: &str) -> (u16, String, Vec<u8>) {
    let response = catalog.broker.client.get(catalog.broker.api.url(path)).send().await.unwrap();
    let cache = response.headers().get("cache-control").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (response.status().as_u16(), cache, response.bytes().await.unwrap().to_vec())
}

/// The routes a build publishes of the catalog, for the plugins named.
fn published_routes(slugs: &[&str]) -> Vec<String> {
    let mut routes = vec![
        plugins::catalog::PLUGINS_JSON.to_string(),
        plugins::catalog::MARKETPLACE.to_string(),
        pages::routes::PLUGINS.to_string(),
    ];
    routes.extend(slugs.iter().map(|slug| pages::routes::plugin(slug).0));
    routes
}

#[tokio::test(flavor = "multi_thread")]
async fn the_build_publishes_the_catalog_and_the_api_makes_what_is_newer() {
    let catalog = Catalog::start("plugins-build", &[]).await;
    let key = catalog.broker.sign_in("0.0.1001").await;
    catalog.host.archives.put_folder("acme", "weather", COMMIT_1, &fixture("clean"));
    catalog.import(&key, repository("acme", "weather", COMMIT_1)).await;

    // Before a build holds it: made by the api, revalidated each time.
    let routes = published_routes(&["acme/weather-notes"]);
    let mut live = Vec::new();
    for route in &routes {
        let (status, cache, body) = fetch(&catalog, route).await;
        assert_eq!((status, cache.as_str()), (200, "no-cache"), "{route}: {}", String::from_utf8_lossy(&body));
        live.push(body);
    }
    let exported: Value = serde_json::from_slice(&live[0]).unwrap();
    assert_eq!(exported["plugins"][0]["owner"], "acme");
    assert_eq!(
        exported["plugins"][0]["install_url"].as_str().unwrap(),
        format!("https://raw.githubusercontent.com/acme/weather/{COMMIT_1}/.codex-plugin/plugin.json")
    );
    let market: Value = serde_json::from_slice(&live[1]).unwrap();
    let source = plugins::source::Source::parse(&market["plugins"][0]["source"]).unwrap();
    assert!(matches!(source, plugins::source::Source::Remote { ref commit, .. } if commit == COMMIT_1), "{market}");
    let page = String::from_utf8(live[3].clone()).unwrap();
    assert!(page.contains("weather-notes") && page.contains(COMMIT_1) && page.contains("made by the api"), "{page}");
    // The hosted registry's spelling of a page redirects to it.
    let unfollowing = http_client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let response =
        unfollowing.get(catalog.broker.api.url("/registry/plugins/acme%2Fweather-notes")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 308);
    assert_eq!(response.headers()["location"], "/registry/plugins/acme/weather-notes");

    // A build holds the import: its files are served, the same bytes.
    catalog.broker.journaled().await;
    catalog.broker.rebuild(&tests::strs(&Broker::sources())).await;
    let build = catalog.broker.site.join("current");
    for (route, made) in routes.iter().zip(&live) {
        let (status, cache, body) = fetch(&catalog, route).await;
        assert_eq!(status, 200, "{route}");
        assert_ne!(cache, "no-cache", "{route}: the build's file");
        if route.starts_with("/api/") {
            assert_eq!(&body, made, "{route}: the build's bytes are what the api made");
        }
        let file = match route.starts_with("/api/") {
            true => build.join(route.trim_start_matches('/')),
            false => build.join(format!("{}.html", route.trim_start_matches('/'))),
        };
        assert_eq!(std::fs::read(&file).unwrap(), body, "{route}: served from {}", file.display());
    }

    // An import newer than the build: made by the api again, with it.
    catalog.host.archives.put_folder("acme", "tools", COMMIT_1, &fixture("mcp-clean"));
    catalog.import(&key, repository("acme", "tools", COMMIT_1)).await;
    let (status, cache, body) = fetch(&catalog, plugins::catalog::PLUGINS_JSON).await;
    assert_eq!((status, cache.as_str()), (200, "no-cache"));
    let exported: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(exported["total"], 2);
    let (status, cache, _) = fetch(&catalog, "/registry/plugins/acme/mcp-clean").await;
    assert_eq!((status, cache.as_str()), (200, "no-cache"));
    assert_eq!(fetch(&catalog, "/registry/plugins/acme/nothing").await.0, 404);
}

/// The whole flow against what `make run` serves from this checkout: a
/// fixture imported from its archive host (`archivehost`, the corpus as
/// `corpus/<name>`), scanned, listed, shown on its page and answered by
/// the Guard trust routes by hash and by name. Not part of `make test`
/// (it needs `make run` serving); run it with `cargo test --release
/// --test e2e -- --ignored plugins::make_run`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs `make run` serving on 127.0.0.1:4000"]
async fn make_run_imports_scans_lists_and_trusts() {
    let base = "http://127.0.0.1:4000";
    let client = tests::unpooled_client();
    let index = tests::workspace_root().join("data/plugin-archives.json");
    let served: Vec<Value> = serde_json::from_slice(&std::fs::read(&index).expect("make run's archive index")).unwrap();
    let repository = served.iter().find(|r| r["repository"] == "corpus/mcp-dangerous").expect("the fixture is served");
    let key = tests::live::sign_in(&client, base, "0.0.1001").await;
    let headers = [("x-api-key", key.as_str())];
    let url = |path: &str| format!("{base}{path}");
    let (status, job) =
        tests::live::call(&client, "POST", url("/api/v1/plugins/import"), &headers, Some(repository.clone())).await;
    assert_eq!(status, 202, "{job}");
    let path = format!("/api/v1/plugins/import/{}", job["jobId"].as_str().unwrap());
    let mut ended = Value::Null;
    tests::wait::until("the import job ending", 400, Duration::from_millis(25), async || {
        ended = tests::live::call(&client, "GET", url(&path), &headers, None).await.1;
        ended["status"] == "completed" || ended["status"] == "failed"
    })
    .await;
    assert_eq!(ended["status"], "completed", "{ended}");
    let slug = ended["results"][0]["slug"].as_str().unwrap().to_string();
    assert_eq!(slug, "corpus/mcp-dangerous");
    let get = |path: String| {
        let client = client.clone();
        async move { tests::live::call(&client, "GET", path, &[], None).await }
    };
    let (_, catalog) = get(url("/api/v1/plugins/catalog?q=mcp-dangerous")).await;
    assert!(catalog["items"].as_array().unwrap().iter().any(|i| i["slug"] == slug), "{catalog}");
    let (_, detail) = get(url("/api/v1/plugins/corpus%2Fmcp-dangerous")).await;
    assert_eq!(detail["score"], reference_score("mcp-dangerous"));
    let page = client.get(url("/registry/plugins/corpus/mcp-dangerous")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("DANGEROUS_MCP_COMMAND"));
    let (_, by_hash) = get(url(&format!("/api/v1/guard/trust/by-hash/{}", digest("mcp-dangerous")))).await;
    assert_eq!(by_hash["match"]["artifactSlug"], slug, "{by_hash}");
    let (_, resolved) = get(url("/api/guard/trust/resolve?name=mcp-dangerous")).await;
    assert!(resolved["items"].as_array().unwrap().iter().any(|i| i["artifactSlug"] == slug), "{resolved}");
    println!(
        "make run: {slug} imported, scanned ({}), listed and trusted ({})",
        detail["score"], detail["recommendation"]
    );
}
