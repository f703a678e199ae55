//! The plugins in a repository's files, found as the ecosystems find them:
//! a folder holding `.codex-plugin/plugin.json` (Codex), or
//! `.claude-plugin/plugin.json` (Claude Code), or a root `plugin.json`
//! that declares the Agent Plugins schema; and the folders a marketplace
//! file at the repository's root lists as local sources (a Claude Code
//! plugin needs no manifest; its entry names it). A marketplace's remote
//! sources are handed back for the importer to fetch.
//!
//! Folders under `node_modules/` are not searched: a dependency's manifest
//! is not the repository's plugin. Cost: one pass over the paths.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::source::{self, Entry, Source};
use crate::tree::{self, Tree};

/// The ecosystem a plugin's manifest belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ecosystem {
    Codex,
    Claude,
    AgentPlugins,
}

impl Ecosystem {
    /// The ecosystem's name on the wire (the Guard API's `ecosystem`).
    pub fn as_str(self) -> &'static str {
        match self {
            Ecosystem::Codex => "codex",
            Ecosystem::Claude => "claude-code",
            Ecosystem::AgentPlugins => "agent-plugins",
        }
    }

    pub fn parse(text: &str) -> Option<Ecosystem> {
        [Ecosystem::Codex, Ecosystem::Claude, Ecosystem::AgentPlugins].into_iter().find(|e| e.as_str() == text)
    }

    /// Where its manifest is, relative to the plugin's folder.
    pub fn manifest(self) -> &'static str {
        match self {
            Ecosystem::Codex => crate::scan::MANIFEST,
            Ecosystem::Claude => CLAUDE_MANIFEST,
            Ecosystem::AgentPlugins => AGENT_PLUGINS_MANIFEST,
        }
    }
}

pub const CLAUDE_MANIFEST: &str = ".claude-plugin/plugin.json";
pub const AGENT_PLUGINS_MANIFEST: &str = "plugin.json";
/// What a root `plugin.json`'s `$schema` starts with to be an Agent Plugins manifest.
pub const AGENT_PLUGINS_SCHEMA: &str = "https://agent-plugins.org/schemas/";
/// Marketplace files, in the order they are read.
pub const MARKETPLACES: [&str; 2] = [".agents/plugins/marketplace.json", ".claude-plugin/marketplace.json"];

/// A plugin found in a tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Located {
    /// Its folder (`""`: the tree's root).
    pub root: String,
    pub ecosystem: Ecosystem,
    /// Its manifest when that is a JSON object (`None`: absent, or not an
    /// object; the scan says which).
    pub manifest: Option<Map<String, Value>>,
    /// The name its marketplace entry gives it.
    pub listed_name: Option<String>,
    /// Its marketplace entry's category, which overrides the manifest's.
    pub listed_category: Option<String>,
}

impl Located {
    /// The plugin's name: its manifest's, its marketplace entry's, its
    /// folder's, or `fallback` (the repository's) at the root.
    pub fn name(&self, fallback: &str) -> String {
        let manifest = self.manifest.as_ref().and_then(|m| m.get("name")).and_then(Value::as_str);
        let folder = (!self.root.is_empty()).then(|| tree::file_name(&self.root));
        [manifest, self.listed_name.as_deref(), folder]
            .into_iter()
            .flatten()
            .map(str::trim)
            .find(|name| !name.is_empty())
            .unwrap_or(fallback)
            .to_string()
    }
}

/// What a tree holds: its plugins, in path order, and the remote sources
/// its marketplace files list (with the entry's category).
#[derive(Debug, Default)]
pub struct Found {
    pub plugins: Vec<Located>,
    pub remote: Vec<Entry>,
    /// Marketplace entries that could not be read, with why.
    pub refused: Vec<(String, source::SourceError)>,
}

