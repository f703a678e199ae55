//! Validation and selection rules, each case a mutation of the checked-in
//! sources and what the build must say about it.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::*;

const FILES: [&str; 5] = ["facts.json", "campaigns.json", "coverage.json", "policies.json", "benchmark.json"];

fn datasets() -> PathBuf {
    shared::checkout::path("datasets/guard")
}

/// The checked-in sources with `mutate` applied to record `index` of
/// `file`, written to a fresh folder.
fn mutated(file: &str, index: usize, mutate: impl Fn(&mut Value)) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("almanac-guard-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in FILES {
        let mut value: Value = serde_json::from_slice(&std::fs::read(datasets().join(name)).unwrap()).unwrap();
        if name == file {
            mutate(&mut value["records"][index]);
        }
        std::fs::write(dir.join(name), serde_json::to_vec(&value).unwrap()).unwrap();
    }
    dir
}

/// The build must fail with an error naming the file, the record and the
/// field (each `expected` part must appear in the message).
fn check(rule: &str, file: &str, index: usize, mutate: impl Fn(&mut Value), expected: &[&str]) {
    let dir = mutated(file, index, mutate);
    let result = load(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let message = match result {
        Ok(_) => panic!("{rule}: the build accepted the record"),
        Err(e) => format!("{e:#}"),
    };
    for part in expected {
        assert!(message.contains(part), "{rule}: {message:?} does not mention {part:?}");
    }
}

#[test]
fn checked_in_sources_are_valid() {
    load(&datasets()).unwrap();
}

#[test]
fn malformed_records_fail_the_build_naming_them() {
    let set = |field: &'static str, v: Value| move |r: &mut Value| r[field] = v.clone();
    check(
        "a required field",
        "facts.json",
        0,
        |r| {
            r.as_object_mut().unwrap().remove("claim");
        },
        &["facts.json", "fact-runtime-001", "claim"],
    );
    check(
        "an unknown field",
        "facts.json",
        1,
        set("claimm", json!("x")),
        &["facts.json", "fact-runtime-002", "claimm"],
    );
    check("an empty claim", "facts.json", 0, set("claim", json!("  ")), &["fact-runtime-001", "\"claim\"", "empty"]);
    check("a bad date", "facts.json", 0, set("verifiedAt", json!("2026-13-01")), &["fact-runtime-001", "verifiedAt"]);
    check(
        "expiry before verification",
        "facts.json",
        0,
        set("expiresAt", json!("2026-01-01")),
        &["expiresAt", "after"],
    );
    check("evidence is required", "facts.json", 2, set("evidence", json!([])), &["fact-runtime-003", "evidence"]);
    check(
        "evidence URLs are https",
        "facts.json",
        0,
        |r| r["evidence"][0]["url"] = json!("http://example.com"),
        &["fact-runtime-001", "evidence.url"],
    );
    check(
        "an unknown review state",
        "facts.json",
        0,
        |r| r["review"]["state"] = json!("ok"),
        &["fact-runtime-001", "ok"],
    );
    check(
        "a private field of the wrong shape",
        "facts.json",
        0,
        |r| r["internal"]["findings"] = json!("text"),
        &["fact-runtime-001", "findings"],
    );
    check(
        "a duplicate id",
        "facts.json",
        1,
        set("id", json!("fact-runtime-001")),
        &["fact-runtime-001", "two records"],
    );
    check(
        "a campaign severity",
        "campaigns.json",
        0,
        set("severity", json!("severe")),
        &["campaigns.json", "camp-mcp-tool-poisoning", "severity"],
    );
    check("lastSeen before firstSeen", "campaigns.json", 0, set("lastSeen", json!("2020-01-01")), &["lastSeen"]);
    check("attack steps", "campaigns.json", 1, set("attackSteps", json!([])), &["camp-mcp-rug-pull", "attackSteps"]);
    check(
        "a support level",
        "coverage.json",
        0,
        set("supportLevel", json!("full")),
        &["coverage.json", "supportLevel"],
    );
    check("a coverage status", "coverage.json", 0, set("status", json!("ok")), &["status"]);
    check("a policy action", "policies.json", 0, set("action", json!("deny")), &["policies.json", "action"]);
    check(
        "a policy's campaign",
        "policies.json",
        0,
        set("campaignId", json!("camp-none")),
        &["campaignId", "camp-none"],
    );
    check(
        "a result outcome",
        "benchmark.json",
        0,
        |r| r["results"][0]["outcome"] = json!("blocked"),
        &["benchmark.json", "run-2026-09-14", "results[0].outcome", "`prevented`"],
    );
    check("a result harness", "benchmark.json", 0, |r| r["results"][0]["harness"] = json!("vim"), &["results.harness"]);
    check(
        "a missing result cell",
        "benchmark.json",
        0,
        |r| {
            r["results"].as_array_mut().unwrap().pop();
        },
        &["results", "exactly one"],
    );
    check("a run time", "benchmark.json", 0, set("runAt", json!("yesterday")), &["runAt"]);
}

#[test]
fn only_approved_unexpired_records_are_published() {
    let sources = load(&datasets()).unwrap();
    let today = NaiveDate::from_ymd_opt(2026, 11, 21).unwrap();
    let out = project(&sources, today);
    let ids = |v: Vec<&String>| v.into_iter().cloned().collect::<Vec<_>>();
    let facts = ids(out.facts.facts.iter().map(|f| &f.id).collect());
    for absent in ["fact-runtime-004", "fact-mcp-004", "fact-mcp-003", "fact-deploy-000"] {
        assert!(!facts.contains(&absent.to_string()), "{absent} is published");
    }
    assert_eq!(out.facts.count, 13);
    let campaigns = ids(out.campaigns.campaigns.iter().map(|c| &c.id).collect());
    assert!(!campaigns.contains(&"camp-clipboard-agent-injection".to_string()));
    assert_eq!(campaigns.len(), 8);
    let policies = ids(out.policies.policies.iter().map(|p| &p.id).collect());
    assert!(!policies.contains(&"pol-readme-block-draft".to_string()), "a pending policy is published");
    assert!(!policies.contains(&"pol-clipboard-warn".to_string()), "a policy of an unpublished campaign is published");
    let coverage = ids(out.coverage.assertions.iter().map(|a| &a.id).collect());
    assert!(!coverage.contains(&"cov-cursor-background-agents".to_string()));
    assert!(!coverage.contains(&"cov-codex-legacy-cli".to_string()), "an expired assertion is published");
    assert_eq!(out.benchmark.runs.len(), 1, "the pending run is published");

    // An earlier reference date brings the expired fact back; the output
    // depends on the date only through which records are in.
    let earlier = project(&sources, NaiveDate::from_ymd_opt(2026, 10, 1).unwrap());
    assert!(earlier.facts.facts.iter().any(|f| f.id == "fact-mcp-003"));
    assert_eq!(project(&sources, today + chrono::Days::new(3)), out);
}

#[test]
fn last_modified_is_the_newest_review_behind_the_file() {
    let sources = load(&datasets()).unwrap();
    let out = project(&sources, NaiveDate::from_ymd_opt(2026, 11, 21).unwrap());
    let newest = out.facts.facts.iter().flat_map(|f| [&f.reviewed_at, &f.verified_at]).max().unwrap();
    assert_eq!(&out.facts.last_reviewed, newest);
    let files = render(&out);
    assert_eq!(files[0].representation.last_modified.http_date(), "Fri, 02 Oct 2026 00:00:00 GMT");
    // The files parse back into the same datasets.
    let parsed = parse(|route| files.iter().find(|f| f.route == route).map(|f| f.representation.body.clone())).unwrap();
    assert_eq!(parsed, out);
}
