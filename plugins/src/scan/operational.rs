//! Operational Security (20 points when everything applies): the
//! plugin's GitHub Actions workflows pin third-party actions to commit
//! SHAs, ask for no `write-all` token, and never check out a pull
//! request's head from a privileged trigger; Dependabot watches what
//! there is to update; dependency manifests come with lockfiles (or, for
//! `requirements.txt`, exact pins). A plugin with no workflow and no
//! dependency manifest is worth 0 of 0 here.

use std::sync::OnceLock;

use fancy_regex::Regex;

use super::text::{found, ignoring_errors};
use super::Plugin;
use crate::report::{Check, Finding, Severity};
use crate::tree;

const CATEGORY: &str = "operational-security";
const WORKFLOWS: &str = ".github/workflows";
const NODE_LOCKFILES: [&str; 5] = ["package-lock.json", "pnpm-lock.yaml", "yarn.lock", "bun.lock", "bun.lockb"];
const PYTHON_LOCKFILES: [&str; 4] = ["uv.lock", "poetry.lock", "Pipfile.lock", "requirements.lock"];
const NO_WORKFLOWS: &str = "No GitHub Actions workflows found.";

struct Patterns {
    uses: Regex,
    write_all: Regex,
    privileged_trigger: Regex,
    untrusted_ref: Regex,
    requirement_pin: Regex,
    dependabot_actions: Regex,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let compile = |pattern: &str| Regex::new(pattern).expect("the workflow patterns compile");
        Patterns {
            uses: compile(r"(?m)^\s*(?:-\s*)?uses:\s*([^\s#]+)"),
            write_all: compile(r"(?m)^\s*permissions:\s*write-all\b"),
            privileged_trigger: compile(r"\bpull_request_target\b|\bworkflow_run\s*:"),
            untrusted_ref: compile(
                r"github\.event\.pull_request\.head\.(?:sha|ref)|github\.event\.workflow_run\.head_(?:sha|branch)",
            ),
            requirement_pin: compile(r"^[A-Za-z0-9_.-]+(?:\[[A-Za-z0-9_,.-]+\])?==[^=\s]+$"),
            dependabot_actions: compile(r#"(?i)package-ecosystem:\s*["']?github-actions["']?"#),
        }
    })
}

/// The workflow files (`.yml`, `.yaml` under `.github/workflows`, at
/// any depth) with their text, in path order.
fn workflows<'a>(plugin: &Plugin<'a>) -> Vec<(&'a str, String)> {
    plugin
        .tree
        .under(WORKFLOWS)
        .filter(|(path, _)| matches!(tree::suffix(path), ".yml" | ".yaml"))
        .map(|(path, bytes)| (path, ignoring_errors(bytes)))
        .collect()
}

/// Which dependency manifests the plugin's root has.
struct Manifests {
    package_json: bool,
    pyproject: bool,
    requirements: bool,
}

impl Manifests {
    fn of(plugin: &Plugin) -> Manifests {
        let has = |name: &str| plugin.tree.exists(name);
        Manifests {
            package_json: has("package.json"),
            pyproject: has("pyproject.toml"),
            requirements: has("requirements.txt"),
        }
    }

    fn any(&self) -> bool {
        self.package_json || self.pyproject || self.requirements
    }
}

pub(super) fn checks(plugin: &Plugin) -> Vec<Check> {
    let workflows = workflows(plugin);
    let manifests = Manifests::of(plugin);
    vec![
        actions_pinned(&workflows),
        no_write_all(&workflows),
        no_untrusted_checkout(&workflows),
        dependabot(plugin, &workflows, &manifests),
        lockfiles(plugin, &manifests),
    ]
}

fn finding(rule: &str, severity: Severity, title: &str, description: String, fix: &str, path: &str) -> Finding {
    Finding::new(rule, severity, CATEGORY, title, description).remediation(fix).file(path)
}

