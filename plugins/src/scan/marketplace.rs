//! Marketplace (15 points, only with a marketplace file: the Codex
//! `.agents/plugins/marketplace.json`, else a root `marketplace.json`): the
//! file is an object with a `name` and a `plugins` array whose entries
//! have a local source and a policy; each entry names its installation and
//! authentication policy and a category; each source stays inside the
//! repository or is remote (`https://`, `git+`, `github://`).
//!
//! As in the reference, the first check stops at the first bad entry, and
//! a file that is not JSON fails the first check but passes the second.

use serde_json::{Map, Value};

use super::text::url_scheme;
use super::{truthy, Plugin};
use crate::report::{Check, Finding, Severity};
use crate::tree;

const CATEGORY: &str = "marketplace";
const PREFERRED: &str = ".agents/plugins/marketplace.json";
const LEGACY: &str = "marketplace.json";
const NOT_APPLICABLE: &str = "No marketplace.json found, check not applicable";
const REMOTE_PREFIXES: [&str; 3] = ["https://", "git+", "github://"];

/// The marketplace file as the checks read it.
enum Marketplace {
    Absent,
    /// Not JSON.
    NotJson,
    /// JSON, but not an object (or not UTF-8): the reference's reason.
    Invalid(&'static str),
    Object {
        label: &'static str,
        payload: Map<String, Value>,
    },
}

fn marketplace(plugin: &Plugin) -> Marketplace {
    let Some(label) = [PREFERRED, LEGACY].into_iter().find(|p| plugin.tree.exists(p)) else {
        return Marketplace::Absent;
    };
    let Some(bytes) = plugin.tree.file(label) else { return Marketplace::NotJson };
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Marketplace::Invalid("marketplace.json is not UTF-8 text");
    };
    match serde_json::from_str::<Value>(text) {
        Err(_) => Marketplace::NotJson,
        Ok(Value::Object(payload)) => Marketplace::Object { label, payload },
        Ok(_) => Marketplace::Invalid("marketplace payload must be an object"),
    }
}

pub(super) fn checks(plugin: &Plugin) -> Vec<Check> {
    let marketplace = marketplace(plugin);
    vec![valid(&marketplace), policy_fields(&marketplace), sources_safe(plugin, &marketplace)]
}

fn invalid(
    message: impl Into<String>,
    rule: &str,
    severity: Severity,
    title: &str,
    description: String,
    fix: &str,
    file: &str,
) -> Check {
    let finding = Finding::new(rule, severity, CATEGORY, title, description).remediation(fix).file(file);
    Check::fail("marketplace.json valid", 5, message, vec![finding])
}

fn valid(marketplace: &Marketplace) -> Check {
    const NAME: &str = "marketplace.json valid";
    let (label, payload) = match marketplace {
        Marketplace::Absent => return Check::weightless(NAME, NOT_APPLICABLE),
        Marketplace::NotJson => {
            return invalid(
                "marketplace.json is not valid JSON",
                "MARKETPLACE_JSON_INVALID",
                Severity::Medium,
                "marketplace.json is invalid JSON",
                "The marketplace manifest could not be parsed.".into(),
                "Fix the JSON syntax in marketplace.json.",
                LEGACY,
            )
        }
        Marketplace::Invalid(why) => {
            return invalid(
                *why,
                "MARKETPLACE_JSON_INVALID",
                Severity::Medium,
                "Marketplace manifest is invalid",
                why.to_string(),
                "Ensure marketplace.json is a valid JSON object within the repository root.",
                LEGACY,
            )
        }
        Marketplace::Object { label, payload } => (*label, payload),
    };
    if !(truthy(payload.get("name")) && payload.get("name").is_some_and(Value::is_string)) {
        return invalid(
            "marketplace.json missing \"name\" field",
            "MARKETPLACE_NAME_MISSING",
            Severity::Low,
            "marketplace.json is missing \"name\"",
            "The marketplace manifest must define a \"name\" field.".into(),
            "Add a string \"name\" field to marketplace.json.",
            label,
        );
    }
    let Some(entries) = payload.get("plugins").and_then(Value::as_array) else {
        return invalid(
            "marketplace.json missing \"plugins\" array",
            "MARKETPLACE_PLUGINS_MISSING",
            Severity::Medium,
            "marketplace.json is missing the \"plugins\" array",
            "The marketplace manifest must declare its plugin list in a \"plugins\" array.".into(),
            "Add a \"plugins\" array to marketplace.json.",
            label,
        );
    };
    for (i, entry) in entries.iter().enumerate() {
        let Some(entry) = entry.as_object() else {
            return invalid(
                format!("marketplace.json plugin[{i}] must be an object"),
                "MARKETPLACE_ENTRY_INVALID",
                Severity::Medium,
                "Marketplace plugin entry is invalid",
                format!("plugin[{i}] in marketplace.json must be an object."),
                "Ensure all entries in the plugins array are objects.",
                label,
            );
        };
        let Some(source) = entry.get("source").and_then(Value::as_object) else {
            return invalid(
                format!("marketplace.json plugin[{i}] missing \"source\" object"),
                "MARKETPLACE_SOURCE_MISSING",
                Severity::Medium,
                "Marketplace plugin source is missing",
                format!("plugin[{i}] in marketplace.json is missing a \"source\" object."),
                "Add a \"source\" object with \"source\" and \"path\" fields for each marketplace entry.",
                label,
            );
        };
        if source.get("source").and_then(Value::as_str) != Some("local")
            || !source.get("path").is_some_and(Value::is_string)
        {
            return invalid(
                format!("marketplace.json plugin[{i}] must declare source.source=\"local\" and source.path"),
                "MARKETPLACE_SOURCE_INVALID",
                Severity::Medium,
                "Marketplace source shape is invalid",
                format!(
                    "plugin[{i}] in marketplace.json must declare \"source\": {{\"source\": \"local\", \"path\": \"./plugins/...\"}}"
                ),
                "Use the official repo marketplace shape with a local source object.",
                label,
            );
        }
        if !(truthy(entry.get("policy")) && entry.get("policy").is_some_and(Value::is_object)) {
            return invalid(
                format!("marketplace.json plugin[{i}] missing \"policy\" field"),
                "MARKETPLACE_POLICY_MISSING",
                Severity::Medium,
                "Marketplace policy is missing",
                format!("plugin[{i}] in marketplace.json is missing a \"policy\" object."),
                "Add a \"policy\" object for each marketplace entry.",
                label,
            );
        }
    }
    Check::pass(NAME, 5, "marketplace.json is valid")
}

