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
    for crate_dir in ["api/src", "generator/src"] {
        let graph = imports(&workspace_root().join(crate_dir));
        assert!(graph.len() > 10, "{crate_dir}: the modules were found");
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
