//! Manifest Validation (31 points when everything applies): the manifest
//! exists and parses, names itself in kebab-case with a semver version,
//! carries the recommended metadata, a declared `interface` is complete
//! and its links and assets valid, and declared paths stay inside.

use serde_json::{Map, Value};

use super::{python_str, truthy, Plugin, MANIFEST};
use crate::report::{Check, Finding, Severity};
use crate::tree;

const CATEGORY: &str = "manifest-validation";
const RECOMMENDED: [&str; 5] = ["author", "homepage", "repository", "license", "keywords"];
const INTERFACE_METADATA: [&str; 5] =
    ["displayName", "shortDescription", "longDescription", "developerName", "category"];
const INTERFACE_URLS: [&str; 3] = ["websiteURL", "privacyPolicyURL", "termsOfServiceURL"];
const INTERFACE_ASSETS: [&str; 2] = ["composerIcon", "logo"];
const UNPARSED: &str = "Cannot parse plugin.json";

pub(super) fn checks(plugin: &Plugin) -> Vec<Check> {
    vec![
        exists(plugin),
        valid_json(plugin),
        required_fields(plugin),
        semver(plugin),
        kebab_case(plugin),
        recommended(plugin),
        interface_metadata(plugin),
        interface_assets(plugin),
        declared_paths(plugin),
    ]
}

fn finding(
    rule: impl Into<String>,
    title: impl Into<String>,
    description: impl Into<String>,
    fix: impl Into<String>,
) -> Finding {
    Finding::new(rule, Severity::Medium, CATEGORY, title, description).remediation(fix).file(MANIFEST)
}

fn exists(plugin: &Plugin) -> Check {
    const NAME: &str = "plugin.json exists";
    if plugin.tree.exists(MANIFEST) {
        return Check::pass(NAME, 4, "plugin.json found");
    }
    let missing = finding(
        "PLUGIN_JSON_MISSING",
        "plugin.json is missing",
        "Codex plugins must declare .codex-plugin/plugin.json.",
        "Add .codex-plugin/plugin.json with the documented plugin fields.",
    );
    Check::fail(NAME, 4, "plugin.json not found at .codex-plugin/plugin.json", vec![missing])
}

/// Any JSON value passes (an array too); a missing file fails here as
/// well, as in the reference.
fn valid_json(plugin: &Plugin) -> Check {
    const NAME: &str = "Valid JSON";
    if plugin.manifest_is_json {
        return Check::pass(NAME, 4, "plugin.json is valid JSON");
    }
    let invalid = finding(
        "PLUGIN_JSON_INVALID",
        "plugin.json is invalid JSON",
        "The plugin manifest could not be parsed.",
        "Fix the JSON syntax in .codex-plugin/plugin.json.",
    );
    Check::fail(NAME, 4, "plugin.json is not valid JSON", vec![invalid])
}

fn required_fields(plugin: &Plugin) -> Check {
    const NAME: &str = "Required fields present";
    let Some(manifest) = &plugin.manifest else {
        let unchecked = finding(
            "PLUGIN_JSON_REQUIRED_FIELDS_UNCHECKED",
            "Required fields could not be validated",
            "Required manifest fields cannot be validated until plugin.json parses cleanly.",
            "Fix the manifest format and include name, version, and description.",
        );
        return Check::fail(NAME, 5, UNPARSED, vec![unchecked]);
    };
    let missing: Vec<&str> = ["name", "version", "description"]
        .into_iter()
        .filter(|field| !(truthy(manifest.get(*field)) && manifest.get(*field).is_some_and(Value::is_string)))
        .collect();
    if missing.is_empty() {
        return Check::pass(NAME, 5, "All required fields (name, version, description) are present.");
    }
    let findings = missing
        .iter()
        .map(|field| {
            finding(
                format!("PLUGIN_JSON_MISSING_{}", field.to_uppercase()),
                format!("Manifest field \"{field}\" is missing"),
                format!("The manifest does not define a valid string for \"{field}\"."),
                format!("Add a non-empty string value for \"{field}\" in plugin.json."),
            )
        })
        .collect();
    Check::fail(NAME, 5, format!("Missing required fields: {}", missing.join(", ")), findings)
}