/// The plugins of `tree` at or under `within` (`""`: anywhere).
pub fn plugins(tree: &Tree, within: &str) -> Found {
    let inside = |root: &str| within.is_empty() || root == within || root.starts_with(&format!("{within}/"));
    let mut by_root: BTreeMap<String, Located> = BTreeMap::new();
    for (path, bytes) in tree.files() {
        if path.split('/').any(|part| part == "node_modules") {
            continue;
        }
        let (root, ecosystem) = if let Some(root) = strip_manifest(path, crate::scan::MANIFEST) {
            (root, Ecosystem::Codex)
        } else if let Some(root) = strip_manifest(path, CLAUDE_MANIFEST) {
            (root, Ecosystem::Claude)
        } else if let Some(root) = strip_manifest(path, AGENT_PLUGINS_MANIFEST) {
            match object(bytes) {
                Some(m)
                    if m.get("$schema")
                        .and_then(Value::as_str)
                        .is_some_and(|s| s.starts_with(AGENT_PLUGINS_SCHEMA)) =>
                {
                    (root, Ecosystem::AgentPlugins)
                }
                _ => continue,
            }
        } else {
            continue;
        };
        if !inside(root) {
            continue;
        }
        let manifest = object(bytes);
        let located = Located { root: root.to_string(), ecosystem, manifest, listed_name: None, listed_category: None };
        // Codex's manifest wins over the others in one folder: it is what
        // the scanner reads.
        match by_root.get(root) {
            Some(held) if held.ecosystem <= ecosystem => {}
            _ => {
                by_root.insert(root.to_string(), located);
            }
        }
    }
    let mut found = Found::default();
    for marketplace in MARKETPLACES {
        let Some(file) = tree.file(marketplace).and_then(object) else { continue };
        let entries = match source::marketplace_entries(&file) {
            Ok(entries) => entries,
            Err(why) => {
                found.refused.push((marketplace.to_string(), why));
                continue;
            }
        };
        let claude = marketplace.starts_with(".claude-plugin/");
        for entry in entries {
            match &entry.source {
                Ok(Source::Local(root)) if inside(root) => {
                    let located = by_root.entry(root.clone()).or_insert_with(|| Located {
                        root: root.clone(),
                        ecosystem: if claude { Ecosystem::Claude } else { Ecosystem::Codex },
                        manifest: None,
                        listed_name: None,
                        listed_category: None,
                    });
                    located.listed_name = located.listed_name.take().or(entry.name.clone());
                    located.listed_category = located.listed_category.take().or(entry.category.clone());
                }
                Ok(Source::Local(_)) => {}
                Ok(Source::Remote { .. }) => found.remote.push(entry),
                Err(why) => found.refused.push((entry.name.clone().unwrap_or_default(), why.clone())),
            }
        }
    }
    // A listed folder with no files is no plugin.
    found.plugins = by_root.into_values().filter(|p| tree.is_dir(&p.root)).collect();
    found
}

/// The folder `path` is the manifest `manifest` of, if it is one.
fn strip_manifest<'a>(path: &'a str, manifest: &str) -> Option<&'a str> {
    if path == manifest {
        return Some("");
    }
    path.strip_suffix(manifest)?.strip_suffix('/')
}