fn policy_fields(marketplace: &Marketplace) -> Check {
    const NAME: &str = "Policy fields present";
    let (label, payload) = match marketplace {
        Marketplace::Absent | Marketplace::Invalid(_) => return Check::weightless(NAME, NOT_APPLICABLE),
        Marketplace::NotJson => return Check::pass(NAME, 5, "Cannot parse marketplace.json, skipping check"),
        Marketplace::Object { label, payload } => (*label, payload),
    };
    let entries = payload.get("plugins").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if entries.is_empty() {
        return Check::pass(NAME, 5, "No plugins in marketplace.json, nothing to check");
    }
    let mut issues = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let Some(entry) = entry.as_object() else {
            issues.push(format!("plugin[{i}]: not an object"));
            continue;
        };
        let policy = entry.get("policy").filter(|p| truthy(Some(p)));
        for field in ["installation", "authentication"] {
            if !truthy(policy.and_then(|p| p.get(field))) {
                issues.push(format!("plugin[{i}]: missing policy.{field}"));
            }
        }
        if !truthy(entry.get("category")) {
            issues.push(format!("plugin[{i}]: missing category"));
        }
    }
    if issues.is_empty() {
        return Check::pass(NAME, 5, "All plugins have required policy fields");
    }
    let shown: Vec<&str> = issues.iter().take(3).map(String::as_str).collect();
    let findings = issues
        .iter()
        .map(|issue| {
            Finding::new(
                "MARKETPLACE_POLICY_FIELDS_MISSING",
                Severity::Medium,
                CATEGORY,
                "Marketplace policy fields are incomplete",
                issue.clone(),
            )
            .remediation("Add policy.installation, policy.authentication, and category for each marketplace entry.")
            .file(label)
        })
        .collect();
    Check::fail(NAME, 5, format!("Policy issues: {}", shown.join(", ")), findings)
}

fn remote(reference: &str) -> bool {
    REMOTE_PREFIXES.iter().any(|prefix| reference.starts_with(prefix))
}

/// Inside the repository, relative (and `./`-prefixed when asked).
fn inside(reference: &str, dot_prefixed: bool) -> bool {
    (!dot_prefixed || reference.starts_with("./")) && tree::join("", reference).is_some()
}

/// What is wrong with an entry's source, as the reference says it.
fn source_issue(entry: &Map<String, Value>) -> Option<String> {
    let non_empty = |v: Option<&Value>| v.and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    let (reference, path) = match entry.get("source") {
        Some(Value::String(source)) => (Some(source.clone()), None),
        Some(Value::Object(source)) => (non_empty(source.get("source")), non_empty(source.get("path"))),
        _ => (None, None),
    };
    let Some(reference) = reference else { return Some("missing \"source.source\"".into()) };
    let safe =
        reference == "local" || remote(&reference) || (url_scheme(&reference).is_none() && inside(&reference, false));
    if !safe {
        return Some(format!("\"source.source\" is unsafe: {reference}"));
    }
    let path = match path {
        None if remote(&reference) => return None,
        None => return Some("missing \"source.path\"".into()),
        Some(path) => path,
    };
    if !path.starts_with("./") {
        return Some(format!("\"source.path\" must start with \"./\": {path}"));
    }
    if !inside(&path, true) {
        return Some(format!("\"source.path\" escapes the repository root: {path}"));
    }
    None
}

fn sources_safe(plugin: &Plugin, marketplace: &Marketplace) -> Check {
    const NAME: &str = "Marketplace sources are safe";
    let Marketplace::Object { label, payload } = marketplace else {
        return Check::weightless(NAME, NOT_APPLICABLE);
    };
    debug_assert!(plugin.tree.exists(label));
    let entries = payload.get("plugins").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let unsafe_sources: Vec<String> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, entry)| match entry.as_object() {
            None => Some(format!("plugin[{i}]=invalid-entry")),
            Some(entry) => source_issue(entry).map(|issue| format!("plugin[{i}]={issue}")),
        })
        .collect();
    if unsafe_sources.is_empty() {
        return Check::pass(NAME, 5, "Marketplace sources are relative-safe local paths.");
    }
    let findings = unsafe_sources
        .iter()
        .map(|entry| {
            Finding::new(
                "MARKETPLACE_UNSAFE_SOURCE",
                Severity::Medium,
                CATEGORY,
                "Marketplace source escapes the plugin directory",
                format!("The marketplace source \"{entry}\" is absolute or resolves outside the plugin directory."),
            )
            .remediation("Use relative in-repo paths that stay within the plugin directory.")
            .file(*label)
        })
        .collect();
    Check::fail(NAME, 5, format!("Unsafe marketplace sources detected: {}", unsafe_sources.join(", ")), findings)
}
