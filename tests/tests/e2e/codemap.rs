//! The codemap's rule that modules import one way: no module of the api or
//! the generator reaches itself through `crate::` or `super::` imports
//! (tests and comments aside).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use tests::workspace_root;

/// Module path (`broker::agents`) → the modules its code names.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files = tests::files_under(src).into_iter().filter(|p| p.extension().is_some_and(|e| e == "rs"));
    let mut graph = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().to_string()).collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        if parts == ["lib"] || parts == ["main"] {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        let mut named = BTreeSet::new();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (prefix, base) in [("crate::", Vec::new()), ("super::", parts[..parts.len() - 1].to_vec())] {
                for (at, _) in line.match_indices(prefix) {
                    let rest = &line[at + prefix.len()..];
                    let mut path = base.clone();
                    if let Some(group) = rest.strip_prefix('{') {
                        // `use crate::{a, b::c}`: each first segment.
                        for item in group.split('}').next().unwrap().split(',') {
                            let first = item.trim().split("::").next().unwrap().trim();
                            if !first.is_empty() && first != "self" {
                                named.insert([path.clone(), vec![first.to_string()]].concat().join("::"));
                            }
                        }
                        continue;
                    }
                    let mut segments = rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'));
                    path.extend(segments.next().unwrap().split("::").filter(|s| !s.is_empty()).map(str::to_string));
                    named.insert(path.join("::"));
                }
            }
        }
        graph.insert(parts.join("::"), named);
    }
    // Resolve each name to the longest module path it starts with.
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    let resolve = |name: &str| {
        let segments: Vec<&str> = name.split("::").collect();
        (1..=segments.len()).rev().map(|n| segments[..n].join("::")).find(|m| modules.contains(m))
    };
    graph
        .iter()
        .map(|(module, named)| {
            let deps = named.iter().filter_map(|n| resolve(n)).filter(|d| d != module).collect();
            (module.clone(), deps)
        })
        .collect()
}

/// A cycle through `start`, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_string(), vec![start.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((module, path)) = stack.pop() {
        for next in graph.get(&module).into_iter().flatten() {
            if next == start {
                return Some([path.clone(), vec![next.clone()]].concat());
            }
            if seen.insert(next.clone()) {
                stack.push((next.clone(), [path.clone(), vec![next.clone()]].concat()));
            }
        }
    }
    None
}

#[test]
fn modules_import_one_way() {
    for name in LIBRARIES_THEN_BINARIES {
        let crate_dir = format!("{name}/src");
        // A crate of one module has no imports between its modules.
        if std::fs::read_dir(workspace_root().join(&crate_dir)).unwrap().count() == 1 {
            continue;
        }
        let graph = imports(&workspace_root().join(&crate_dir));
        assert!(graph.len() > 1, "{crate_dir}: the modules were found");
        for module in graph.keys() {
            if let Some(cycle) = cycle(&graph, module) {
                panic!("{crate_dir}: an import cycle: {}", cycle.join(" -> "));
            }
        }
    }
}

#[test]
fn the_check_sees_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .into_iter()
        .map(|(m, d)| (m.to_string(), BTreeSet::from([d.to_string()])))
        .collect();
    assert_eq!(cycle(&graph, "a").unwrap(), ["a", "b", "c", "a"]);
    assert!(cycle(&graph, "d").is_none());
}

/// Every crate below the two binaries, then the binaries.
const LIBRARIES_THEN_BINARIES: &[&str] = &[
    "shared",
    "broker-model",
    "search",
    "guard-data",
    "programmable-secrets",
    "plugins",
    "live-store",
    "duckdb-files",
    "hcs20",
    "broker-site",
    "http-client",
    "build-store",
    "embeddings",
    "pages",
    "generator",
    "api",
];
const LIBRARIES: &[&str] = LIBRARIES_THEN_BINARIES.split_at(LIBRARIES_THEN_BINARIES.len() - 2).0;
/// Everything, the throwaway PostgreSQL nothing shipped uses, and the
/// local peers.
const TESTS_MAY_DEPEND_ON: &[&str] = &[
    "shared",
    "broker-model",
    "search",
    "guard-data",
    "programmable-secrets",
    "plugins",
    "live-store",
    "duckdb-files",
    "hcs20",
    "broker-site",
    "http-client",
    "build-store",
    "embeddings",
    "pages",
    "generator",
    "api",
    "pg-scratch",
    "local-peers",
];