/// Every `uses:` is local (`./`), a container (`docker://`), or pinned to
/// a full 40-hex-digit commit.
fn actions_pinned(workflows: &[(&str, String)]) -> Check {
    const NAME: &str = "Third-party GitHub Actions pinned to SHAs";
    if workflows.is_empty() {
        return Check::weightless(NAME, NO_WORKFLOWS);
    }
    let pinned = |reference: &str| {
        reference
            .rsplit_once('@')
            .is_some_and(|(_, commit)| commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let mut unpinned: Vec<(&str, String)> = Vec::new();
    for (path, text) in workflows {
        for captures in patterns().uses.captures_iter(text) {
            let Ok(captures) = captures else { break };
            let reference = captures.get(1).map_or("", |m| m.as_str()).trim();
            if reference.starts_with("./") || reference.starts_with("docker://") || pinned(reference) {
                continue;
            }
            unpinned.push((path, reference.to_string()));
        }
    }
    if unpinned.is_empty() {
        return Check::pass(
            NAME,
            5,
            "All third-party GitHub Actions and reusable workflows are pinned to immutable SHAs.",
        );
    }
    let shown: Vec<String> = unpinned.iter().take(3).map(|(path, reference)| format!("{path}:{reference}")).collect();
    let findings = unpinned
        .iter()
        .map(|(path, reference)| {
            finding(
                "GITHUB_ACTION_UNPINNED",
                Severity::Medium,
                "GitHub Action is not pinned to an immutable commit SHA",
                format!("{path} references \"{reference}\" instead of a full 40-character commit SHA."),
                "Pin third-party GitHub Actions and reusable workflows to a full commit SHA.",
                path,
            )
        })
        .collect();
    Check::fail(NAME, 5, format!("Unpinned GitHub Actions found: {}", shown.join(", ")), findings)
}

fn no_write_all(workflows: &[(&str, String)]) -> Check {
    const NAME: &str = "No write-all GitHub Actions permissions";
    if workflows.is_empty() {
        return Check::weightless(NAME, NO_WORKFLOWS);
    }
    let broad: Vec<&str> =
        workflows.iter().filter(|(_, text)| found(&patterns().write_all, text)).map(|(p, _)| *p).collect();
    if broad.is_empty() {
        return Check::pass(NAME, 4, "No GitHub Actions workflow requests write-all permissions.");
    }
    let findings = broad
        .iter()
        .map(|path| {
            finding(
                "GITHUB_ACTIONS_WRITE_ALL",
                Severity::Medium,
                "GitHub Actions workflow requests write-all permissions",
                format!("{path} requests write-all permissions for the workflow token."),
                "Replace write-all with the narrowest required permissions block.",
                path,
            )
        })
        .collect();
    Check::fail(NAME, 4, format!("Broad workflow permissions found in: {}", broad.join(", ")), findings)
}

/// A privileged trigger (`pull_request_target`, `workflow_run`), a
/// checkout, and a pull request's or run's head ref, in one workflow.
fn no_untrusted_checkout(workflows: &[(&str, String)]) -> Check {
    const NAME: &str = "No privileged untrusted checkout patterns";
    if workflows.is_empty() {
        return Check::weightless(NAME, NO_WORKFLOWS);
    }
    let p = patterns();
    let risky: Vec<&str> = workflows
        .iter()
        .filter(|(_, text)| {
            found(&p.privileged_trigger, text)
                && (text.contains("actions/checkout") || text.contains("git checkout"))
                && found(&p.untrusted_ref, text)
        })
        .map(|(path, _)| *path)
        .collect();
    if risky.is_empty() {
        return Check::pass(NAME, 5, "No privileged workflow checks out untrusted branch content.");
    }
    let findings = risky
        .iter()
        .map(|path| {
            finding(
                "GITHUB_ACTIONS_UNTRUSTED_CHECKOUT",
                Severity::High,
                "Privileged workflow checks out untrusted code",
                format!("{path} combines a privileged trigger with a pull-request or workflow-run head ref checkout."),
                "Avoid checking out untrusted refs from privileged workflow contexts.",
                path,
            )
        })
        .collect();
    Check::fail(NAME, 5, format!("Privileged workflow checks out untrusted code in: {}", risky.join(", ")), findings)
}

fn dependabot(plugin: &Plugin, workflows: &[(&str, String)], manifests: &Manifests) -> Check {
    const NAME: &str = "Dependabot configured for automation surfaces";
    if workflows.is_empty() && !manifests.any() {
        return Check::weightless(NAME, "No workflows or dependency manifests found.");
    }
    let Some(config) =
        [".github/dependabot.yml", ".github/dependabot.yaml"].into_iter().find(|p| plugin.tree.exists(p))
    else {
        let missing = finding(
            "DEPENDABOT_MISSING",
            Severity::Low,
            "Dependabot configuration is missing",
            "Automation or dependency surfaces exist, but .github/dependabot.yml is missing.".into(),
            "Add Dependabot updates for GitHub Actions and dependency manifests.",
            ".github/dependabot.yml",
        );
        return Check::fail(
            NAME,
            3,
            "Dependabot is not configured for workflows or dependency manifests.",
            vec![missing],
        );
    };
    let text = plugin.tree.file(config).map(ignoring_errors).unwrap_or_default();
    if !workflows.is_empty() && !found(&patterns().dependabot_actions, &text) {
        let missing = finding(
            "DEPENDABOT_GITHUB_ACTIONS_MISSING",
            Severity::Low,
            "Dependabot is not configured for GitHub Actions",
            "Workflow files exist, but Dependabot does not declare the github-actions ecosystem.".into(),
            "Add a github-actions update entry to .github/dependabot.yml.",
            config,
        );
        return Check::fail(
            NAME,
            3,
            "Dependabot config is present but does not include GitHub Actions updates.",
            vec![missing],
        );
    }
    Check::pass(NAME, 3, "Dependabot is configured for the detected automation surfaces.")
}

/// Whether `requirements.txt` pins every requirement exactly (`name==1.2`,
/// extras allowed); comments, `-e` and options skipped; a URL or VCS
/// requirement is not a pin.
fn requirements_pinned(plugin: &Plugin) -> bool {
    let Some(bytes) = plugin.tree.file("requirements.txt") else { return false };
    let text = ignoring_errors(bytes);
    let mut pins = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("-e ") || line.starts_with("--") {
            continue;
        }
        if line.starts_with("git+") || line.starts_with("http://") || line.starts_with("https://") {
            return false;
        }
        pins.push(line);
    }
    !pins.is_empty() && pins.iter().all(|line| found(&patterns().requirement_pin, line))
}

fn lockfiles(plugin: &Plugin, manifests: &Manifests) -> Check {
    const NAME: &str = "Dependency manifests have lockfiles";
    if !manifests.any() {
        return Check::weightless(NAME, "No dependency manifests found.");
    }
    let any_of = |names: &[&str]| names.iter().any(|name| plugin.tree.exists(name));
    let (node_lock, python_lock) = (any_of(&NODE_LOCKFILES), any_of(&PYTHON_LOCKFILES));
    let node_locked = !manifests.package_json || node_lock;
    let python_locked = !(manifests.pyproject || manifests.requirements)
        || python_lock
        || (manifests.requirements && requirements_pinned(plugin));
    if node_locked && python_locked {
        return Check::pass(NAME, 3, "Detected dependency manifests are paired with lockfiles or pinned requirements.");
    }
    let missing = lockfile_misses(plugin, manifests, node_lock, python_lock);
    let findings = missing
        .iter()
        .map(|name| {
            finding(
                "DEPENDENCY_LOCKFILE_MISSING",
                Severity::Medium,
                "Dependency manifest is missing a lockfile",
                format!("{name} is present without a corresponding lockfile or pinned dependency snapshot."),
                "Commit a lockfile or use fully pinned requirements for reproducible dependency resolution.",
                name,
            )
        })
        .collect();
    Check::fail(
        NAME,
        3,
        format!("Dependency lockfiles or pinned requirements missing for: {}", missing.join(", ")),
        findings,
    )
}

/// The manifests named as missing their lockfile once the check failed,
/// each by its own rule (so `pyproject.toml` is named even when pinned
/// requirements would have passed it, as in the reference): `package.json`
/// without a Node lockfile, `pyproject.toml` without a Python lockfile,
/// `requirements.txt` not exactly pinned.
fn lockfile_misses(plugin: &Plugin, manifests: &Manifests, node_lock: bool, python_lock: bool) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if manifests.package_json && !node_lock {
        missing.push("package.json");
    }
    if manifests.pyproject && !python_lock {
        missing.push("pyproject.toml");
    }
    if manifests.requirements && !requirements_pinned(plugin) {
        missing.push("requirements.txt");
    }
    missing
}
