//! The Guard trust routes the reference SDK's Guard client calls, for the
//! plugin catalog (`crate::broker::plugins`): trust by content hash and by
//! name, the feed, pre-install and pre-execution verdicts, advisories and
//! revocations. Each is served under `/api/v1/guard/...` and the portal's
//! `/api/guard/...`, which the client falls back to on a 404 or 501.
//!
//! Answers come from public data only: the stored scans, the publishers'
//! proofs and the build's reviewed campaigns, as the catalog shows them
//! (`crate::broker::plugins::view`). What a signed-in Guard workspace holds (policies,
//! exceptions, receipts, inventories) is not served. The vocabularies are
//! the SDK's: `artifactType` `skill` or `plugin` (only plugins are known
//! here), `recommendation` `monitor`, `review` or `block`, `decision`
//! `allow`, `review` or `block`. Advisories are a version's findings of
//! high or critical severity (`critical` read as the wire's `high`);
//! revocations are the plugins whose recommendation is `block`.

use plugins::catalog::Listing;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::broker::plugins::view::Context;
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::plugins as stored;
use crate::store::{now_ms, rfc3339};

fn generated_at() -> String {
    rfc3339(now_ms())
}

/// An artifact id: `plugin:<slug>`.
fn artifact_id(slug: &str) -> String {
    format!("plugin:{slug}")
}

/// The SDK's `TrustMatch` of `plugin` (as of the version its record is).
fn trust_match(context: &Context, plugin: &Listing) -> Value {
    let trust = context.trust(plugin);
    let record = &plugin.record;
    json!({
        "artifactId": artifact_id(&plugin.slug),
        "artifactName": record["name"],
        "artifactType": "plugin",
        "artifactSlug": plugin.slug,
        "recommendation": trust.recommendation.as_str(),
        "verified": plugin.publisher_proof.is_some(),
        "safetyScore": trust.safety_score,
        "trustScore": trust.trust_score,
        "href": record["href"],
        "ecosystem": record["ecosystem"],
    })
}

/// The plugins whose versions have the content digest `sha256`, each as
/// of the newest such version.
async fn by_digest(request: &Request, sha256: &str) -> Result<Vec<Listing>, Error> {
    let digest = sha256.to_string();
    Ok(request
        .app
        .store
        .read(move |conn| {
            let mut found: Vec<Listing> = Vec::new();
            for (slug, record) in stored::by_digest(conn, &digest)? {
                if found.iter().any(|p| p.slug == slug) {
                    continue;
                }
                if let Some(plugin) = stored::plugin(conn, &slug)? {
                    found.push(Listing { record, ..stored::listing(conn, plugin)? });
                }
            }
            Ok(found)
        })
        .await?)
}

fn sha256_param(text: &str, name: &'static str) -> Result<String, Error> {
    let text = text.trim().to_ascii_lowercase();
    let text = text.strip_prefix("sha256:").unwrap_or(&text).to_string();
    match text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        true => Ok(text),
        false => Err(Error::parameter(name, format!("{name}: expected a SHA-256 digest (64 hex digits)"))),
    }
}

/// `GET /guard/trust/by-hash/{sha256}`.
pub async fn by_hash(request: Request) -> Answer {
    let sha256 = sha256_param(request.params.get("sha256"), "sha256")?;
    let found = by_digest(&request, &sha256).await?;
    let context = Context::of(&request);
    let (matched, evidence) = match found.first() {
        None => (Value::Null, vec![format!("no imported plugin version has the content digest {sha256}")]),
        Some(plugin) => {
            let trust = context.trust(plugin);
            let record = &plugin.record;
            let mut evidence = vec![format!(
                "the content digest of {} revision {} (commit {})",
                plugin.slug,
                record["revision"],
                record["commit"].as_str().unwrap_or_default()
            )];
            evidence.extend(trust.signals.iter().flat_map(|s| s.evidence.iter().cloned()));
            (trust_match(&context, plugin), evidence)
        }
    };
    Ok(reply::json(&json!({
        "generatedAt": generated_at(),
        "query": {"sha256": sha256},
        "match": matched,
        "evidence": evidence,
    })))
}

/// Whether `plugin` answers to `name`: its slug, its name part, or its
/// manifest name, without regard to case.
fn named(plugin: &Listing, name: &str) -> bool {
    let name = name.trim().to_ascii_lowercase();
    let tail = plugin.slug.rsplit('/').next().unwrap_or_default();
    let manifest = plugin.record["name"].as_str().unwrap_or_default().to_ascii_lowercase();
    plugin.slug == name || tail == name || manifest == name
}

/// The most items a resolve or a feed answers.
const MAX_ITEMS: usize = 100;

