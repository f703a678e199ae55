//! The scanner: the reference scanner's checks for a Codex plugin at the
//! root of a tree (`.codex-plugin/plugin.json`), a module per category,
//! in the reference's order, with its check names, points, rule ids and
//! severities. Each check reads the [`Plugin`] (the tree and its manifest
//! parsed once) and nothing else: no network, no clock.
//!
//! Where the reference's behaviour is odd (an empty `interface` object
//! counted as not an object, a non-string `skills` worth 4 points in one
//! check and 3 in the next) it is kept: a score that disagrees with the
//! reference is a bug here, whatever the reason.

mod best_practices;
mod code_quality;
mod manifest;
mod marketplace;
mod operational;
mod security;
mod skill_security;
mod text;

use serde_json::{Map, Value};

use crate::report::Category;
use crate::tree::Tree;

/// Where a Codex plugin's manifest is.
pub const MANIFEST: &str = ".codex-plugin/plugin.json";

/// A plugin as the checks read it.
pub struct Plugin<'a> {
    pub tree: &'a Tree,
    /// Whether the manifest is JSON at all (an array is, and is no manifest).
    pub manifest_is_json: bool,
    /// The manifest when it is a JSON object.
    pub manifest: Option<Map<String, Value>>,
}

impl<'a> Plugin<'a> {
    pub fn new(tree: &'a Tree) -> Plugin<'a> {
        let json = tree
            .file(MANIFEST)
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .and_then(|text| serde_json::from_str::<Value>(text).ok());
        let manifest_is_json = json.is_some();
        let manifest = match json {
            Some(Value::Object(map)) => Some(map),
            _ => None,
        };
        Plugin { tree, manifest_is_json, manifest }
    }

    /// The manifest's `skills`, whatever its type.
    fn skills(&self) -> Option<&Value> {
        self.manifest.as_ref()?.get("skills")
    }
}

/// The reference's seven categories, in its order: Manifest Validation,
/// Security, Operational Security, Best Practices, Marketplace, Skill
/// Security and Code Quality.
pub fn categories(tree: &Tree) -> Vec<Category> {
    categories_of(&Plugin::new(tree))
}

fn categories_of(plugin: &Plugin) -> Vec<Category> {
    vec![
        Category::new("Manifest Validation", manifest::checks(plugin)),
        Category::new("Security", security::checks(plugin)),
        Category::new("Operational Security", operational::checks(plugin)),
        Category::new("Best Practices", best_practices::checks(plugin)),
        Category::new("Marketplace", marketplace::checks(plugin)),
        Category::new("Skill Security", skill_security::checks(plugin)),
        Category::new("Code Quality", code_quality::checks(plugin)),
    ]
}

/// Python's truthiness of a JSON value: `null`, `false`, `0`, `""`, `[]`
/// and `{}` are false.
fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// Python's `str()` of a JSON value as `json.loads` made it (`None`,
/// `True`, a list's repr): what the reference's messages print.
fn python_str(value: Option<&Value>) -> String {
    match value {
        None => String::new(),
        Some(Value::Null) => "None".into(),
        Some(Value::Bool(true)) => "True".into(),
        Some(Value::Bool(false)) => "False".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The whole report of the plugin at the root of `tree`, named `root`.
pub fn report(tree: &Tree, root: &str) -> crate::report::ScanReport {
    let plugin = Plugin::new(tree);
    let text =
        |key: &str| plugin.manifest.as_ref().and_then(|m| m.get(key)).and_then(Value::as_str).map(str::to_string);
    let package = crate::report::Package {
        ecosystem: "codex",
        package_kind: "single-plugin",
        root_path: root.to_string(),
        manifest_path: format!("{}/{MANIFEST}", root.trim_end_matches('/')),
        name: text("name"),
        version: text("version"),
    };
    crate::report::ScanReport::new(categories_of(&plugin), package)
}
