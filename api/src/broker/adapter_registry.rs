//! Writes to the adapter registry (spec section 4, the adapter registry):
//! `POST /adapters/registry/categories` (operator), `POST
//! /adapters/registry/adapters` (signed in; 202, processed in the
//! background) and `GET /adapters/registry/submissions/{id}` (the
//! submitter or the operator).
//!
//! This deployment has no ledger client, so nothing is written to HCS
//! topics: categories and adapters are registered in the broker's own
//! registry (`topicId` empty), journaled, and published by the next build's
//! catalog. Until then the registry routes answer with them merged in.
//!
//! A submission is processed after its 202: its category (`categorySlug`,
//! or `newCategory`, created as the category route would) must exist, and
//! its `adapterId` must be new or the submitter's own; then the adapter is
//! published and the submission `completed`, or it is `failed` with why.
//! Submissions the api was processing when it stopped are processed at the
//! next start.

use std::sync::Arc;

use broker_model::catalog::{Catalog, Category, RegistryEntry};
use broker_site::render::{self, EntryQuery};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use warp::http::StatusCode;

use crate::app::App;
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::adapters::{self as stored, Created, Submission};
use crate::store::{self, Failure};

#[derive(Deserialize, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CategoryRequest {
    name: String,
    description: Option<String>,
    #[serde(rename = "type")]
    kind: Option<CategoryKind>,
    slug: Option<String>,
    /// Accepted; not kept (the catalog's categories have no metadata).
    #[allow(dead_code)]
    metadata: Option<Map<String, Value>>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