/// `GET /guard/trust/resolve?ecosystem=&name=&version=`: plugins by name,
/// each as of the version named (or its latest).
pub async fn resolve(request: Request) -> Answer {
    let ecosystem = request.query_value("ecosystem")?;
    let name = request.query_value("name")?;
    let version = request.query_value("version")?;
    let all = request.app.store.read(stored::listings).await?;
    let mut items = Vec::new();
    let mut chosen = Vec::new();
    for plugin in all {
        if ecosystem.as_deref().is_some_and(|e| plugin.record["ecosystem"] != e)
            || name.as_deref().is_some_and(|n| !named(&plugin, n))
        {
            continue;
        }
        let plugin = match version.as_deref() {
            None => plugin,
            Some(version) => {
                let slug = plugin.slug.clone();
                let versions = request.app.store.read(move |conn| stored::versions(conn, &slug)).await?;
                match versions.into_iter().rev().find(|v| v["version"] == version) {
                    Some(record) => Listing { record, ..plugin },
                    None => continue,
                }
            }
        };
        chosen.push(plugin);
        if chosen.len() == MAX_ITEMS {
            break;
        }
    }
    let context = Context::of(&request);
    items.extend(chosen.iter().map(|p| trust_match(&context, p)));
    let mut query = json!({});
    for (key, value) in [("ecosystem", ecosystem), ("name", name), ("version", version)] {
        if let Some(value) = value {
            query[key] = value.into();
        }
    }
    Ok(reply::json(&json!({"generatedAt": generated_at(), "query": query, "items": items})))
}

/// `GET /guard/feed?limit=`: the plugins most recently imported, with the
/// count of each recommendation over the whole catalog.
pub async fn feed(request: Request) -> Answer {
    let limit = request.query_number("limit", 1, MAX_ITEMS)?.unwrap_or(20);
    let mut all = request.app.store.read(stored::listings).await?;
    all.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(b.seq.cmp(&a.seq)));
    let context = Context::of(&request);
    let mut counts = [0usize; 3];
    let mut items = Vec::new();
    for plugin in &all {
        let trust = context.trust(plugin);
        counts[trust.recommendation as usize] += 1;
        if items.len() < limit {
            items.push(json!({
                "id": artifact_id(&plugin.slug),
                "artifactType": "plugin",
                "slug": plugin.slug,
                "name": plugin.record["name"],
                "href": plugin.record["href"],
                "ecosystem": plugin.record["ecosystem"],
                "safetyScore": trust.safety_score,
                "trustScore": trust.trust_score,
                "verified": plugin.publisher_proof.is_some(),
                "recommendation": trust.recommendation.as_str(),
                "updatedAt": plugin.updated_at,
            }));
        }
    }
    Ok(reply::json(&json!({
        "generatedAt": generated_at(),
        "items": items,
        "summary": {"total": all.len(), "monitorCount": counts[0], "reviewCount": counts[1], "blockCount": counts[2]},
    })))
}

/// A preflight request (the SDK's `GuardPreflightRequest`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Preflight {
    #[serde(rename = "harness")]
    _harness: String,
    artifact_name: String,
    artifact_type: String,
    artifact_id: Option<String>,
    artifact_slug: Option<String>,
    artifact_hash: Option<String>,
    #[serde(rename = "publisher")]
    _publisher: Option<String>,
    #[serde(rename = "domain")]
    _domain: Option<String>,
    #[serde(rename = "launchSummary")]
    _launch_summary: Option<String>,
    #[serde(rename = "capabilities")]
    _capabilities: Option<Vec<String>>,
    #[serde(rename = "workspacePath")]
    _workspace_path: Option<String>,
}

