//! Builds on object storage (`build-store`), against moto on loopback:
//! `generator publish` uploads a build with each object's headers, an api
//! with no build folder of its own follows the bucket and answers as the
//! build's files say, an upload ended halfway leaves the previous build
//! live, the next publish sends only what is missing, and the api's cache
//! keeps only the builds it may serve.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use hcs20::Topics;
use shared::manifest::Manifest;
use tests::datagen::random_corpus_scaled;
use tests::process::{build, Api};
use tests::s3::S3;
use tests::{unpooled_client, TempDir};

const SCALE: usize = 2_000;

fn live(site: &Path) -> Manifest {
    Manifest::load(&std::fs::canonicalize(site.join("current")).unwrap()).unwrap()
}

/// Runs `generator publish` (or the build of it with `fault` armed),
/// reaching the bucket as `env` says.
fn publish_with(
    program: &str,
    env: Vec<(&str, String)>,
    s3: &S3,
    site: &Path,
    data: &Path,
    fault: Option<&str>,
) -> Output {
    let mut command = s3.publish_command(program, "almanac", site, data);
    command.args(["--concurrency", "4"]).envs(env);
    if let Some(point) = fault {
        command.env(tests::process::FAULT, point);
    }
    command.output().expect("running the generator")
}

fn publish(program: &str, s3: &S3, site: &Path, data: &Path, fault: Option<&str>) -> Output {
    publish_with(program, s3.env(), s3, site, data, fault)
}

