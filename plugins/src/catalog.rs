//! The catalog's answers, made the same way by the api (from its store)
//! and the generator (from the journal): a plugin's [`Listing`] (its
//! latest version's record and what is known of it) made into the
//! catalog's item, a plugin's detail with its trust, the
//! `awesome-codex-plugins` `plugins.json` export and a Codex marketplace
//! file. Trust is computed here from the listing and the reviewed Guard
//! campaigns the caller has, so a build and the api agree on the same
//! inputs.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::report::Severity;
use crate::trust::{self, Trust};

/// The `plugins.json` export's route.
pub const PLUGINS_JSON: &str = "/api/v1/plugins/plugins.json";
/// The Codex marketplace file's route.
pub const MARKETPLACE: &str = "/api/v1/plugins/marketplace.json";
/// The exports' `source` and the marketplace's name.
pub const SOURCE: &str = "almanac";
pub const DISPLAY_NAME: &str = "almanac plugins";

/// A plugin as the catalog knows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listing {
    pub slug: String,
    /// Its place in the order of first imports (the catalog's cursor).
    pub seq: i64,
    /// RFC 3339.
    pub created_at: String,
    pub updated_at: String,
    pub versions: u32,
    /// How the importing account proved itself, if it did.
    pub publisher_proof: Option<String>,
    /// The latest version's record.
    pub record: Value,
    /// Each version's summary, newest first: `revision`, `version`,
    /// `commit`, `digest`, `importedAt`, and the scan's `score` and `grade`.
    pub history: Vec<Value>,
}

/// The trust answer of `listing`'s latest version.
pub fn trust(listing: &Listing, campaigns: &[trust::Campaign]) -> Trust {
    let record = &listing.record;
    let scanned = scanned(&record["scan"]);
    let manifest = &record["manifest"];
    let metadata = ["repository", "license", "homepage", "author"]
        .into_iter()
        .filter(|key| manifest.get(key).is_some_and(|v| !v.is_null() && v != "" && v != &json!({})))
        .collect();
    let inputs = trust::Inputs {
        scan: scanned.as_ref(),
        publisher_proof: listing.publisher_proof.clone(),
        metadata,
        scanner_workflow: record["scannerWorkflow"].as_str().map(str::to_string),
        versions: listing.versions,
        campaigns,
    };
    trust::assess(&inputs)
}

/// The record's fields every answer shows.
const SUMMARY: [&str; 16] = [
    "slug",
    "name",
    "displayName",
    "description",
    "category",
    "ecosystem",
    "version",
    "revision",
    "repository",
    "sourceRepo",
    "repositoryUrl",
    "subpath",
    "commit",
    "digest",
    "href",
    "installUrl",
];

/// The catalog's item.
pub fn item(listing: &Listing, campaigns: &[trust::Campaign]) -> Value {
    let record = &listing.record;
    let trust = trust(listing, campaigns);
    let mut item = json!({});
    for key in SUMMARY {
        item[key] = record[key].clone();
    }
    item["score"] = record["scan"]["score"].clone();
    item["grade"] = record["scan"]["grade"].clone();
    item["ownerVerified"] = listing.publisher_proof.is_some().into();
    item["versions"] = listing.versions.into();
    item["createdAt"] = listing.created_at.clone().into();
    item["updatedAt"] = listing.updated_at.clone().into();
    item["safetyScore"] = json!(trust.safety_score);
    item["trustScore"] = trust.trust_score.into();
    item["recommendation"] = trust.recommendation.as_str().into();
    item
}

/// A plugin's detail: its item, its manifest, components, files, scan,
/// trust and every version.
pub fn detail(listing: &Listing, campaigns: &[trust::Campaign]) -> Value {
    let mut detail = item(listing, campaigns);
    let record = &listing.record;
    for key in ["manifestPath", "manifest", "components", "files", "scan", "scannerWorkflow", "scanNote"] {
        detail[key] = record[key].clone();
    }
    detail["source"] = pinned_source(record);
    detail["trust"] = serde_json::to_value(trust(listing, campaigns)).expect("trust serialises");
    detail["history"] = listing.history.clone().into();
    detail
}

/// Where a plugin's page is: `/plugins/{owner}/{name}`.
pub fn page_route(slug: &str) -> String {
    format!("/plugins/{slug}")
}

/// The exports' routes, in the order a build writes them.
pub const EXPORTS: [&str; 2] = [PLUGINS_JSON, MARKETPLACE];

/// The export at `route` (one of [`EXPORTS`]) of `listings`, whose newest
/// change was on `date` (`YYYY-MM-DD`).
pub fn export(route: &str, listings: &[Listing], date: &str) -> Option<Value> {
    match route {
        PLUGINS_JSON => Some(plugins_json(listings, SOURCE, date)),
        MARKETPLACE => Some(marketplace(listings, SOURCE, DISPLAY_NAME)),
        _ => None,
    }
}

/// The source a marketplace file installs a version from: its repository
/// at its commit, a `git-subdir` source when it is in a folder.
pub fn pinned_source(record: &Value) -> Value {
    let url = format!("{}.git", record["repositoryUrl"].as_str().unwrap_or_default());
    match record["subpath"].as_str().unwrap_or_default() {
        "" => json!({"source": "url", "url": url, "sha": record["commit"]}),
        subpath => json!({"source": "git-subdir", "url": url, "path": subpath, "sha": record["commit"]}),
    }
}