/// `X.Y.Z`, digits only (Python's `\d` also takes other scripts' digits;
/// ASCII here). As the reference's `$`, a final newline is allowed.
fn is_semver(version: &str) -> bool {
    let version = version.strip_suffix('\n').unwrap_or(version);
    let parts: Vec<&str> = version.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

fn semver(plugin: &Plugin) -> Check {
    const NAME: &str = "Version follows semver";
    let Some(manifest) = &plugin.manifest else { return Check::fail(NAME, 3, UNPARSED, vec![]) };
    let version = python_str(manifest.get("version"));
    if is_semver(&version) {
        return Check::pass(NAME, 3, format!("Version \"{version}\" follows semver."));
    }
    let bad = finding(
        "PLUGIN_JSON_BAD_SEMVER",
        "Manifest version is not semver",
        format!("The version \"{version}\" does not match the documented semver format."),
        "Use a version like 1.2.3 in plugin.json.",
    );
    let bad = Finding { severity: Severity::Low, ..bad };
    Check::fail(NAME, 3, format!("Version \"{version}\" does not follow semver (expected X.Y.Z)."), vec![bad])
}

/// Lower-case letters and digits in words joined by single hyphens (a
/// final newline allowed, as the reference's `$` allows it).
fn is_kebab(name: &str) -> bool {
    let name = name.strip_suffix('\n').unwrap_or(name);
    !name.is_empty()
        && name.split('-').all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
}

fn kebab_case(plugin: &Plugin) -> Check {
    const NAME: &str = "Name is kebab-case";
    let Some(manifest) = &plugin.manifest else { return Check::fail(NAME, 2, UNPARSED, vec![]) };
    let name = python_str(manifest.get("name"));
    if is_kebab(&name) {
        return Check::pass(NAME, 2, format!("Name \"{name}\" is kebab-case."));
    }
    let bad = finding(
        "PLUGIN_JSON_BAD_NAME",
        "Manifest name is not kebab-case",
        format!("The plugin name \"{name}\" does not follow the recommended kebab-case style."),
        "Rename the plugin to use lowercase words separated by hyphens.",
    );
    let bad = Finding { severity: Severity::Low, ..bad };
    Check::fail(NAME, 2, format!("Name \"{name}\" should be kebab-case."), vec![bad])
}

fn non_empty_string(value: Option<&Value>) -> bool {
    value.and_then(Value::as_str).is_some_and(|s| !s.is_empty())
}

fn recommended(plugin: &Plugin) -> Check {
    const NAME: &str = "Recommended metadata present";
    let Some(manifest) = &plugin.manifest else { return Check::fail(NAME, 4, UNPARSED, vec![]) };
    let missing: Vec<&str> = RECOMMENDED
        .into_iter()
        .filter(|field| {
            let value = manifest.get(*field);
            let present = match *field {
                "author" => non_empty_string(value.and_then(|a| a.get("name"))) && value.is_some_and(Value::is_object),
                "keywords" => value
                    .and_then(Value::as_array)
                    .is_some_and(|words| !words.is_empty() && words.iter().all(|w| non_empty_string(Some(w)))),
                _ => non_empty_string(value),
            };
            !present
        })
        .collect();
    if missing.is_empty() {
        return Check::pass(NAME, 4, "Recommended plugin metadata is present.");
    }
    let findings = missing
        .iter()
        .map(|field| Finding {
            severity: Severity::Info,
            ..finding(
                format!("PLUGIN_JSON_RECOMMENDED_{}", field.to_uppercase()),
                format!("Recommended field \"{field}\" is missing"),
                format!("The manifest is missing the documented recommended field \"{field}\"."),
                format!("Add \"{field}\" to strengthen the plugin manifest metadata."),
            )
        })
        .collect();
    Check::fail(NAME, 4, format!("Missing recommended metadata: {}", missing.join(", ")), findings)
}

/// The manifest's `interface`: `None` when absent (or null, or the
/// manifest does not parse); `Some(None)` when it is not an object, or
/// an empty one (the reference cannot tell the two apart).
fn interface<'p>(plugin: &'p Plugin) -> Option<Option<&'p Map<String, Value>>> {
    match plugin.manifest.as_ref()?.get("interface")? {
        Value::Null => None,
        Value::Object(map) if !map.is_empty() => Some(Some(map)),
        _ => Some(None),
    }
}

fn interface_invalid(name: &'static str, fix: &str) -> Check {
    let invalid = finding(
        "PLUGIN_JSON_INTERFACE_INVALID",
        "Manifest interface is not a JSON object",
        "The \"interface\" field must be an object when it is declared.",
        fix,
    );
    Check::fail(name, 3, "Manifest interface must be a JSON object.", vec![invalid])
}

fn non_blank(value: Option<&Value>) -> bool {
    value.and_then(Value::as_str).is_some_and(|s| !s.trim().is_empty())
}

