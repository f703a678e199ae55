//! A stored plugin as clients read it: the catalog's item, the detail
//! with its versions, and its trust, computed when asked from the stored
//! scan, the publisher's proof (Verification) and the reviewed Guard
//! campaigns of the published build, so a campaign reviewed or an
//! ownership proven since the import counts at once.

use std::collections::HashMap;

use plugins::report::Severity;
use plugins::trust::{self, Trust};
use serde_json::{json, Value};

use crate::reply::Error;
use crate::request::Request;
use crate::store::plugins::{self as stored, Plugin};

/// What trust is computed with, besides the plugin's own record.
pub struct Context {
    campaigns: Vec<trust::Campaign>,
    /// Each account's proof: the agent whose ownership it proved, and how.
    proofs: HashMap<String, (String, String)>,
}

impl Context {
    /// The published build's reviewed campaigns and the proofs of `accounts`.
    pub async fn load(request: &Request, accounts: Vec<String>) -> Result<Context, Error> {
        let campaigns = request
            .build
            .as_ref()
            .and_then(|b| b.guard.as_ref())
            .map(|guard| {
                guard
                    .datasets
                    .campaigns
                    .campaigns
                    .iter()
                    .map(|c| trust::Campaign {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        severity: severity(c.severity.as_str()),
                        surfaces: c.surfaces.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let proofs = request
            .app
            .store
            .read(move |conn| {
                let mut proofs = HashMap::new();
                for account in accounts {
                    if let Some(proof) = stored::publisher_proof(conn, &account)? {
                        proofs.insert(account, proof);
                    }
                }
                Ok(proofs)
            })
            .await?;
        Ok(Context { campaigns, proofs })
    }

    /// The trust answer of `plugin`'s latest version.
    pub fn trust(&self, plugin: &Plugin) -> Trust {
        let record = &plugin.record;
        let scanned = scanned(&record["scan"]);
        let manifest = &record["manifest"];
        let metadata = ["repository", "license", "homepage", "author"]
            .into_iter()
            .filter(|key| manifest.get(key).is_some_and(|v| !v.is_null() && v != "" && v != &json!({})))
            .collect();
        let inputs = trust::Inputs {
            scan: scanned.as_ref(),
            publisher_proof: self
                .proofs
                .get(&plugin.account)
                .map(|(uaid, method)| format!("the publisher proved ownership of {uaid} ({method})")),
            metadata,
            scanner_workflow: record["scannerWorkflow"].as_str().map(str::to_string),
            versions: plugin.versions as u32,
            campaigns: &self.campaigns,
        };
        trust::assess(&inputs)
    }

    pub fn owner_verified(&self, plugin: &Plugin) -> bool {
        self.proofs.contains_key(&plugin.account)
    }

    /// The catalog's item (with `seq`, which the catalog takes out).
    pub fn item(&self, plugin: &Plugin) -> Value {
        let record = &plugin.record;
        let trust = self.trust(plugin);
        let mut item = summary(record);
        item["seq"] = plugin.seq.into();
        item["ownerVerified"] = self.owner_verified(plugin).into();
        item["versions"] = plugin.versions.into();
        item["createdAt"] = crate::store::rfc3339(plugin.created_at).into();
        item["updatedAt"] = crate::store::rfc3339(plugin.updated_at).into();
        item["safetyScore"] = json!(trust.safety_score);
        item["trustScore"] = trust.trust_score.into();
        item["recommendation"] = trust.recommendation.as_str().into();
        item
    }

    /// `GET /plugins/{slug}`'s answer.
    pub fn detail(&self, plugin: &Plugin, versions: &[Value]) -> Value {
        let mut detail = self.item(plugin);
        detail.as_object_mut().map(|o| o.remove("seq"));
        let record = &plugin.record;
        for key in ["manifestPath", "manifest", "components", "files", "scan", "scannerWorkflow", "scanNote"] {
            detail[key] = record[key].clone();
        }
        detail["trust"] = serde_json::to_value(self.trust(plugin)).unwrap_or(Value::Null);
        detail["history"] = versions
            .iter()
            .rev()
            .map(|v| {
                json!({
                    "revision": v["revision"], "version": v["version"], "commit": v["commit"],
                    "digest": v["digest"], "importedAt": v["importedAt"],
                    "score": v["scan"]["score"], "grade": v["scan"]["grade"],
                })
            })
            .collect();
        detail
    }
}

/// A version's fields every answer shows.
pub fn summary(record: &Value) -> Value {
    let mut summary = json!({});
    for key in [
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
    ] {
        summary[key] = record[key].clone();
    }
    summary["score"] = record["scan"]["score"].clone();
    summary["grade"] = record["scan"]["grade"].clone();
    summary
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
                    severity: severity(f["severity"].as_str().unwrap_or_default()),
                    file_path: f["filePath"].as_str().map(str::to_string),
                })
                .collect()
        })
        .unwrap_or_default();
    Some(trust::Scanned { score, findings })
}

fn severity(text: &str) -> Severity {
    match text {
        "critical" => Severity::Critical,
        "high" => Severity::High,
        "medium" => Severity::Medium,
        "low" => Severity::Low,
        _ => Severity::Info,
    }
}
