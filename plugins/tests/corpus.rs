//! The corpus (`plugins/corpus/<fixture>/plugin`), each fixture scanned and
//! compared with what `expected.json` beside it says: each category's
//! points, maximum and rule ids, and, once the scanner has every category
//! the expectation names, the score and grade. The expectations are the
//! reference scanner's answers (`tests/tests/e2e/plugin_scanner.rs` runs
//! it over the same corpus and checks that it still gives them).

use std::path::{Path, PathBuf};

use plugins::scan;
use plugins::tree::Tree;
use serde_json::Value;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// The folder's regular files, as a tree.
fn read(root: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, tree: &mut Tree) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, tree);
            } else {
                let relative = path.strip_prefix(root).unwrap().to_str().unwrap().to_string();
                tree.insert(&relative, std::fs::read(&path).unwrap()).unwrap();
            }
        }
    }
    let mut tree = Tree::new();
    walk(root, root, &mut tree);
    tree
}

#[test]
fn every_fixture_scans_as_expected() {
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(corpus()).unwrap().map(|e| e.unwrap().path()).collect();
    fixtures.retain(|p| p.is_dir());
    fixtures.sort();
    assert!(fixtures.len() >= 10, "the corpus is there");
    let mut failures = Vec::new();
    for fixture in &fixtures {
        let name = fixture.file_name().unwrap().to_str().unwrap();
        let expected: Value = serde_json::from_slice(&std::fs::read(fixture.join("expected.json")).unwrap()).unwrap();
        let categories = scan::categories(&read(&fixture.join("plugin")));
        for category in &categories {
            let want = &expected["categories"][category.name];
            let mut rules: Vec<&str> =
                category.checks.iter().flat_map(|c| &c.findings).map(|f| f.rule_id.as_str()).collect();
            rules.sort_unstable();
            let got = serde_json::json!({"points": category.score, "max": category.max, "rules": rules});
            if &got != want {
                failures.push(format!("{name} / {}: got {got}, expected {want}", category.name));
            }
        }
        let every = expected["categories"].as_object().unwrap().len();
        if categories.len() == every {
            let score = plugins::report::score(&categories);
            let got = (score, plugins::report::grade(score));
            let want = (expected["score"].as_u64().unwrap() as u32, expected["grade"].as_str().unwrap());
            if got != want {
                failures.push(format!("{name}: score and grade {got:?}, expected {want:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
