//! DuckDB as the binaries link it, and data folders it cannot read.
//!
//! The binaries link the DuckDB project's prebuilt `libduckdb.so` and find
//! it by their run path alone; an installed folder (binaries and library
//! side by side) runs wherever it is copied. A warehouse or snapshot
//! written by DuckDB 2.0 (`tests/fixtures/written-by-duckdb-2.0.0.duckdb`,
//! made by the real DuckDB 2.0.0) is refused with a message naming the file
//! and the fix, and `generator build --full` recovers from it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::LazyLock;
use std::time::Duration;

use duckdb_files::database;
use serde_json::{json, Value};
use tests::process::{binary, build, generator, Api};
use tests::{workspace_root, TempDir};

fn fixture() -> PathBuf {
    workspace_root().join("tests/fixtures/written-by-duckdb-2.0.0.duckdb")
}

/// The checked-in ledger's folder.
fn ledger() -> &'static str {
    static LEDGER: LazyLock<String> =
        LazyLock::new(|| workspace_root().join("datasets/ledger").to_string_lossy().into_owned());
    &LEDGER
}

/// `generator build` over the checked-in ledger into `site` and `data`.
fn build_args<'a>(site: &'a Path, data: &'a Path) -> Vec<&'a str> {
    vec!["build", "--ledger-dir", ledger(), "--site-dir", site.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]
}

/// The id of the build `site/current` names.
fn live_id(site: &Path) -> String {
    std::fs::read_link(site.join("current")).unwrap().file_name().unwrap().to_string_lossy().into_owned()
}

/// Runs `exe` with an empty environment but for `LD_DEBUG=libs` (which
/// only reports what the loader does) and returns the output and the
/// `libduckdb.so` the loader initialised, if any.
fn run_alone(exe: &Path, args: &[&str]) -> (Output, Option<PathBuf>) {
    let out = Command::new(exe).args(args).env_clear().env("LD_DEBUG", "libs").output().expect("running a binary");
    let loaded = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|line| line.split_once("calling init: ").map(|(_, path)| PathBuf::from(path.trim())))
        .find(|path| path.file_name().is_some_and(|name| name == "libduckdb.so"));
    (out, loaded)
}