enum CategoryKind {
    AdapterType,
    Custom,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SubmitRequest {
    adapter_id: String,
    adapter_name: String,
    entity: String,
    package: Package,
    config: Map<String, Value>,
    manifest: Map<String, Value>,
    state_model: Option<String>,
    signature: Option<String>,
    manifest_pointer: Option<String>,
    /// Accepted; the entry keeps the pointer only.
    #[allow(dead_code)]
    manifest_sequence: Option<u64>,
    keywords: Option<Vec<String>>,
    category_slug: Option<String>,
    new_category: Option<CategoryRequest>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Package {
    registry: String,
    name: String,
    version: String,
    integrity: String,
}

/// The HCS-21 manifest's sections.
const MANIFEST: [&str; 6] = ["meta", "adapter", "package", "runtime", "capabilities", "consensus"];

fn refused(field: &str, rule: &str) -> Error {
    Error::invalid_body(format!("{field}: {rule}")).naming(field.to_string())
}

/// A required text: trimmed, from 1 to `max` bytes.
fn required(field: &str, text: &str, max: usize) -> Result<String, Error> {
    let text = text.trim();
    match text.is_empty() || text.len() > max {
        true => Err(refused(field, &format!("from 1 to {max} bytes"))),
        false => Ok(text.to_string()),
    }
}

/// Lower-case letters, digits and single hyphens, from 1 to 64 bytes.
fn slug_ok(slug: &str) -> bool {
    (1..=64).contains(&slug.len())
        && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !slug.starts_with('-')
        && !slug.ends_with('-')
        && !slug.contains("--")
}

/// A category of the request, its id to be given by the store.
fn category(request: &CategoryRequest, field: &str, network: &str, now: i64) -> Result<Category, Error> {
    let name = required(&format!("{field}name"), &request.name, 120)?;
    let slug = match &request.slug {
        Some(slug) => slug.trim().to_string(),
        None => search::query::slug(&name),
    };
    if !slug_ok(&slug) {
        return Err(refused(&format!("{field}slug"), "lower-case letters, digits and single hyphens, at most 64"));
    }
    let description =
        request.description.as_deref().map(|d| required(&format!("{field}description"), d, 1000)).transpose()?;
    let kind = match request.kind.unwrap_or(CategoryKind::Custom) {
        CategoryKind::AdapterType => "adapter-type",
        CategoryKind::Custom => "custom",
    };
    let at = store::rfc3339(now);
    Ok(Category {
        id: 0,
        network: network.to_string(),
        kind: kind.to_string(),
        slug,
        name,
        description,
        topic_id: String::new(),
        version_topic_id: String::new(),
        created_at: at.clone(),
        updated_at: at,
    })
}

fn catalog(request: &Request) -> Result<&Catalog, Error> {
    let build = request.build()?;
    build.broker.as_deref().map(|b| &b.catalog).ok_or_else(|| Error::not_found(&request.path))
}

fn largest_id(catalog: &Catalog) -> u64 {
    catalog.adapter_registry.categories.iter().map(|c| c.id).max().unwrap_or(0)
}

/// Creates a category in the store unless the catalog or the store has
/// its slug.
fn create(conn: &store::Conn, catalog: &Catalog, wanted: Category, now: i64) -> Result<Created, Failure> {
    let held = catalog.adapter_registry.categories.iter().find(|c| c.slug == wanted.slug).cloned();
    match stored::category_outcome(held, &wanted) {
        Some(outcome) => Ok(outcome),
        None => stored::create_category(conn, wanted, largest_id(catalog), now),
    }
}

/// `POST /adapters/registry/categories` (operator): 201 `{category}`; the
/// same name and type again answers the category held; 409 for a slug
/// another category has.
pub async fn create_category(request: Request) -> Answer {
    let body: CategoryRequest = parse_body(&request.body)?;
    let catalog = catalog(&request)?.clone();
    let now = store::now_ms();
    let wanted = category(&body, "", &catalog.adapter_registry.network, now)?;
    let created = request.app.store.write(move |conn| create(conn, &catalog, wanted.clone(), now)).await?;
    let category = match created {
        Created::Done { seq, category } => {
            request.app.catalog_changes.saw(seq);
            request.app.journal.wake.notify_one();
            category
        }
        Created::Same(category) => category,
        Created::Taken => {
            let message = "another category has this slug: name a different slug";
            return Err(Error::new(StatusCode::CONFLICT, "category_exists", message).naming("slug"));
        }
    };
    Ok(reply::json_with(StatusCode::CREATED, &json!({"category": category})))
}

/// The checks a submission passes before it is queued.
fn check(body: &SubmitRequest, network: &str) -> Result<(), Error> {
    let id = body.adapter_id.trim();
    let id_ok = (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_".contains(&b));
    if !id_ok {
        return Err(refused("adapterId", "letters, digits, '.', '-' and '_', at most 128"));
    }
    required("adapterName", &body.adapter_name, 120)?;
    required("entity", &body.entity, 64)?;
    let package = &body.package;
    for (field, value) in [
        ("package.registry", &package.registry),
        ("package.name", &package.name),
        ("package.version", &package.version),
        ("package.integrity", &package.integrity),
    ] {
        required(field, value, 256)?;
    }
    if body.config.get("type").and_then(Value::as_str).is_none_or(|t| t.trim().is_empty()) {
        return Err(refused("config.type", "is required (a string)"));
    }
    if let Some(missing) = MANIFEST.iter().find(|s| body.manifest.get(**s).is_none_or(Value::is_null)) {
        return Err(refused(&format!("manifest.{missing}"), "is required (HCS-21)"));
    }
    for (field, value) in
        [("stateModel", &body.state_model), ("signature", &body.signature), ("manifestPointer", &body.manifest_pointer)]
    {
        value.as_deref().map(|v| required(field, v, 4096)).transpose()?;
    }
    let keywords = body.keywords.as_deref().unwrap_or_default();
    if keywords.len() > 32 {
        return Err(refused("keywords", "at most 32"));
    }
    for (n, keyword) in keywords.iter().enumerate() {
        required(&format!("keywords[{n}]"), keyword, 48)?;
    }
    match (&body.category_slug, &body.new_category) {
        (Some(slug), _) if !slug_ok(slug.trim()) => Err(refused("categorySlug", "not a category slug")),
        (_, Some(new)) => category(new, "newCategory.", network, 0).map(drop),
        (Some(_), None) => Ok(()),
        (None, None) => Err(refused("categorySlug", "name a categorySlug or a newCategory")),
    }
}

/// `POST /adapters/registry/adapters` (signed in): 202 with the
/// submission to poll; processed in the background.
pub async fn submit(request: Request) -> Answer {
    let principal = request.principal()?.clone();
    let body: SubmitRequest = parse_body(&request.body)?;
    let network = catalog(&request)?.adapter_registry.network.clone();
    check(&body, &network)?;
    let account = principal.billing(&request.headers)?;
    let id = format!("sub_{}", shared::http::hex(&store::random::<12>()));
    let (stored_id, adapter_id, text) =
        (id.clone(), body.adapter_id.trim().to_string(), String::from_utf8_lossy(&request.body).into_owned());
    let now = store::now_ms();
    request.app.store.write(move |conn| stored::submit(conn, &stored_id, &account, &adapter_id, &text, now)).await?;
    tokio::spawn(process(request.app.clone(), id.clone()));
    Ok(reply::json_with(
        StatusCode::ACCEPTED,
        &json!({"submissionId": id, "status": "pending", "network": network,
                "message": "queued: poll /adapters/registry/submissions/{submissionId}"}),
    ))
}

/// `GET /adapters/registry/submissions/{id}`: the submitter's own (or any,
/// for the operator); 403 for another's, 404 for none.
pub async fn submission(request: Request) -> Answer {
    let principal = request.principal()?.clone();
    let id = request.params.get("submissionId").to_string();
    let found = request.app.store.read(move |conn| stored::submission(conn, &id)).await?;
    let submission =
        found.ok_or_else(|| Error::new(StatusCode::NOT_FOUND, "submission_not_found", "no such adapter submission"))?;
    if !principal.operator && principal.account.as_deref() != Some(submission.account.as_str()) {
        return Err(Error::forbidden("the submission is another account's"));
    }
    let network = catalog(&request)?.adapter_registry.network.clone();
    Ok(reply::json(&json!({"submission": record(&submission, &network)})))
}

fn record(s: &Submission, network: &str) -> Value {
    let request: Value = serde_json::from_str(&s.request).unwrap_or(Value::Null);
    let slug = request["categorySlug"].as_str().or(request["newCategory"]["slug"].as_str());
    json!({
        "id": s.id,
        "network": network,
        "status": s.status.as_str(),
        "adapterId": s.adapter_id,
        "createdAt": store::rfc3339(s.created_at),
        "updatedAt": store::rfc3339(s.updated_at),
        "startedAt": s.started_at.map(store::rfc3339),
        "completedAt": s.completed_at.map(store::rfc3339),
        "error": s.error,
        "resultPayload": s.result.as_deref().and_then(|r| serde_json::from_str::<Value>(r).ok()),
        "categorySlug": slug,
        "creditAccountId": s.account,
    })
}

/// Processes submission `id` (see the module's doc); failures of the store
/// are logged, and the submission is tried again at the next start.
pub async fn process(app: Arc<App>, id: String) {
    if let Err(e) = settle(&app, &id).await {
        tracing::error!(submission = id, error = %e, "adapter submission not processed");
    }
}

async fn settle(app: &App, id: &str) -> Result<(), Failure> {
    let Some(catalog) = app.live.get().and_then(|b| b.broker.as_ref().map(|a| a.catalog.clone())) else {
        return Ok(()); // no build yet: processed at a start with one
    };
    let id = id.to_string();
    let seq = app
        .store
        .write(move |conn| {
            let now = store::now_ms();
            if !stored::claim(conn, &id, now)? {
                return Ok(None);
            }
            let submission = stored::submission(conn, &id)?.expect("claimed above");
            match publication(conn, &submission, &catalog, now)? {
                Ok((entry, result)) => stored::publish(conn, &id, &submission.account, &entry, &result, now).map(Some),
                Err(reason) => stored::fail(conn, &id, &reason, now).map(|()| None),
            }
        })
        .await?;
    if let Some(seq) = seq {
        app.catalog_changes.saw(seq);
        app.journal.wake.notify_one();
    }
    Ok(())
}

/// The entry a submission publishes and its result, or why it cannot be.
fn publication(
    conn: &store::Conn,
    submission: &Submission,
    catalog: &Catalog,
    now: i64,
) -> Result<Result<(RegistryEntry, Value), String>, Failure> {
    let Ok(body) = serde_json::from_str::<SubmitRequest>(&submission.request) else {
        return Ok(Err("the stored submission is unreadable".into()));
    };
    let network = &catalog.adapter_registry.network;
    let category = match (&body.category_slug, &body.new_category) {
        (Some(slug), _) => {
            let slug = slug.trim();
            let held = catalog.adapter_registry.categories.iter().find(|c| c.slug == slug).cloned();
            match held.map_or_else(|| stored::category_by_slug(conn, slug), |c| Ok(Some(c)))? {
                Some(category) => category,
                None => return Ok(Err(format!("category {slug} is not in the adapter registry"))),
            }
        }
        (None, Some(new)) => {
            let Ok(wanted) = category(new, "newCategory.", network, now) else {
                return Ok(Err("newCategory is not a valid category".into()));
            };
            match create(conn, catalog, wanted, now)? {
                Created::Done { category, .. } | Created::Same(category) => *category,
                Created::Taken => return Ok(Err("newCategory: another category has its slug".into())),
            }
        }
        (None, None) => return Ok(Err("no category named".into())),
    };
    let adapter_id = body.adapter_id.trim();
    match stored::owner(conn, adapter_id)? {
        Some(owner) if owner != submission.account => {
            return Ok(Err(format!("adapter {adapter_id} was published by another account")))
        }
        Some(_) => {}
        None if catalog.adapter_registry.adapters.iter().any(|a| a.adapter_id == adapter_id) => {
            return Ok(Err(format!("adapter {adapter_id} is already in the registry")))
        }
        None => {}
    }
    let description = body.manifest.get("meta").and_then(|m| m["description"].as_str()).unwrap_or_default();
    let entry = RegistryEntry {
        adapter_id: adapter_id.to_string(),
        adapter_name: body.adapter_name.trim().to_string(),
        entity: body.entity.trim().to_string(),
        category_id: category.id,
        version: body.package.version.trim().to_string(),
        description: description.to_string(),
        keywords: body.keywords.unwrap_or_default().iter().map(|k| k.trim().to_string()).collect(),
        manifest_topic_id: body.manifest_pointer.unwrap_or_default(),
        created_at: store::rfc3339(now),
    };
    let result = json!({"adapterId": entry.adapter_id, "categoryId": category.id, "categorySlug": category.slug});
    Ok(Ok((entry, result)))
}

/// The catalog with the categories and adapters stored since the build;
/// `None` when the build has them all.
async fn live_catalog(request: &Request) -> Result<Option<Catalog>, Error> {
    let broker = request.build()?.broker.as_deref().ok_or_else(|| Error::not_found(&request.path))?;
    if request.app.catalog_changes.get() <= broker.journal_seq {
        return Ok(None);
    }
    let seq = broker.journal_seq;
    let (categories, adapters) = request.app.store.read(move |conn| stored::after(conn, seq)).await?;
    let mut catalog = broker.catalog.clone();
    let registry = &mut catalog.adapter_registry;
    for category in categories {
        registry.categories.retain(|c| c.id != category.id);
        registry.categories.push(category);
    }
    for entry in adapters {
        registry.adapters.retain(|a| a.adapter_id != entry.adapter_id);
        registry.adapters.push(entry);
    }
    Ok(Some(catalog))
}

/// `GET /adapters/registry/categories`: the build's file, or with the
/// categories created since.
pub async fn categories(request: Request) -> Answer {
    super::agents(&request)?;
    match live_catalog(&request).await? {
        Some(catalog) => Ok(super::live(reply::json(&json!({"categories": catalog.adapter_registry.categories})))),
        None => crate::service::published(&request, render::CATEGORIES)
            .await
            .ok_or_else(|| super::missing(render::CATEGORIES)),
    }
}

/// `GET /adapters/registry/adapters`: the default page is a file; other
/// pages and filters, and everything while adapters published since the
/// build wait for the next, are computed from the catalog.
pub async fn adapters(request: Request) -> Answer {
    let (_, broker) = super::agents(&request)?;
    let query = EntryQuery::parse(&request.query)?;
    if let Some(catalog) = live_catalog(&request).await? {
        return Ok(super::live(reply::json(&render::registry_adapters(&catalog, &query))));
    }
    if query == EntryQuery::default() {
        return crate::service::published(&request, render::REGISTRY_ADAPTERS)
            .await
            .ok_or_else(|| super::missing(render::REGISTRY_ADAPTERS));
    }
    Ok(reply::json(&render::registry_adapters(&broker.catalog, &query)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::adapters::Status;

    #[test]
    fn slugs_are_lower_case_words_joined_by_single_hyphens() {
        for (slug, ok) in [
            ("defi", true),
            ("hcs-21-adapters", true),
            ("a", true),
            ("", false),
            ("Defi", false),
            ("-defi", false),
            ("defi-", false),
            ("de--fi", false),
            ("de fi", false),
        ] {
            assert_eq!(slug_ok(slug), ok, "{slug:?}");
        }
        assert!(!slug_ok(&"a".repeat(65)));
    }

    #[test]
    fn statuses_read_back() {
        for status in [Status::Pending, Status::Processing, Status::Completed, Status::Failed] {
            assert_eq!(status.as_str().parse::<Status>(), Ok(status));
        }
    }
}
