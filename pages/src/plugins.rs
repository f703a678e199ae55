//! The plugin catalog's pages: the list (every plugin, newest first
//! import first) and a page per plugin with its manifest, components,
//! scan with its findings, trust with its evidence, and the pinned source
//! a marketplace file installs it from.
//!
//! Both are made from the JSON the catalog answers (`plugins::catalog`'s
//! item and detail, which this crate does not know): by the build from the
//! journal's catalog, by the api from its store for plugins imported
//! since. What a plugin's author wrote (names, descriptions, messages) is
//! shown as text, never as a link.

use minijinja::{context, Value};
use serde_json::Value as Json;

use shared::http::Cache;
use shared::timestamp::Timestamp;

use super::{routes, Made, Page};

/// When a plugin last changed: its `updatedAt` (RFC 3339).
pub fn last_modified(item: &Json) -> Timestamp {
    item["updatedAt"]
        .as_str()
        .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
        .and_then(|at| at.timestamp_nanos_opt())
        .map_or(Timestamp(0), |nanos| Timestamp(nanos.max(0) as u64))
}

/// The list of `items`, in the catalog's order.
pub(super) fn list_page(items: &[Json], last_modified: Timestamp, made: Made) -> Page {
    let rows: Vec<Value> = items
        .iter()
        .map(|item| {
            context! {
                route => routes::plugin(item["slug"].as_str().unwrap_or_default()).0,
                i => Value::from_serialize(item),
            }
        })
        .collect();
    Page {
        route: routes::PLUGINS.into(),
        file: "registry/plugins.html".into(),
        template: "plugins.html",
        context: context! { rows, total => items.len() },
        json: Some("/api/v1/plugins/catalog".into()),
        last_modified,
        cache: Cache::Catalog,
        made,
    }
}

/// A plugin's page.
pub(super) fn plugin_page(detail: &Json, made: Made) -> Page {
    let slug = detail["slug"].as_str().unwrap_or_default();
    let (route, file) = routes::plugin(slug);
    let findings: Vec<&Json> = detail["scan"]["findings"].as_array().map(|f| f.iter().collect()).unwrap_or_default();
    Page {
        route,
        file,
        template: "plugin.html",
        context: context! {
            d => Value::from_serialize(detail),
            findings => Value::from_serialize(&findings),
            manifest => detail["manifest"].is_object().then(|| serde_json::to_string_pretty(&detail["manifest"]).unwrap_or_default()),
            source => serde_json::to_string(&detail["source"]).unwrap_or_default(),
            json_route => format!("/api/v1/plugins/{}", slug.replace('/', "%2F")),
        },
        json: Some(format!("/api/v1/plugins/{}", slug.replace('/', "%2F"))),
        last_modified: last_modified(detail),
        cache: Cache::Catalog,
        made,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_plugin_page_shows_its_scan_and_escapes_what_its_author_wrote() {
        let detail = json!({
            "slug": "acme/p", "name": "p", "displayName": "<script>alert(1)</script>", "description": "d",
            "category": null, "ecosystem": "codex", "version": "1.0.0", "repository": "acme/r",
            "repositoryUrl": "https://github.com/acme/r", "subpath": "", "commit": "c0ffee", "digest": "ab",
            "updatedAt": "2026-01-02T00:00:00.000Z", "createdAt": "2026-01-01T00:00:00.000Z",
            "score": 88, "grade": "B", "trustScore": 60, "safetyScore": 88, "recommendation": "review",
            "ownerVerified": false, "versions": 1, "revision": 1, "manifest": {"name": "p"}, "scanNote": null,
            "components": {"skills": 1, "commands": 0, "agents": 0, "mcpServers": ["x"], "hooks": false, "apps": false},
            "files": [{"path": "a", "size": 1, "sha256": "00"}],
            "source": {"source": "url", "url": "https://github.com/acme/r.git", "sha": "c0ffee"},
            "scan": {"score": 88, "grade": "B", "categories": [{"name": "Security", "score": 9, "max": 16}],
                "findings": [{"ruleId": "HARDCODED_SECRET", "severity": "high", "title": "t", "filePath": "x.js", "lineNumber": 3}]},
            "trust": {"trustScore": 60, "recommendation": "review", "rationale": "r",
                "signals": [{"name": "security", "weight": 50, "points": 88, "evidence": ["e"]}],
                "matchedEvidence": [{"category": "trust", "source": "scan:HARDCODED_SECRET", "detail": "high finding"}]},
            "history": [{"revision": 1, "version": "1.0.0", "commit": "c0ffee", "importedAt": "2026-01-02T00:00:00.000Z", "score": 88, "grade": "B"}],
        });
        let file = crate::Renderer::new(false, true).plugin(&detail, crate::Made::Build).unwrap();
        assert_eq!(file.route, "/registry/plugins/acme/p");
        assert_eq!(file.path, "registry/plugins/acme/p.html");
        let html = String::from_utf8(file.representation.body).unwrap();
        assert!(!html.contains("<script>alert"), "the author's text is escaped");
        assert!(html.contains("&lt;script&gt;"), "shown as text");
        for shown in ["HARDCODED_SECRET", "x.js:3", "88 of 100, grade B", "review", "c0ffee", "scan:HARDCODED_SECRET"] {
            assert!(html.contains(shown), "{shown} missing");
        }
        let list = crate::Renderer::new(false, true)
            .plugins(
                std::slice::from_ref(&detail),
                std::slice::from_ref(&detail),
                super::last_modified(&json!({"updatedAt": "2026-01-02T00:00:00Z"})),
            )
            .unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].route, "/registry/plugins");
    }
}
