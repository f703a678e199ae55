//! almanac's plugin scanner against the reference (`plugin-scanner` from
//! PyPI, pinned by the Makefile, which sets `ALMANAC_PLUGIN_SCANNER`) over
//! `plugins/corpus`: for every fixture, the reference's report still says
//! what the fixture's `expected.json` says (the corpus's expectations do
//! not drift from the pinned reference), and each of almanac's categories
//! agrees with the reference's check by check: name, points, maximum and
//! rule ids; and almanac's content digest of each fixture is the one the
//! reference's quality artifact records. The reference makes no network
//! call scanning a folder (its optional third-party analysers are not
//! installed).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn corpus() -> PathBuf {
    tests::workspace_root().join("plugins/corpus")
}

fn scanner() -> PathBuf {
    std::env::var("ALMANAC_PLUGIN_SCANNER")
        .expect("ALMANAC_PLUGIN_SCANNER names the reference's `plugin-scanner` (`make test` installs it and sets it)")
        .into()
}

fn fixtures() -> Vec<PathBuf> {
    let mut fixtures: Vec<PathBuf> =
        std::fs::read_dir(corpus()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    fixtures.sort();
    fixtures
}

/// The reference's report of every fixture's plugin, by fixture, in
/// order: run once per test process, whichever test asks first (each run
/// starts a Python interpreter).
fn references() -> &'static [(PathBuf, Value)] {
    static REPORTS: std::sync::OnceLock<Vec<(PathBuf, Value)>> = std::sync::OnceLock::new();
    REPORTS.get_or_init(|| {
        fixtures()
            .into_iter()
            .map(|f| {
                let report = reference(&f.join("plugin"));
                (f, report)
            })
            .collect()
    })
}

fn reference(plugin: &Path) -> Value {
    let scanner = scanner().display().to_string();
    let output = Command::new(&scanner)
        .args(["scan", plugin.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap_or_else(|e| panic!("{scanner}: {e}"));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("{} is not a JSON report ({e}): {}", plugin.display(), String::from_utf8_lossy(&output.stderr))
    })
}

fn rules(findings: &Value) -> Vec<String> {
    let mut rules: Vec<String> =
        findings.as_array().unwrap().iter().map(|f| f["ruleId"].as_str().unwrap().to_string()).collect();
    rules.sort();
    rules
}