/// The `plugins.json` export of awesome-codex-plugins: each plugin's
/// `name`, `url`, `owner`, `repo`, `description`, `category`, `source`
/// and `install_url`, in the catalog's order, with the categories in use.
pub fn plugins_json(listings: &[Listing], source: &str, last_updated: &str) -> Value {
    let mut categories: Vec<String> =
        listings.iter().filter_map(|l| l.record["category"].as_str().map(str::to_string)).collect();
    categories.sort_unstable();
    categories.dedup();
    let plugins: Vec<Value> = listings
        .iter()
        .map(|listing| {
            let record = &listing.record;
            let (owner, repo) = record["repository"].as_str().unwrap_or_default().split_once('/').unwrap_or_default();
            json!({
                "name": record["displayName"],
                "url": record["repositoryUrl"],
                "owner": owner,
                "repo": repo,
                "description": record["description"].as_str().unwrap_or_default(),
                "category": record["category"].as_str().unwrap_or("Uncategorized"),
                "source": source,
                "install_url": record["installUrl"],
            })
        })
        .collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "name": source,
        "version": "1.0.0",
        "last_updated": last_updated,
        "total": plugins.len(),
        "categories": categories,
        "plugins": plugins,
    })
}

/// A Codex marketplace file listing every plugin by its [`pinned_source`].
pub fn marketplace(listings: &[Listing], name: &str, display_name: &str) -> Value {
    let plugins: Vec<Value> = listings
        .iter()
        .map(|listing| {
            let record = &listing.record;
            let mut entry = json!({
                "name": record["name"],
                "displayName": record["displayName"],
                "source": pinned_source(record),
                "policy": {"installation": "AVAILABLE", "authentication": "ON_INSTALL"},
                "description": record["description"],
            });
            if let Some(category) = record["category"].as_str() {
                entry["category"] = category.into();
            }
            entry
        })
        .collect();
    json!({"name": name, "interface": {"displayName": display_name}, "plugins": plugins})
}

/// The stored `scan-result.v1` report as trust reads it; `None` when the
/// version was not scanned.
fn scanned(scan: &Value) -> Option<trust::Scanned> {
    let score = scan.get("score")?.as_u64()? as u32;
    let findings = scan["findings"]
        .as_array()
        .map(|findings| {
            findings
                .iter()
                .map(|f| trust::ScannedFinding {
                    rule_id: f["ruleId"].as_str().unwrap_or_default().to_string(),
                    severity: Severity::parse(f["severity"].as_str().unwrap_or_default()),
                    file_path: f["filePath"].as_str().map(str::to_string),
                })
                .collect()
        })
        .unwrap_or_default();
    Some(trust::Scanned { score, findings })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(slug: &str, subpath: &str, category: Option<&str>) -> Listing {
        Listing {
            slug: slug.into(),
            seq: 1,
            created_at: "2026-01-01T00:00:00.000Z".into(),
            updated_at: "2026-01-01T00:00:00.000Z".into(),
            versions: 1,
            publisher_proof: None,
            record: json!({"slug": slug, "name": "p", "displayName": "P", "repository": "o/r",
                "repositoryUrl": "https://github.com/o/r", "subpath": subpath, "commit": "abc",
                "category": category, "description": "d", "installUrl": "u",
                "scan": {"score": 90, "grade": "A", "findings": []}}),
            history: vec![],
        }
    }

    #[test]
    fn exports_have_the_ecosystems_shapes() {
        let listings = [listing("o/p", "", Some("Tools")), listing("o/q", "plugins/q", None)];
        let exported = plugins_json(&listings, "almanac", "2026-01-01");
        assert_eq!(exported["total"], 2);
        assert_eq!(exported["categories"], json!(["Tools"]));
        let first = &exported["plugins"][0];
        let keys: Vec<&String> = first.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["category", "description", "install_url", "name", "owner", "repo", "source", "url"]);
        assert_eq!((first["owner"].as_str(), first["repo"].as_str()), (Some("o"), Some("r")));
        let market = marketplace(&listings, "almanac", "Almanac");
        assert_eq!(
            market["plugins"][0]["source"],
            json!({"source": "url", "url": "https://github.com/o/r.git", "sha": "abc"})
        );
        assert_eq!(market["plugins"][1]["source"]["source"], "git-subdir");
        assert_eq!(market["plugins"][1]["source"]["path"], "plugins/q");
        assert!(market["plugins"][1].get("category").is_none());
        // Every entry reads back as a source the importer takes.
        for entry in market["plugins"].as_array().unwrap() {
            assert!(crate::source::Source::parse(&entry["source"]).is_err(), "sha abc is no commit: refused");
        }
    }

    #[test]
    fn an_item_carries_its_trust() {
        let item = item(&listing("o/p", "", None), &[]);
        assert_eq!(item["safetyScore"], 90);
        assert_eq!(item["recommendation"], "monitor");
        assert_eq!(item["ownerVerified"], false);
    }
}