fn object(bytes: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// The files of `tree` under `root`, re-rooted there.
pub fn subtree(tree: &Tree, root: &str) -> Tree {
    let skip = if root.is_empty() { 0 } else { root.len() + 1 };
    let mut sub = Tree::new();
    for (path, bytes) in tree.under(root) {
        sub.insert(&path[skip..], bytes.to_vec()).expect("a tree's own paths are safe and distinct");
    }
    sub
}

/// A forge's archive re-rooted at its one top folder (`repo-<commit>/`),
/// as the repository's own paths; a tree with other files at its top is
/// returned as it is.
pub fn strip_top_folder(tree: Tree) -> Tree {
    let children = tree.children("");
    match children.as_slice() {
        [only] if tree.is_dir(only) => subtree(&tree, only),
        _ => tree,
    }
}

/// A plugin name as a slug's part: lowercase ASCII letters, digits, `-`,
/// `_` and `.`, anything else a `-`, no `-` at either end; `None` if
/// nothing is left.
pub fn slug_part(name: &str) -> Option<String> {
    let mapped: String = name
        .trim()
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '_' | '.') => c,
            _ => '-',
        })
        .collect();
    let mut part = String::with_capacity(mapped.len());
    for c in mapped.chars() {
        if !(c == '-' && part.ends_with('-')) {
            part.push(c);
        }
    }
    let part = part.trim_matches('-').trim_matches('.');
    (!part.is_empty()).then(|| part.chars().take(100).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> Tree {
        let mut tree = Tree::new();
        for (path, text) in files {
            tree.insert(path, text.as_bytes().to_vec()).unwrap();
        }
        tree
    }

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn manifests_and_marketplaces_name_the_plugins() {
        let marketplace = format!(
            r#"{{"name":"m","plugins":[
                {{"name":"listed","source":"./plugins/listed","category":"Tools"}},
                {{"name":"gone","source":"./plugins/missing"}},
                {{"name":"far","source":{{"source":"github","repo":"o/far","sha":"{SHA}"}}}},
                {{"name":"moving","source":{{"source":"github","repo":"o/far","ref":"main"}}}}
            ]}}"#
        );
        let tree = tree(&[
            (".codex-plugin/plugin.json", r#"{"name":"root-one"}"#),
            (".claude-plugin/plugin.json", r#"{"name":"root-claude"}"#),
            (".claude-plugin/marketplace.json", &marketplace),
            ("plugins/listed/commands/a.md", "# a"),
            ("plugins/claude/.claude-plugin/plugin.json", r#"{"name":"c"}"#),
            (
                "plugins/portable/plugin.json",
                r#"{"$schema":"https://agent-plugins.org/schemas/1.0.0/plugin.schema.json","name":"p"}"#,
            ),
            ("plugins/plain/plugin.json", r#"{"name":"not-a-plugin"}"#),
            ("plugins/broken/.codex-plugin/plugin.json", "not json"),
            ("node_modules/dep/.codex-plugin/plugin.json", r#"{"name":"dep"}"#),
        ]);
        let found = plugins(&tree, "");
        let seen: Vec<(&str, Ecosystem, String)> =
            found.plugins.iter().map(|p| (p.root.as_str(), p.ecosystem, p.name("repo"))).collect();
        assert_eq!(
            seen,
            [
                ("", Ecosystem::Codex, "root-one".to_string()),
                ("plugins/broken", Ecosystem::Codex, "broken".to_string()),
                ("plugins/claude", Ecosystem::Claude, "c".to_string()),
                ("plugins/listed", Ecosystem::Claude, "listed".to_string()),
                ("plugins/portable", Ecosystem::AgentPlugins, "p".to_string()),
            ]
        );
        assert_eq!(found.plugins[3].listed_category.as_deref(), Some("Tools"));
        assert_eq!(found.remote.len(), 1);
        assert_eq!(found.remote[0].name.as_deref(), Some("far"));
        assert_eq!(found.refused, [("moving".to_string(), source::SourceError::Unpinned)]);

        let within: Vec<String> = plugins(&tree, "plugins/claude").plugins.into_iter().map(|p| p.root).collect();
        assert_eq!(within, ["plugins/claude"]);
    }

    #[test]
    fn a_forge_archive_is_rerooted_at_its_top_folder() {
        let archive = tree(&[("r-abc/.codex-plugin/plugin.json", "{}"), ("r-abc/README.md", "x")]);
        let rerooted = strip_top_folder(archive);
        assert_eq!(rerooted.files().map(|(p, _)| p).collect::<Vec<_>>(), [".codex-plugin/plugin.json", "README.md"]);
        let flat = tree(&[("README.md", "x"), ("a/b", "y")]);
        assert_eq!(strip_top_folder(flat).files().count(), 2);
    }

    #[test]
    fn slug_parts_are_lowercase_and_plain() {
        let cases = [
            ("Registry Broker", Some("registry-broker")),
            ("boss", Some("boss")),
            ("  --a//b--  ", Some("a-b")),
            ("ünï", Some("n")),
            ("ü", None),
            ("x.y_z", Some("x.y_z")),
            ("", None),
        ];
        for (name, expected) in cases {
            assert_eq!(slug_part(name).as_deref(), expected, "{name}");
        }
    }
}