/// `POST /guard/verdict/pre-install` and `/guard/verdict/pre-execution`:
/// the artifact found by hash, slug, id or name, and its decision. Files
/// whose hash is none of a known plugin's versions are `review`: they are
/// not what was scanned.
pub async fn verdict(request: Request) -> Answer {
    let preflight: Preflight = parse_body(&request.body)?;
    if !["skill", "plugin"].contains(&preflight.artifact_type.as_str()) {
        return Err(Error::invalid_body("artifactType must be skill or plugin").naming("artifactType"));
    }
    let hash = preflight.artifact_hash.as_deref().map(|h| sha256_param(h, "artifactHash")).transpose()?;
    let slug = preflight
        .artifact_slug
        .clone()
        .or_else(|| preflight.artifact_id.as_deref().and_then(|id| id.strip_prefix("plugin:")).map(str::to_string))
        .map(|s| s.to_ascii_lowercase());
    let mut found: Option<Listing> = None;
    let mut hash_unknown = false;
    if preflight.artifact_type == "plugin" {
        if let Some(hash) = &hash {
            found = by_digest(&request, hash).await?.into_iter().next();
            hash_unknown = found.is_none();
        }
        if found.is_none() {
            found = match &slug {
                Some(slug) => crate::broker::plugins::listing(&request, slug).await?,
                None => {
                    let all = request.app.store.read(stored::listings).await?;
                    let mut named_so: Vec<Listing> =
                        all.into_iter().filter(|p| named(p, &preflight.artifact_name)).collect();
                    // A name two plugins answer to names neither.
                    (named_so.len() == 1).then(|| named_so.remove(0))
                }
            };
        }
    }
    let context = Context::of(&request);
    let principal = match &request.principal {
        Some(p) => json!({"signedIn": true, "principalType": "user", "accountId": p.account, "roles": []}),
        None => json!({"signedIn": false, "principalType": "user", "roles": []}),
    };
    let mut answer = json!({
        "generatedAt": generated_at(),
        "principal": principal,
        "scope": "artifact",
        "matchedException": null,
    });
    match found {
        None => {
            answer["decision"] = "review".into();
            answer["recommendation"] = "review".into();
            answer["category"] = "policy".into();
            answer["rationale"] = "no imported plugin matches this artifact; review it before use".into();
            answer["matchedEvidence"] = json!([{"category": "policy", "source": "almanac",
                "detail": "unknown artifact: nothing was scanned under this hash, slug or name"}]);
            answer["trustMatch"] = Value::Null;
        }
        Some(plugin) => {
            let trust = context.trust(&plugin);
            let mut recommendation = trust.recommendation;
            let mut rationale = trust.rationale.clone();
            let mut evidence: Vec<Value> =
                trust.matched_evidence.iter().map(|m| serde_json::to_value(m).unwrap_or(Value::Null)).collect();
            if hash_unknown {
                recommendation = recommendation.max(plugins::trust::Recommendation::Review);
                rationale = format!("the files' hash is none of {}'s imported versions; {rationale}", plugin.slug);
                evidence.push(json!({"category": "trust", "source": "almanac:digest",
                    "detail": format!("{} is not the digest of an imported version", hash.clone().unwrap_or_default())}));
            }
            answer["decision"] = recommendation.decision().into();
            answer["recommendation"] = recommendation.as_str().into();
            answer["category"] =
                if evidence.iter().any(|e| e["category"] == "watchlist") { "watchlist" } else { "trust" }.into();
            answer["rationale"] = rationale.into();
            answer["freshnessTimestamp"] = plugin.record["importedAt"].clone();
            answer["evidenceSources"] = json!(["almanac-scan", "almanac-verification", "guard-campaigns"]);
            answer["matchedEvidence"] = evidence.into();
            answer["trustMatch"] = trust_match(&context, &plugin);
        }
    }
    Ok(reply::json(&answer))
}

/// `GET /guard/advisories`: each plugin's findings of high or critical
/// severity, and its matched campaigns.
pub async fn advisories(request: Request) -> Answer {
    let all = request.app.store.read(stored::listings).await?;
    let context = Context::of(&request);
    let mut items = Vec::new();
    for plugin in &all {
        let record = &plugin.record;
        let (name, published) = (record["name"].clone(), record["importedAt"].clone());
        for finding in record["scan"]["findings"].as_array().into_iter().flatten() {
            // The SDK's severities stop at `high`: a critical finding is sent as one.
            if !matches!(finding["severity"].as_str(), Some("critical" | "high")) {
                continue;
            }
            items.push(json!({
                "id": format!("adv:{}:{}:{}", plugin.slug, record["revision"], finding["ruleId"].as_str().unwrap_or_default()),
                "artifactId": artifact_id(&plugin.slug),
                "artifactName": name,
                "reason": format!("{}{}", finding["title"].as_str().unwrap_or_default(),
                    finding["filePath"].as_str().map(|p| format!(" ({p})")).unwrap_or_default()),
                "severity": "high",
                "publishedAt": published,
                "remediation": finding["remediation"],
                "scope": "artifact",
                "source": "almanac-scan",
            }));
        }
        for matched in context.trust(plugin).matched_evidence.iter().filter(|m| m.category == "watchlist") {
            items.push(json!({
                "id": format!("adv:{}:{}:{}", plugin.slug, record["revision"], matched.source),
                "artifactId": artifact_id(&plugin.slug),
                "artifactName": name,
                "reason": matched.detail,
                "severity": "medium",
                "publishedAt": published,
                "scope": "artifact",
                "source": matched.source,
            }));
        }
    }
    Ok(reply::json(&json!({"generatedAt": generated_at(), "items": items})))
}

/// `GET /guard/revocations`: the plugins whose recommendation is `block`.
pub async fn revocations(request: Request) -> Answer {
    let all = request.app.store.read(stored::listings).await?;
    let context = Context::of(&request);
    let items: Vec<Value> = all
        .iter()
        .filter_map(|plugin| {
            let trust = context.trust(plugin);
            (trust.recommendation == plugins::trust::Recommendation::Block).then(|| {
                json!({
                    "id": format!("rev:{}:{}", plugin.slug, plugin.record["revision"]),
                    "artifactId": artifact_id(&plugin.slug),
                    "artifactName": plugin.record["name"],
                    "reason": trust.rationale,
                    "severity": "high",
                    "publishedAt": plugin.record["importedAt"],
                    "scope": "artifact",
                    "source": "almanac-scan",
                })
            })
        })
        .collect();
    Ok(reply::json(&json!({"generatedAt": generated_at(), "items": items})))
}