#[test]
fn almanacs_scanner_agrees_with_the_reference_over_the_corpus() {
    let fixtures = references();
    let mut differences = Vec::new();
    let mut checks = 0;
    for (fixture, answer) in fixtures {
        let name = fixture.file_name().unwrap().to_str().unwrap();
        let plugin = fixture.join("plugin");
        assert_eq!(answer["schema_version"], "scan-result.v1");
        let expected: Value = serde_json::from_slice(&std::fs::read(fixture.join("expected.json")).unwrap()).unwrap();
        assert_eq!((&answer["score"], &answer["grade"]), (&expected["score"], &expected["grade"]), "{name}");
        for category in answer["categories"].as_array().unwrap() {
            let title = category["name"].as_str().unwrap();
            let summary = serde_json::json!({
                "points": category["score"],
                "max": category["max"],
                "rules": category["checks"].as_array().unwrap().iter().flat_map(|c| rules(&c["findings"])).collect::<std::collections::BTreeSet<_>>(),
            });
            let want = &expected["categories"][title];
            let want_rules: std::collections::BTreeSet<&str> =
                want["rules"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
            assert_eq!(
                (&summary["points"], &summary["max"]),
                (&want["points"], &want["max"]),
                "{name} / {title}: the reference's points"
            );
            let got_rules: std::collections::BTreeSet<&str> =
                summary["rules"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
            assert_eq!(got_rules, want_rules, "{name} / {title}: the reference's rules");
        }
        for ours in plugins::scan::categories(&generator::plugin_folder::read(&plugin).unwrap()) {
            let theirs = answer["categories"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == ours.name)
                .unwrap_or_else(|| panic!("{name}: the reference has no category {}", ours.name));
            let their_checks = theirs["checks"].as_array().unwrap();
            if their_checks.len() != ours.checks.len() {
                differences.push(format!(
                    "{name} / {}: {} checks, the reference {}",
                    ours.name,
                    ours.checks.len(),
                    their_checks.len()
                ));
                continue;
            }
            for (check, their) in ours.checks.iter().zip(their_checks) {
                checks += 1;
                let mut our_rules: Vec<String> = check.findings.iter().map(|f| f.rule_id.clone()).collect();
                our_rules.sort();
                let got = (check.name, check.points, check.max_points, our_rules);
                let want = (
                    their["name"].as_str().unwrap(),
                    their["points"].as_u64().unwrap() as u32,
                    their["maxPoints"].as_u64().unwrap() as u32,
                    rules(&their["findings"]),
                );
                if got != want {
                    differences.push(format!("{name} / {}: ours {got:?}, the reference's {want:?}", ours.name));
                }
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    println!("{} fixtures, {checks} checks agree with the reference", fixtures.len());
}

/// The digest the reference's `plugin-quality.v1` artifact records,
/// computed by its own function in its own interpreter.
#[test]
fn the_content_digest_is_the_references() {
    let python = scanner().with_file_name("python");
    let program = "import json, sys\n\
                   from pathlib import Path\n\
                   from codex_plugin_scanner.quality_artifact import _digest_plugin\n\
                   print(json.dumps([_digest_plugin(Path(p)) for p in sys.argv[1:]]))";
    let plugins: Vec<PathBuf> = fixtures().iter().map(|f| f.join("plugin")).collect();
    let output = Command::new(&python).arg("-c").arg(program).args(&plugins).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let theirs: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    for (plugin, their) in plugins.iter().zip(&theirs) {
        let ours = plugins::digest::digest(&generator::plugin_folder::read(plugin).unwrap());
        assert_eq!(
            (ours.value.as_str(), ours.included_files as u64),
            (their["value"].as_str().unwrap(), their["included_files"].as_u64().unwrap()),
            "{}",
            plugin.display()
        );
    }
    assert_eq!(theirs.len(), plugins.len());
}

/// `generator scan-plugin DIR --format json`, the real binary, prints the
/// reference's score, grade and findings for every fixture; the text
/// report says the score and each finding's rule.
#[test]
fn the_scan_plugin_command_reports_what_the_reference_reports() {
    for (fixture, theirs) in references() {
        let plugin = fixture.join("plugin");
        let run = |format: &str| {
            let output = Command::new(tests::process::binary("generator"))
                .args(["scan-plugin", plugin.to_str().unwrap(), "--format", format])
                .output()
                .unwrap();
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
            String::from_utf8(output.stdout).unwrap()
        };
        let ours: Value = serde_json::from_str(&run("json")).unwrap();
        for field in ["schema_version", "scope", "score", "raw_score", "effective_score", "grade", "ecosystems"] {
            assert_eq!(ours[field], theirs[field], "{}: {field}", fixture.display());
        }
        assert_eq!(ours["summary"]["gradeLabel"], theirs["summary"]["gradeLabel"]);
        assert_eq!(ours["summary"]["findings"], theirs["summary"]["findings"], "{}", fixture.display());
        assert_eq!(rules(&ours["findings"]), rules(&theirs["findings"]), "{}", fixture.display());
        let severities = |report: &Value| -> Vec<String> {
            report["findings"].as_array().unwrap().iter().map(|f| f["severity"].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(severities(&ours), severities(theirs), "{}: most severe first", fixture.display());
        assert_eq!(ours["packages"][0]["name"], theirs["packages"][0]["name"]);
        let text = run("text");
        assert!(
            text.contains(&format!("{} / 100, grade {}", ours["score"], ours["grade"].as_str().unwrap())),
            "{text}"
        );
        for rule in rules(&ours["findings"]) {
            assert!(text.contains(&rule), "{text}");
        }
    }
}