/// The report of a publish that succeeded.
fn published(output: Output) -> serde_json::Value {
    assert!(output.status.success(), "publish failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("a JSON report")
}

/// The object keys of `manifest`'s routes.
fn keys(manifest: &Manifest) -> BTreeSet<String> {
    manifest.routes.iter().map(build_store::entry_key).collect()
}

/// The api answers `count` of `manifest`'s routes, spread over it, with
/// the bytes and validators of the build's files in `dir`.
async fn answers_as_built(api: &Api, dir: &Path, manifest: &Manifest, count: usize) {
    let client = unpooled_client();
    let step = (manifest.routes.len() / count).max(1);
    let skipped = ["/api/v1/openapi.json"];
    for entry in manifest.routes.iter().step_by(step).filter(|e| !skipped.contains(&e.route())) {
        let response = client.get(api.url(entry.route())).send().await.unwrap();
        assert_eq!(response.status(), 200, "{}", entry.route());
        assert_eq!(response.headers()["etag"], entry.etag.as_str(), "{}", entry.route());
        assert_eq!(response.headers()["content-type"], entry.content_type, "{}", entry.route());
        let body = response.bytes().await.unwrap();
        assert_eq!(body.as_ref(), std::fs::read(dir.join(entry.file())).unwrap(), "{}", entry.route());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_published_to_a_bucket_is_served_from_it_and_a_halfway_upload_changes_nothing_live() {
    let s3 = S3::start("builds");
    let root = TempDir::new("bucket");
    let corpus = root.path().join("corpus");
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    let broker = tests::workspace_root().join("datasets/broker");
    let grow = |messages: usize| {
        random_corpus_scaled(messages, SCALE, 11, Topics::MAINNET).write_pages(&corpus, false).unwrap();
        // The agents (a search folder), and every build a layer over the
        // first (a bucket holds bases too).
        let flags = ["--ledger-dir", corpus.to_str().unwrap(), "--broker-dir", broker.to_str().unwrap()];
        build(&site, &data, &[&flags[..], &["--layer-min-routes", "0"]].concat());
        live(&site)
    };
    let first = grow(4_000);
    let report = published(publish("generator", &s3, &site, &data, None));
    assert_eq!(report["builds"], serde_json::json!([first.build]));
    assert_eq!(report["objects"], keys(&first).len());
    assert_eq!(report["uploaded"], keys(&first).len(), "an empty bucket is sent everything");
    let variables = s3.env().into_iter().map(|(name, value)| (name.to_string(), value));
    let bucket = build_store::Bucket::open_with(&s3.url("almanac"), Default::default(), variables).unwrap();
    assert_eq!(bucket.current().await.unwrap().as_deref(), Some(first.build.as_str()));

    // Each object carries its route's headers, for a CDN in front.
    let entry = first.routes.iter().find(|e| e.route() == "/hcs20/stats").expect("a stats route");
    let stored =
        bucket.read(&format!("objects/{}", build_store::entry_key(entry))).await.unwrap().expect("the stats object");
    assert_eq!(stored.content_type.as_deref(), Some(entry.content_type));
    assert_eq!(stored.cache_control.as_deref(), Some(entry.cache_control));
    assert_eq!(stored.etag.as_deref(), Some(entry.etag.as_str()));
    assert_eq!(shared::manifest::etag(&stored.bytes), entry.etag);

    // A wrong secret is refused: the server checks every signature.
    let refused = publish_with("generator", s3.env_with_secret("wrong"), &s3, &site, &data, None);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("SignatureDoesNotMatch"), "{said}");

    // An api with empty folders follows the bucket.
    let cache = TempDir::new("bucket-cache");
    let (cache_site, cache_data) = (cache.path().join("site"), cache.path().join("data"));
    let env: Vec<(&str, String)> = s3.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let log = cache.path().join("api.log");
    let flags = ["--site-bucket", &s3.url("almanac")];
    let api = Api::start_logged_with_env(&cache_site, &cache_data, &flags, &log, &env);
    assert_eq!(api.served_build(&first.build), first.build);
    let first_dir = std::fs::canonicalize(site.join("current")).unwrap();
    answers_as_built(&api, &first_dir, &first, 200).await;

    // The next build, uploaded by a run ended halfway through its objects:
    // the bucket's pointer, and so every follower, stays on the first.
    let second = grow(5_000);
    assert_eq!(second.base.as_deref(), Some(first.build.as_str()), "a layer");
    let missing: Vec<_> = keys(&second).difference(&keys(&first)).cloned().collect();
    assert!(missing.len() >= 4, "{} objects to send", missing.len());
    let ended = publish("generator-with-faults", &s3, &site, &data, Some("uploaded-half"));
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(ended.status.signal(), Some(libc::SIGABRT), "the run reached its fault point");
    assert_eq!(bucket.current().await.unwrap().as_deref(), Some(first.build.as_str()));
    assert!(!bucket.has_build(&second.build).await.unwrap(), "no manifest, so no build");
    assert_eq!(api.served_build(&first.build), first.build);

    // Run again, it sends only what the ended run did not.
    let report = published(publish("generator", &s3, &site, &data, None));
    assert_eq!(report["builds"], serde_json::json!([second.build]));
    let uploaded = report["uploaded"].as_u64().unwrap() as usize;
    assert!(
        uploaded > 0 && uploaded <= missing.len() - missing.len() / 2,
        "{uploaded} sent of {} missing, half of which were sent before",
        missing.len()
    );
    assert_eq!(api.served_build(&second.build), second.build);
    let second_dir = std::fs::canonicalize(site.join("current")).unwrap();
    let base_dir = site.join("builds").join(&first.build);
    answers_as_built(&api, &second_dir, &second, 100).await;

    // An api that starts on the layer fetches its base too.
    let late = TempDir::new("bucket-late");
    let late_api = Api::start_logged_with_env(
        &late.path().join("site"),
        &late.path().join("data"),
        &flags,
        &late.path().join("api.log"),
        &env,
    );
    assert_eq!(late_api.served_build(&second.build), second.build);
    assert!(late.path().join("site/builds").join(&first.build).join("_manifest.json").is_file(), "the base fetched");
    answers_as_built(&late_api, &base_dir, &first_routes_kept(&first, &second), 100).await;

    // Two builds later the first api's cache holds the live build, the one
    // before it and their base, and nothing a fetch left behind.
    let mut newest = Vec::new();
    for messages in [6_000, 7_000] {
        let build = grow(messages);
        published(publish("generator", &s3, &site, &data, None));
        assert_eq!(api.served_build(&build.build), build.build);
        newest.push(build.build);
    }
    let cached: BTreeSet<String> = std::fs::read_dir(cache_site.join("builds"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    let expected: BTreeSet<String> = [first.build.clone(), newest[0].clone(), newest[1].clone()].into();
    assert_eq!(cached, expected, "the second build pruned from the cache");
    // The second build's files read before (by `answers_as_built`) and no
    // longer any kept build's are gone; the kept ones' stay.
    let kept: BTreeSet<String> =
        expected.iter().flat_map(|id| keys(&Manifest::load(&site.join("builds").join(id)).unwrap())).collect();
    let objects: BTreeSet<String> = std::fs::read_dir(cache_data.join("objects"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        !objects.is_empty() && objects.is_subset(&kept),
        "{} cached files none of the kept builds name",
        objects.difference(&kept).count()
    );
}

/// The first build's routes the layer still serves from it (unchanged).
fn first_routes_kept(first: &Manifest, second: &Manifest) -> Manifest {
    let changed: BTreeSet<&str> =
        second.routes.iter().map(|e| e.route()).chain(second.removed.iter().map(String::as_str)).collect();
    let mut kept = first.clone();
    kept.routes.retain(|e| !changed.contains(e.route()));
    kept
}