#[test]
fn the_binaries_find_libduckdb_by_their_run_path_and_an_installed_folder_runs_anywhere() {
    // The Makefile sets DUCKDB_LIB_DIR for the prebuilt library and leaves
    // it unset for the `bundled` fallback, which links DuckDB statically.
    let lib_dir = std::env::var_os("DUCKDB_LIB_DIR").map(PathBuf::from);
    for name in ["generator", "api"] {
        let (out, loaded) = run_alone(&binary(name), &["--help"]);
        assert!(out.status.success(), "{name} --help with no environment: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(loaded, lib_dir.as_ref().map(|dir| dir.join("libduckdb.so")), "{name}");
    }
    let Some(lib_dir) = lib_dir else { return };

    // `make install`'s layout: the binaries and the library in one folder.
    let root = TempDir::new("installed");
    let bin = root.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for name in ["generator", "api"] {
        std::fs::copy(binary(name), bin.join(name)).unwrap();
    }
    std::fs::copy(lib_dir.join("libduckdb.so"), bin.join("libduckdb.so")).unwrap();
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    let args = build_args(&site, &data);
    let (out, loaded) = run_alone(&bin.join("generator"), &args);
    assert!(out.status.success(), "installed generator: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(loaded, Some(bin.join("libduckdb.so")), "the library beside the binary comes first");
    assert!(site.join("current").exists());
}

#[test]
fn a_warehouse_written_by_duckdb_2_is_refused_and_rebuilt_by_a_full_run() {
    let root = TempDir::new("newer-warehouse");
    let clean = root.path().join("clean");
    build(&clean.join("site"), &clean.join("data"), &["--ledger-dir", ledger()]);
    let expected = std::fs::read_link(clean.join("site/current")).unwrap();

    let (site, data) = (root.path().join("site"), root.path().join("data"));
    std::fs::create_dir_all(&data).unwrap();
    let warehouse = data.join("warehouse.duckdb");
    std::fs::copy(fixture(), &warehouse).unwrap();
    let args = build_args(&site, &data);

    let out = generator(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "an error, not a panic: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for needle in [warehouse.to_str().unwrap(), "DuckDB v2.0.0", "generator build --full", "or delete it"] {
        assert!(stderr.contains(needle), "the message names {needle:?}: {stderr}");
    }
    assert!(!site.exists() && !data.join("snapshots").exists(), "nothing written");
    assert_eq!(std::fs::read(&warehouse).unwrap(), std::fs::read(fixture()).unwrap(), "the warehouse untouched");

    build(&site, &data, &["--ledger-dir", ledger(), "--full"]);
    assert_eq!(std::fs::read_link(site.join("current")).unwrap(), expected, "the same build as from a clean folder");
    let aside = data.join("warehouse.duckdb.v2.0.0");
    assert_eq!(std::fs::read(&aside).unwrap(), std::fs::read(fixture()).unwrap(), "the old file is set aside");
    database::open(&warehouse, database::Access::ReadOnly).expect("a new warehouse this DuckDB reads");
}

#[test]
fn a_snapshot_written_by_duckdb_2_is_refused_by_the_api_and_written_anew_by_a_full_run() {
    let root = TempDir::new("newer-snapshot");
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    build(&site, &data, &["--ledger-dir", ledger()]);
    let id = live_id(&site);
    // The data folder a DuckDB 2.0 build left: its snapshots are 2.0's.
    let snapshot = data.join("snapshots").join(format!("{id}.duckdb"));
    std::fs::copy(fixture(), &snapshot).unwrap();

    let log = root.path().join("api.log");
    // The reload's retries are logged at debug: the event waited for.
    let api = Api::start_logged_with_env(&site, &data, &[], &log, &[("RUST_LOG", "info,api::reload=debug")]);
    let client = http_client::blocking::client();
    let status = || client.get(api.url("/hcs20/stats")).send().unwrap().status().as_u16();
    assert_eq!(status(), 503, "no build is served from a snapshot that cannot be read");
    tests::wait::until_blocking("the api trying the build again", 200, Duration::from_millis(50), || {
        std::fs::read_to_string(&log).unwrap().contains("still does not load")
    });
    let logged = std::fs::read_to_string(&log).unwrap();
    for needle in [snapshot.to_str().unwrap(), "DuckDB v2.0.0", "generator build --full"] {
        assert!(logged.contains(needle), "the api's log names {needle:?}: {logged}");
    }
    assert_eq!(
        logged.matches("could not load the published build").count(),
        1,
        "logged once, not at every reload tick: {logged}"
    );

    build(&site, &data, &["--ledger-dir", ledger(), "--full"]);
    assert_eq!(database::header(&snapshot).unwrap().unwrap().written_by.as_deref(), Some(database::library_version()));
    tests::wait::until_blocking("the api picking up the rewritten snapshot", 200, Duration::from_millis(50), || {
        status() == 200
    });
}

/// Questions an analyst asks a snapshot, each answered as one string.
const QUESTIONS: &[&str] = &[
    "SELECT string_agg(table_name, ',' ORDER BY table_name) FROM information_schema.tables",
    "SELECT count(*)::VARCHAR FROM messages",
    "SELECT count(*)::VARCHAR || ' ' || max(consensus_at)::VARCHAR FROM events_at",
    "SELECT string_agg(tick || '=' || supply::VARCHAR, ',' ORDER BY topic, tick) FROM tokens",
    "SELECT sum(balance)::VARCHAR FROM holdings",
    "SELECT count(*)::VARCHAR || ' ' || count(embedding)::VARCHAR FROM broker_agents",
    // The example queries of `docs/hcs20.md`, as an analyst would ask them.
    "SELECT string_agg(account || '=' || balance::VARCHAR, ',' ORDER BY balance DESC, account) \
     FROM (SELECT * FROM holders WHERE tick = 'luna0' ORDER BY balance DESC, account LIMIT 3)",
    "SELECT string_agg(day || ':' || n::VARCHAR, ',' ORDER BY day) FROM \
     (SELECT strftime(consensus_at, '%Y-%m-%d') AS day, count(*) AS n FROM events_at WHERE kind = 'mint' GROUP BY day)",
    "SELECT string_agg(reason || '=' || n::VARCHAR, ',' ORDER BY n DESC, reason) FROM \
     (SELECT reason, count(*) AS n FROM operations WHERE NOT valid GROUP BY reason)",
    "SELECT string_agg(registry || '/' || protocol || '=' || n::VARCHAR, ',' ORDER BY registry, protocol) FROM \
     (SELECT registry, protocol, count(*) AS n FROM agents GROUP BY registry, protocol)",
    // What the snapshot says of itself.
    "SELECT string_agg(view_name, ',' ORDER BY view_name) FROM duckdb_views() WHERE NOT internal",
    "SELECT comment FROM duckdb_tables() WHERE table_name = 'operations'",
    "SELECT comment FROM duckdb_views() WHERE view_name = 'agents'",
];

/// Opens a snapshot read-only with a Python interpreter's `duckdb` package
/// and answers [`QUESTIONS`]: the package's version, then the answers.
const READER: &str = r#"
import json, sys, duckdb
conn = duckdb.connect(sys.argv[1], read_only=True)
print(json.dumps([duckdb.__version__] + [conn.execute(q).fetchone()[0] for q in json.loads(sys.argv[2])]))
"#;

#[test]
fn the_duckdb_releases_analysts_use_open_a_snapshot_and_answer_as_ours_does() {
    // The Makefile installs the releases (`make readers`) and names their
    // interpreters here.
    let readers = std::env::var("ALMANAC_DUCKDB_READERS")
        .expect("ALMANAC_DUCKDB_READERS names the analysts' DuckDB releases (`make test` sets it)");
    let root = TempDir::new("readers");
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    let broker = workspace_root().join("datasets/broker");
    build(&site, &data, &["--ledger-dir", ledger(), "--broker-dir", broker.to_str().unwrap()]);
    let id = live_id(&site);
    let snapshot = data.join("snapshots").join(format!("{id}.duckdb"));

    let ours: Vec<String> = {
        let conn = database::open(&snapshot, database::Access::ReadOnly).unwrap();
        QUESTIONS.iter().map(|q| conn.query_row(q, [], |row| row.get(0)).unwrap()).collect()
    };
    assert!(ours[0].contains("broker_agents") && ours[1] != "0", "a snapshot with data: {ours:?}");
    let questions = serde_json::to_string(QUESTIONS).unwrap();
    let mut versions = Vec::new();
    for python in readers.split_whitespace() {
        let out = Command::new(python).args(["-c", READER]).arg(&snapshot).arg(&questions).output().unwrap();
        assert!(out.status.success(), "{python}: {}", String::from_utf8_lossy(&out.stderr));
        let mut answers: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
        let version = answers.remove(0);
        assert_eq!(answers, ours, "DuckDB {version} answers as ours does");
        versions.push(version);
    }
    assert!(versions.len() >= 2, "at least two releases checked: {versions:?}");
    eprintln!("the snapshot opened in DuckDB {}", versions.join(", "));

    // The same example queries on the build's Parquet exports, each
    // export read as the manifest describes it.
    let build_dir = site.join("current");
    let manifest: Value = serde_json::from_slice(&std::fs::read(build_dir.join("_manifest.json")).unwrap()).unwrap();
    let schemas: BTreeMap<String, Value> = manifest["exports"]
        .as_array()
        .expect("the manifest lists the exports")
        .iter()
        .map(|e| {
            let file = e["route"].as_str().unwrap().trim_start_matches('/').to_string();
            let columns = e["columns"].as_array().unwrap().iter().map(|c| json!([c["name"], c["type"]])).collect();
            (file, Value::Array(columns))
        })
        .collect();
    assert_eq!(
        schemas.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "exports/agents.parquet",
            "exports/events.parquet",
            "exports/feedback.parquet",
            "exports/holders.parquet",
            "exports/operations.parquet",
            "exports/ticks.parquet"
        ]
    );
    let readme = &QUESTIONS[6..10];
    let spec = json!({
        "dir": build_dir,
        "views": {"holders": "exports/holders.parquet", "events_at": "exports/events.parquet",
                  "operations": "exports/operations.parquet", "agents": "exports/agents.parquet"},
        "files": schemas.keys().collect::<Vec<_>>(),
        "questions": readme,
    });
    for python in readers.split_whitespace() {
        let out = Command::new(python).args(["-c", PARQUET_READER]).arg(spec.to_string()).output().unwrap();
        assert!(out.status.success(), "{python}: {}", String::from_utf8_lossy(&out.stderr));
        let read: Value = serde_json::from_slice(&out.stdout).unwrap();
        let version = &read["version"];
        assert_eq!(
            read["answers"],
            json!(ours[6..10]),
            "DuckDB {version} answers from the exports as from the snapshot"
        );
        assert_eq!(read["schemas"], json!(schemas), "DuckDB {version} reads each export as the manifest describes it");
    }
}

/// Reads the Parquet exports in an in-memory database with a Python
/// interpreter's `duckdb` package: views over the files, the questions'
/// answers and each file's columns.
const PARQUET_READER: &str = r#"
import json, sys, duckdb
spec = json.loads(sys.argv[1])
conn = duckdb.connect()
path = lambda f: (spec["dir"] + "/" + f).replace("'", "''")
for view, f in spec["views"].items():
    conn.execute(f"CREATE VIEW {view} AS SELECT * FROM read_parquet('{path(f)}')")
schemas = {f: [[c[0], c[1]] for c in conn.execute(f"DESCRIBE SELECT * FROM read_parquet('{path(f)}')").fetchall()]
           for f in spec["files"]}
answers = [conn.execute(q).fetchone()[0] for q in spec["questions"]]
print(json.dumps({"version": duckdb.__version__, "answers": answers, "schemas": schemas}))
"#;