/// The workspace's crates and the crates of the workspace each may depend
/// on (normal, dev and build dependencies alike), as ARCHITECTURE.md draws
/// them: the generator and the api know nothing of each other, and nothing
/// shipped depends on the tests.
const CRATES_MAY_DEPEND_ON: &[(&str, &[&str])] = &[
    ("shared", &[]),
    ("broker-model", &["shared"]),
    ("search", &["shared", "broker-model"]),
    ("guard-data", &["shared"]),
    ("programmable-secrets", &["shared"]),
    ("plugins", &[]),
    ("live-store", &["shared", "broker-model", "plugins", "programmable-secrets", "pg-scratch"]),
    ("pg-scratch", &[]),
    ("duckdb-files", &["shared"]),
    ("hcs20", &["shared", "duckdb-files"]),
    ("broker-site", &["shared", "broker-model", "search", "duckdb-files"]),
    ("http-client", &[]),
    ("build-store", &["shared", "http-client"]),
    ("embeddings", &["shared", "broker-model", "http-client"]),
    ("pages", &["shared", "broker-model", "guard-data", "hcs20", "broker-site"]),
    ("generator", LIBRARIES),
    ("api", LIBRARIES),
    ("local-peers", &["shared", "programmable-secrets", "http-client", "generator", "api"]),
    ("tests", TESTS_MAY_DEPEND_ON),
];

/// The workspace crates `manifest` (a Cargo.toml's text) depends on: each
/// dependency given by a `path` inside the workspace, named by its folder.
fn workspace_dependencies(manifest: &str) -> BTreeSet<String> {
    manifest
        .lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once("path = \"../")?;
            Some(rest.split(['"', '/']).next()?.to_string())
        })
        .collect()
}

#[test]
fn crates_depend_one_way() {
    let root = workspace_root();
    let members: BTreeSet<&str> = CRATES_MAY_DEPEND_ON.iter().map(|(name, _)| *name).collect();
    for (name, allowed) in CRATES_MAY_DEPEND_ON {
        let manifest = std::fs::read_to_string(root.join(name).join("Cargo.toml")).unwrap();
        for dependency in workspace_dependencies(&manifest) {
            assert!(members.contains(dependency.as_str()), "{name} depends on {dependency}, not in the codemap");
            assert!(allowed.contains(&dependency.as_str()), "{name} may not depend on {dependency}");
        }
    }
    let top = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let listed = top.lines().find(|l| l.starts_with("members")).expect("the workspace's members");
    for member in listed.split('"').skip(1).step_by(2) {
        assert!(members.contains(member), "{member} is a member the codemap does not place");
    }
}

#[test]
fn the_crate_check_reads_path_dependencies() {
    let manifest = "[dependencies]\ngenerator = { path = \"../generator\" }\nserde = \"1\"\n\
                    [dev-dependencies]\napi = { path = \"../api\", features = [\"x\"] }\n";
    assert_eq!(workspace_dependencies(manifest), BTreeSet::from(["api".to_string(), "generator".to_string()]));
}

/// The crates below the generator and the api, and what each may not
/// reach, directly or through another crate: the async runtime and HTTP
/// servers and clients for all of them, DuckDB too for those that hold no
/// DuckDB file. (`embeddings` is an HTTP client: it has no rule.)
const RUNTIME_AND_HTTP: &[&str] = &["tokio", "hyper", "warp", "reqwest"];
const RUNTIME_HTTP_AND_DUCKDB: &[&str] = &["tokio", "hyper", "warp", "reqwest", "duckdb-files", "libduckdb-sys"];
const LIBRARIES_OUT_OF_REACH: &[(&str, &[&str])] = &[
    ("shared", RUNTIME_HTTP_AND_DUCKDB),
    ("broker-model", RUNTIME_HTTP_AND_DUCKDB),
    ("search", RUNTIME_HTTP_AND_DUCKDB),
    ("guard-data", RUNTIME_HTTP_AND_DUCKDB),
    ("programmable-secrets", RUNTIME_HTTP_AND_DUCKDB),
    ("plugins", RUNTIME_HTTP_AND_DUCKDB),
    ("live-store", &["hyper", "warp", "reqwest", "duckdb-files", "libduckdb-sys"]),
    ("duckdb-files", RUNTIME_AND_HTTP),
    ("hcs20", RUNTIME_AND_HTTP),
    ("broker-site", RUNTIME_AND_HTTP),
    ("pages", RUNTIME_AND_HTTP),
];

/// What builds an HTTP client, or asks with one made on the spot: only
/// `http-client` may, which installs rustls's provider first.
const CLIENT_CONSTRUCTORS: &[&str] = &[
    "reqwest::Client::new(",
    "reqwest::Client::builder(",
    "reqwest::ClientBuilder::new(",
    "reqwest::get(",
    "reqwest::blocking::Client::new(",
    "reqwest::blocking::Client::builder(",
    "reqwest::blocking::get(",
];

/// Where `text` builds a client other than through `http-client`: a
/// constructor named in full, or `Client::new(` / `Client::builder(` of
/// an imported `Client`.
fn client_constructors(text: &str) -> Vec<&str> {
    let mut found: Vec<&str> = CLIENT_CONSTRUCTORS.iter().copied().filter(|pattern| text.contains(pattern)).collect();
    for bare in ["Client::new(", "Client::builder("] {
        let imported = text
            .match_indices(bare)
            .any(|(at, _)| !text[..at].ends_with(|c: char| c == ':' || c == '_' || c.is_ascii_alphanumeric()));
        if imported {
            found.push(bare);
        }
    }
    found
}