fn interface_metadata(plugin: &Plugin) -> Check {
    const NAME: &str = "Interface metadata complete if declared";
    let interface = match interface(plugin) {
        None => return Check::weightless(NAME, "No interface metadata declared, check not applicable."),
        Some(None) => {
            return interface_invalid(
                NAME,
                "Replace \"interface\" with a JSON object that contains the documented publishable metadata.",
            )
        }
        Some(Some(map)) => map,
    };
    let mut missing: Vec<&str> = INTERFACE_METADATA.into_iter().filter(|f| !non_blank(interface.get(*f))).collect();
    let list_of_non_blank = |v: Option<&Value>| {
        v.and_then(Value::as_array).is_some_and(|a| !a.is_empty() && a.iter().all(|i| non_blank(Some(i))))
    };
    if !list_of_non_blank(interface.get("capabilities")) {
        missing.push("capabilities");
    }
    if let Some(prompt) = interface.get("defaultPrompt").filter(|p| !p.is_null()) {
        if !non_blank(Some(prompt)) && !list_of_non_blank(Some(prompt)) {
            missing.push("defaultPrompt");
        }
    }
    if let Some(colour) = interface.get("brandColor").filter(|c| !c.is_null()) {
        let hex = colour
            .as_str()
            .is_some_and(|c| c.len() == 7 && c.starts_with('#') && c[1..].bytes().all(|b| b.is_ascii_hexdigit()));
        if !hex {
            missing.push("brandColor");
        }
    }
    if missing.is_empty() {
        return Check::pass(NAME, 3, "Interface metadata contains the expected publishable fields.");
    }
    let findings = missing
        .iter()
        .map(|field| Finding {
            severity: Severity::Info,
            ..finding(
                format!("PLUGIN_JSON_INTERFACE_{}", field.to_uppercase()),
                format!("Interface field \"{field}\" is missing or invalid"),
                format!("The interface object is missing a valid \"{field}\" value."),
                format!("Add a valid \"{field}\" field to the interface metadata."),
            )
        })
        .collect();
    Check::fail(NAME, 3, format!("Interface metadata is missing or invalid: {}", missing.join(", ")), findings)
}

/// A manifest path the reference accepts: `./`-relative, not absolute,
/// inside the plugin, and (when asked) there.
fn safe_path(plugin: &Plugin, value: &str, must_exist: bool) -> bool {
    if !value.starts_with("./") {
        return false;
    }
    match tree::join("", value) {
        None => false,
        Some(path) => !must_exist || path.is_empty() || plugin.tree.exists(&path),
    }
}

fn interface_assets(plugin: &Plugin) -> Check {
    const NAME: &str = "Interface links and assets valid if declared";
    let interface = match interface(plugin) {
        None => return Check::weightless(NAME, "No interface metadata declared, check not applicable."),
        Some(None) => {
            return interface_invalid(
                NAME,
                "Replace \"interface\" with a JSON object that contains valid URLs and asset paths.",
            )
        }
        Some(Some(map)) => map,
    };
    let mut issues: Vec<&str> = INTERFACE_URLS
        .into_iter()
        .filter(|f| !interface.get(*f).and_then(Value::as_str).is_some_and(|u| u.starts_with("https://")))
        .collect();
    for field in INTERFACE_ASSETS {
        if !interface.get(field).and_then(Value::as_str).is_some_and(|p| safe_path(plugin, p, true)) {
            issues.push(field);
        }
    }
    let screenshots: Vec<&str> = match interface.get("screenshots") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if screenshots.is_empty() || !screenshots.iter().all(|s| safe_path(plugin, s, true)) {
        issues.push("screenshots");
    }
    if issues.is_empty() {
        return Check::pass(
            NAME,
            3,
            "Interface URLs use HTTPS and referenced assets exist within the plugin directory.",
        );
    }
    let findings = issues
        .iter()
        .map(|field| Finding {
            severity: Severity::Info,
            ..finding(
                format!("PLUGIN_JSON_INTERFACE_ASSET_{}", field.to_uppercase()),
                format!("Interface asset or URL \"{field}\" is invalid"),
                format!("The interface field \"{field}\" must use HTTPS or point to a safe in-repo asset."),
                format!("Update \"{field}\" to use HTTPS or an existing relative asset path."),
            )
        })
        .collect();
    Check::fail(NAME, 3, format!("Interface links or assets are invalid: {}", issues.join(", ")), findings)
}

fn declared_paths(plugin: &Plugin) -> Check {
    const NAME: &str = "Declared paths are safe";
    let Some(manifest) = &plugin.manifest else { return Check::fail(NAME, 3, UNPARSED, vec![]) };
    let mut unsafe_paths = Vec::new();
    if let Some(skills) = manifest.get("skills").and_then(Value::as_str) {
        if !safe_path(plugin, skills, false) {
            unsafe_paths.push(format!("skills={skills}"));
        }
    }
    let apps: Vec<&str> = match manifest.get("apps") {
        Some(Value::String(app)) => vec![app.as_str()],
        Some(Value::Array(apps)) => apps.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    unsafe_paths.extend(apps.into_iter().filter(|app| !safe_path(plugin, app, false)).map(|app| format!("apps={app}")));
    if unsafe_paths.is_empty() {
        return Check::pass(NAME, 3, "Declared manifest paths stay within the plugin directory.");
    }
    let findings = unsafe_paths
        .iter()
        .map(|entry| {
            finding(
                "PLUGIN_JSON_UNSAFE_PATH",
                "Manifest declares an unsafe path",
                format!("The manifest path \"{entry}\" resolves outside the plugin directory or is absolute."),
                "Use only relative paths that stay within the plugin repository.",
            )
        })
        .collect();
    Check::fail(NAME, 3, format!("Unsafe manifest paths detected: {}", unsafe_paths.join(", ")), findings)
}