#[test]
fn every_http_client_is_built_by_http_client() {
    let root = workspace_root();
    let mut checked = 0;
    for name in LIBRARIES_THEN_BINARIES.iter().chain(&["local-peers", "tests"]).filter(|name| **name != "http-client") {
        let sources =
            tests::files_under(&root.join(name)).into_iter().filter(|p| p.extension().is_some_and(|e| e == "rs"));
        // This file names the constructors it looks for.
        for file in sources.filter(|p| !p.ends_with(file!().rsplit('/').next().unwrap())) {
            let text = std::fs::read_to_string(&file).unwrap();
            let found = client_constructors(&text);
            assert!(found.is_empty(), "{} builds a client with {found:?}: use http_client", file.display());
            checked += 1;
        }
    }
    assert!(checked > 100, "the sources were read ({checked} files)");
    assert_eq!(client_constructors("let c = reqwest::Client::builder().build();"), ["reqwest::Client::builder("]);
    assert_eq!(client_constructors("use reqwest::Client;\nlet c = Client::new();"), ["Client::new("]);
    assert!(client_constructors("let c = http_client::client(); hyper_util::client::legacy::Client::builder(e);")
        .is_empty());
}

/// Each package of a Cargo.lock and the names of its dependencies.
fn lock_graph(lock: &str) -> BTreeMap<String, Vec<String>> {
    let mut graph = BTreeMap::new();
    for package in lock.split("[[package]]").skip(1) {
        let name = package.lines().find_map(|l| l.strip_prefix("name = \"")).map(|n| n.trim_end_matches('"'));
        let Some(name) = name else { continue };
        let dependencies = package
            .split_once("dependencies = [")
            .map(|(_, rest)| rest.split(']').next().unwrap())
            .into_iter()
            .flat_map(|list| list.split(','))
            .filter_map(|d| d.trim().trim_matches('"').split(' ').next().filter(|d| !d.is_empty()).map(String::from))
            .collect();
        graph.insert(name.to_string(), dependencies);
    }
    graph
}

/// Every package `from` reaches through its dependencies.
fn reached(graph: &BTreeMap<String, Vec<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_string()];
    while let Some(name) = stack.pop() {
        for next in graph.get(&name).into_iter().flatten() {
            if seen.insert(next.clone()) {
                stack.push(next.clone());
            }
        }
    }
    seen
}

#[test]
fn the_libraries_below_the_binaries_build_without_runtime_or_http() {
    let graph = lock_graph(&std::fs::read_to_string(workspace_root().join("Cargo.lock")).unwrap());
    for (library, out_of_reach) in LIBRARIES_OUT_OF_REACH {
        assert!(graph.contains_key(*library), "{library} is in Cargo.lock");
        let reached = reached(&graph, library);
        for stack in *out_of_reach {
            assert!(!reached.contains(*stack), "{library} reaches {stack}");
        }
    }
    // The check sees what it looks for: the api reaches all of them.
    let api = reached(&graph, "api");
    assert!(["tokio", "hyper", "duckdb-files"].iter().all(|s| api.contains(*s)), "the api's dependencies were read");
}

/// The packages `cargo tree` resolves for `selection`, each as
/// `name version|features`, in the form the build resolves them: with the
/// dev-dependencies' features only when `edges` names `dev`.
fn resolved_features(edges: &str, selection: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = std::process::Command::new(cargo)
        .args(["tree", "--offline", "--locked", "--prefix", "none", "--format", "{p}|{f}", "--edges", edges])
        .args(selection)
        .current_dir(workspace_root())
        .output()
        .expect("running cargo tree");
    assert!(output.status.success(), "cargo tree: {}", String::from_utf8_lossy(&output.stderr));
    // A package's first line names its folder when it is a member; its
    // repeats end in "(*)".
    let text = String::from_utf8(output.stdout).unwrap();
    text.lines().map(|line| line.trim_end_matches(" (*)").to_string()).collect()
}

/// `make run` builds the generator, the api and the local peers; `make
/// tools` and `make test` the whole workspace, with the tests'
/// dev-dependencies. Cargo compiles a crate again for each set of its
/// features, and every crate above it with it: a feature of tokio that
/// only the tests turned on would compile most of the workspace twice in a
/// newcomer's first `make test`. So every package of `make run`'s build
/// resolves as it does in the others.
#[test]
fn make_runs_build_resolves_the_features_the_others_do() {
    let run = resolved_features("normal,build", &["-p", "generator", "-p", "api", "-p", "local-peers"]);
    assert!(run.len() > 300, "the build's packages were read ({})", run.len());
    for (command, edges) in [("make tools", "normal,build"), ("make test", "normal,build,dev")] {
        let other = resolved_features(edges, &["--workspace"]);
        let differing: Vec<&String> = run.difference(&other).collect();
        assert!(differing.is_empty(), "`make run` and `{command}` resolve these differently: {differing:?}");
    }
    // The check sees features: the api alone resolves tokio without the
    // tests' `process`.
    let api_alone = resolved_features("normal,build", &["-p", "api"]);
    assert!(api_alone.iter().any(|package| package.starts_with("tokio v") && !run.contains(package)));
}
