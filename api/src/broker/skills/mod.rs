//! The skills registry (the hosted broker's `/skills` operations; the
//! reference client's `broker-live.md` section 11): packages of skill
//! files, named and versioned by the account that first published them,
//! written to the ledger as HCS-26 says ([`hcs26`]) by the broker's
//! account and paid in credits.
//!
//! [`package`] reads and checks what a publisher sends. A quote prices a
//! package for `--skills-quote-ttl-secs`; a publish claims the version
//! (403 for another account's name, 409 for a version not above the
//! latest), charges it and answers 201 with a job that [`jobs`] runs: the
//! files and the manifest inscribed as HCS-1 files, the version
//! registered on the skill's version topic. Only a completed version is
//! listed, searched, voted on or shown on its page. The registry is on
//! when content inscription is (it writes through the same account);
//! otherwise its config says `enabled: false` and the rest answer 503.

pub mod hcs26;
pub mod jobs;
pub mod package;
pub mod pages;
pub mod settings;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use warp::http::StatusCode;

use crate::broker::inscription::{self, hcs1};
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::inscriptions::{Job as Part, Status};
use crate::store::skills::{
    self as stored, Claim, Filter, Job, Published, Quote, Requested, Review, Tier, Verification,
};
use crate::store::{self};
use package::{Package, Sent};

pub use settings::Settings;

/// A package as a publish job keeps it (the bytes are its parts'): what
/// the listing shows and the manifest says.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Listing {
    pub description: String,
    pub tags: Vec<String>,
    pub category: Option<String>,
    pub license: Option<String>,
    pub author: Option<String>,
    pub files: Vec<ListedFile>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListedFile {
    pub name: String,
    pub mime: String,
    pub role: String,
    /// SHA-256 of its bytes, hex.
    pub sha256: String,
    pub size: u64,
    /// The inscription job (a part) that writes it.
    pub part: String,
}

impl Listing {
    /// The package this listing was read from, without its bytes.
    pub fn package(&self, name: &str, version: &str) -> Result<Package, String> {
        Ok(Package {
            name: name.to_string(),
            version: semver::Version::parse(version).map_err(|e| format!("version {version}: {e}"))?,
            description: self.description.clone(),
            tags: self.tags.clone(),
            category: self.category.clone(),
            license: self.license.clone(),
            author: self.author.clone(),
            files: Vec::new(),
        })
    }
}

/// The registry's settings and the network it writes to, or 503.
fn enabled(request: &Request) -> Result<(&Settings, &inscription::Settings), Error> {
    match (request.app.skills.as_deref(), request.app.inscriptions.as_deref()) {
        (Some(skills), Some(inscriptions)) => Ok((skills, inscriptions)),
        _ => Err(Error::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_configured",
            "the skills registry is not configured on this broker (no network)",
        )),
    }
}

/// The directory topic, or 503 while it is not known (with why, as the
/// worker last found).
fn directory(skills: &Settings) -> Result<String, Error> {
    skills.directory.get().map(ToString::to_string).ok_or_else(|| {
        let problem = skills.directory_problem.lock().expect("the directory's problem").clone();
        let message = match problem {
            None => "the registry's directory topic is being made".to_string(),
            Some(why) => format!("the registry's directory topic is not known yet: {why}"),
        };
        Error::new(StatusCode::SERVICE_UNAVAILABLE, "directory_pending", message)
    })
}

/// `GET /skills/config`.
pub async fn config(request: Request) -> Answer {
    Ok(reply::json(&match enabled(&request) {
        Err(_) => json!({"enabled": false}),
        Ok((skills, inscriptions)) => json!({
            "enabled": true,
            "directoryTopicId": skills.directory.get().map(ToString::to_string),
            "maxFiles": skills.bounds.max_files,
            "maxTotalSizeBytes": skills.bounds.max_total_bytes,
            "allowedMimeTypes": null,
            "network": inscriptions.ledger.network,
        }),
    }))
}

/// A quote or publish request (`SkillRegistryQuoteRequest`,
/// `…PublishRequest`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Input {
    files: Vec<Sent>,
    directory_topic_id: Option<String>,
    /// The account to act as; `x-account-id` says it, as on every route.
    #[serde(rename = "accountId")]
    _account_id: Option<String>,
    /// Publish only.
    quote_id: Option<String>,
    #[serde(rename = "publisher")]
    _publisher: Option<String>,
}

/// A package read from `input`, within the registry's bounds and for its
/// directory.
fn read(skills: &Settings, inscriptions: &inscription::Settings, input: &Input) -> Result<(Package, String), Error> {
    let directory = directory(skills)?;
    if input.directory_topic_id.as_deref().is_some_and(|d| d.trim() != directory) {
        let message = format!("this registry's directory topic is {directory}");
        return Err(Error::invalid_body(message).naming("directoryTopicId"));
    }
    let package = package::read(&input.files, skills.bounds).map_err(|r| {
        let field = r.field.clone();
        Error::invalid_body(r.to_string()).naming(field)
    })?;
    if let Some(file) = package.files.iter().find(|f| f.bytes.len() > inscriptions.max_bytes) {
        let message = format!("{} is larger than {} bytes", file.name, inscriptions.max_bytes);
        return Err(Error::new(StatusCode::PAYLOAD_TOO_LARGE, "content_too_large", message).naming("files"));
    }
    // The directory entry is one message: measured with the longest topic id.
    if hcs26::register_skill(&package, "0.0.9999999999", "0.0.9999999999").len() > hcs1::MESSAGE_MAX {
        let message = "skill.json: the description, author and license do not fit one consensus message";
        return Err(Error::invalid_body(message).naming("skill.json.description"));
    }
    Ok((package, directory))
}

/// SHA-256 over a package's file names, roles, types and bytes: what a
/// quote is for.
fn package_hash(package: &Package) -> String {
    let mut text = Vec::new();
    for file in &package.files {
        text.extend_from_slice(
            format!("{}\0{}\0{}\0{}\0", file.name, file.role.as_str(), file.mime, hcs1::hash(&file.bytes)).as_bytes(),
        );
    }
    hcs1::hash(&text)
}

/// What publishing a package costs the network.
struct Fees {
    /// In all, tinybars.
    tinybars: i64,
    /// Each file's share, tinybars.
    each: Vec<i64>,
    /// The messages each file takes as an HCS-1 file.
    messages: Vec<usize>,
}

fn compression_failed(e: std::io::Error) -> Error {
    tracing::error!(error = %e, "skills: compression failed");
    Error::new(StatusCode::INTERNAL_SERVER_ERROR, "compression_failed", "a file cannot be compressed")
}

/// The network's fees for publishing `package`: each file's and the
/// manifest's topic and messages, the version's entry, and for a new
/// skill (`new`) its version topic and directory entry. Compresses each
/// file once.
fn fees(inscriptions: &inscription::Settings, package: &Package, new: bool) -> Result<Fees, Error> {
    let fees = inscriptions.ledger.fees;
    let file_fee = |messages: usize| fees.topic as i64 + messages as i64 * fees.message as i64;
    let messages = package
        .files
        .iter()
        .map(|f| hcs1::messages_for(&f.bytes, &f.mime).map_err(compression_failed))
        .collect::<Result<Vec<_>, _>>()?;
    let each: Vec<i64> = messages.iter().map(|m| file_fee(*m)).collect();
    let zeros = "0".repeat(64);
    let placeholder: Vec<hcs26::Written<'_>> = package
        .files
        .iter()
        .map(|f| hcs26::Written { path: &f.name, topic: "0.0.9999999999", sha256: &zeros, mime: &f.mime })
        .collect();
    let manifest = hcs26::manifest(package, "0.0.9999999999", &placeholder);
    let manifest = file_fee(hcs1::messages_for(&manifest, "application/json").map_err(compression_failed)?);
    let registry = fees.message as i64 + if new { fees.topic as i64 + fees.message as i64 } else { 0 };
    Ok(Fees { tinybars: each.iter().sum::<i64>() + manifest + registry, each, messages })
}

/// Whether `name` has no version topic yet (its publish makes one).
async fn new_skill(request: &Request, name: &str) -> Result<bool, Error> {
    let key = name.to_string();
    let found = request.app.store.read(move |conn| stored::name(conn, &key)).await?;
    Ok(found.is_none_or(|n| n.version_topic.is_none()))
}

/// 403: the name is another account's.
fn not_owner(name: &str) -> Error {
    let message = format!("the skill {name} belongs to another account");
    Error::new(StatusCode::FORBIDDEN, "not_skill_owner", message).naming("skill.json.name")
}

/// 409: the version is not above the latest published.
fn not_newer(name: &str, version: &str, latest: &str) -> Error {
    let message = format!("{name} {version} is not above the latest version, {latest}");
    Error::new(StatusCode::CONFLICT, "version_not_newer", message).naming("skill.json.version")
}

/// `POST /skills/quote`: refused as the publish would be (another
/// account's name, a version not above the latest), so a quote is only
/// given for what may be published.
pub async fn quote(request: Request) -> Answer {
    let (skills, inscriptions) = enabled(&request)?;
    let input: Input = parse_body(&request.body)?;
    let account = request.principal()?.billing(&request.headers)?;
    let (package, directory) = read(skills, inscriptions, &input)?;
    let (name, version, owner) = (package.name.clone(), package.version.clone(), account.clone());
    let verdict = request.app.store.read(move |conn| stored::may_publish(conn, &name, &version, &owner)).await?;
    match verdict {
        Claim::Taken => {}
        Claim::NotOwner { .. } => return Err(not_owner(&package.name)),
        Claim::NotNewer { latest } => return Err(not_newer(&package.name, &package.version.to_string(), &latest)),
    }
    let Fees { tinybars, each, .. } = fees(inscriptions, &package, new_skill(&request, &package.name).await?)?;
    let (credits, usd_cents) = inscription::charge(&request.app.pricing, tinybars);
    let now = store::now_ms();
    let quote = Quote {
        id: inscription::uuid(),
        account,
        package_hash: package_hash(&package),
        name: package.name.clone(),
        version: package.version.to_string(),
        credits,
        usd_cents,
        created_at: now,
        expires_at: now + skills.quote_ttl.as_millis() as i64,
    };
    let stored_quote = quote.clone();
    request.app.store.write(move |conn| stored::insert_quote(conn, &stored_quote)).await?;
    Ok(reply::json(&json!({
        "quoteId": quote.id,
        "name": quote.name,
        "version": quote.version,
        "directoryTopicId": directory,
        "expiresAt": store::rfc3339(quote.expires_at),
        "estimatedCostHbar": tinybars as f64 / 1e8,
        "credits": credits,
        "usdCents": usd_cents,
        "files": package.files.iter().zip(each).map(|(f, t)| json!({
            "name": f.name,
            "mimeType": f.mime,
            "estimatedCostHbar": t as f64 / 1e8,
        })).collect::<Vec<_>>(),
    })))
}

/// A part of publish job `job`: the inscription of one file, which takes
/// `messages` messages, charged with the job.
fn part(job: &Job, name: &str, mime: &str, content: &[u8], messages: usize) -> Part {
    Part {
        id: inscription::uuid(),
        account: job.account.clone(),
        idempotency_key: None,
        quote_id: None,
        status: Status::Pending,
        mode: "file".into(),
        file_name: Some(name.to_string()),
        mime: mime.to_string(),
        size_bytes: content.len() as i64,
        content_hash: hcs1::hash(content),
        messages: messages as i64,
        credits: 0,
        usd_cents: 0,
        topic_tx: None,
        topic_id: None,
        written: 0,
        pending_tx: None,
        failure: None,
        parent: Some(job.id.clone()),
        created_at: job.created_at,
        updated_at: job.created_at,
    }
}

/// `POST /skills/publish`: 201 with the job.
pub async fn publish(request: Request) -> Answer {
    let (skills, inscriptions) = enabled(&request)?;
    let input: Input = parse_body(&request.body)?;
    let account = request.principal()?.billing(&request.headers)?;
    let key = crate::idempotency::for_route(&request, "skill-publish", &account, None)?;
    crate::idempotency::check(&request, key.as_ref()).await?;
    let (package, _) = read(skills, inscriptions, &input)?;
    let now = store::now_ms();
    let hash = package_hash(&package);
    let Fees { tinybars, messages, .. } = fees(inscriptions, &package, new_skill(&request, &package.name).await?)?;
    let (credits, usd_cents, quote_id) = match &input.quote_id {
        None => {
            let (credits, usd_cents) = inscription::charge(&request.app.pricing, tinybars);
            (credits, usd_cents, None)
        }
        Some(id) => {
            let key = id.clone();
            let quote = request.app.store.read(move |conn| stored::quote(conn, &key)).await?;
            let quote = inscription::judge_quote(id, quote, &account, now, |q| inscription::Terms {
                account: &q.account,
                expires_at: q.expires_at,
                same: q.package_hash == hash,
            })?;
            (quote.credits, quote.usd_cents, Some(quote.id))
        }
    };
    let mut job = Job {
        id: inscription::uuid(),
        account,
        idempotency_key: key.as_ref().map(|k| k.key.clone()),
        quote_id,
        name: package.name.clone(),
        version: package.version.to_string(),
        status: Status::Pending,
        listing: String::new(),
        terms: std::iter::once(package.name.as_str())
            .chain([package.description.as_str()])
            .chain(package.tags.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("\n")
            .to_lowercase(),
        credits,
        usd_cents,
        tinybars,
        manifest_job: None,
        version_tx: None,
        version_seq: None,
        failure: None,
        created_at: now,
        updated_at: now,
    };
    let mut parts = Vec::with_capacity(package.files.len());
    let mut files = Vec::with_capacity(package.files.len());
    for (file, messages) in package.files.iter().zip(messages) {
        let part = part(&job, &file.name, &file.mime, &file.bytes, messages);
        files.push(ListedFile {
            name: file.name.clone(),
            mime: file.mime.clone(),
            role: file.role.as_str().to_string(),
            sha256: part.content_hash.clone(),
            size: file.bytes.len() as u64,
            part: part.id.clone(),
        });
        parts.push((part, file.bytes.clone()));
    }
    let listing = Listing {
        description: package.description.clone(),
        tags: package.tags.clone(),
        category: package.category.clone(),
        license: package.license.clone(),
        author: package.author.clone(),
        files,
    };
    job.listing = serde_json::to_string(&listing).expect("a listing serialises");
    let max_open = skills.max_open;
    let stored_job = job.clone();
    let published =
        request.app.store.write(move |conn| stored::publish(conn, &stored_job, &parts, key.as_ref(), max_open)).await?;
    let (job, status) = match published {
        Published::Done(job) => {
            skills.wake.notify_one();
            (job, StatusCode::CREATED)
        }
        Published::Replayed(job) => (job, StatusCode::OK),
        Published::NotOwner { .. } => return Err(not_owner(&job.name)),
        Published::NotNewer { latest } => return Err(not_newer(&job.name, &job.version, &latest)),
        Published::KeyReused => return Err(crate::idempotency::reused()),
        Published::Short { balance, shortfall } => return Err(super::register::short(credits, balance, shortfall)),
        Published::Busy(open) => {
            let message = format!("this account has {open} skills being published; wait for one to end");
            return Err(Error::new(StatusCode::TOO_MANY_REQUESTS, "too_many_jobs", message));
        }
        Published::QuoteUsed => {
            return Err(
                Error::new(StatusCode::CONFLICT, "quote_used", "the quote was used by another job").naming("quoteId")
            )
        }
    };
    Ok(reply::json_with(
        status,
        &json!({
            "jobId": job.id,
            "status": job.status.as_str(),
            "createdAt": store::rfc3339(job.created_at),
            "updatedAt": store::rfc3339(job.updated_at),
            "network": inscriptions.ledger.network,
            "credits": job.credits,
            "usdCents": job.usd_cents,
            "quoteId": job.quote_id,
        }),
    ))
}

/// `value` without its null fields: the client's schemas type most of a
/// summary's fields as optional but not nullable.
fn present(mut value: Value) -> Value {
    if let Value::Object(fields) = &mut value {
        fields.retain(|_, v| !v.is_null());
    }
    value
}

/// What a job or a published version shows, read together.
struct Shown {
    job: Job,
    listing: Listing,
    name: Option<stored::Name>,
    parts: HashMap<String, Part>,
    upvotes: u64,
}

async fn shown(request: &Request, jobs: Vec<Job>) -> Result<Vec<Shown>, Error> {
    request
        .app
        .store
        .read(move |conn| {
            jobs.into_iter()
                .map(|job| {
                    let listing: Listing = serde_json::from_str(&job.listing)
                        .map_err(|e| store::Failure::Corrupt(format!("skill job {}: {e}", job.id)))?;
                    let name = stored::name(conn, &job.name)?;
                    let parts = stored::parts(conn, &job.id)?.into_iter().map(|p| (p.id.clone(), p)).collect();
                    let (upvotes, _) = stored::votes(conn, &job.name, None)?;
                    Ok(Shown { job, listing, name, parts, upvotes })
                })
                .collect()
        })
        .await
        .map_err(Error::from)
}

impl Shown {
    fn topic(&self, part: &str) -> Option<&str> {
        self.parts.get(part).filter(|p| p.status == Status::Completed).and_then(|p| p.topic_id.as_deref())
    }

    fn files(&self) -> Value {
        self.listing
            .files
            .iter()
            .map(|f| {
                let topic = self.topic(&f.part);
                present(json!({
                    "name": f.name,
                    "mimeType": f.mime,
                    "role": f.role,
                    "topicId": topic,
                    "hrl": topic.map(hcs1::hrl),
                }))
            })
            .collect()
    }

    fn file_hrl(&self, role: &str) -> Option<String> {
        self.listing.files.iter().find(|f| f.role == role).and_then(|f| self.topic(&f.part)).map(hcs1::hrl)
    }

    fn manifest_hrl(&self) -> Option<String> {
        self.job.manifest_job.as_deref().and_then(|m| self.topic(m)).map(hcs1::hrl)
    }

    fn verified(&self) -> bool {
        self.name.as_ref().is_some_and(|n| n.verified)
    }

    /// A published version (`SkillRegistryPublishSummary` and the
    /// client's optional fields).
    fn summary(&self, network: &str, directory: &str, with_files: bool) -> Value {
        let version_topic = self.name.as_ref().and_then(|n| n.version_topic.clone());
        let mut summary = present(json!({
            "jobId": self.job.id,
            "network": network,
            "name": self.job.name,
            "version": self.job.version,
            "description": self.listing.description,
            "createdAt": store::rfc3339(self.job.created_at),
            "directoryTopicId": directory,
            "directorySequenceNumber": self.name.as_ref().and_then(|n| n.skill_uid),
            "versionRegistryTopicId": version_topic,
            "packageTopicId": version_topic.clone().unwrap_or_default(),
            "skillJsonHrl": self.file_hrl("skill-json").unwrap_or_default(),
            "skillUid": self.name.as_ref().and_then(|n| n.skill_uid),
            "manifestHrl": self.manifest_hrl(),
            "iconHcs1": self.file_hrl("skill-icon"),
            "tags": self.listing.tags,
            "category": self.listing.category,
            "verified": self.verified(),
            "upvotes": self.upvotes,
            "publisher": self.job.account,
        }));
        if with_files {
            summary["files"] = self.files();
        }
        summary
    }

    /// A job as it stands (`SkillRegistryJobStatusResponse`).
    fn job_status(&self, network: &str, directory: &str) -> Value {
        let completed = self.job.status == Status::Completed;
        json!({
            "jobId": self.job.id,
            "status": self.job.status.as_str(),
            "network": network,
            "name": self.job.name,
            "version": self.job.version,
            "directoryTopicId": directory,
            "directorySequenceNumber": self.name.as_ref().and_then(|n| n.skill_uid).filter(|_| completed),
            "skillUid": self.name.as_ref().and_then(|n| n.skill_uid).filter(|_| completed),
            "packageTopicId": self.name.as_ref().and_then(|n| n.version_topic.clone()).filter(|_| completed),
            "versionRegistryTopicId": self.name.as_ref().and_then(|n| n.version_topic.clone()).filter(|_| completed),
            "manifestHrl": self.manifest_hrl().filter(|_| completed),
            "skillJsonHrl": self.file_hrl("skill-json"),
            "files": self.files(),
            "quoteCredits": self.job.credits,
            "quoteUsdCents": self.job.usd_cents,
            "reservationId": null,
            "totalCostHbar": self.job.tinybars as f64 / 1e8,
            "totalCostCredits": self.job.credits,
            "failureReason": self.job.failure,
            "createdAt": store::rfc3339(self.job.created_at),
            "updatedAt": store::rfc3339(self.job.updated_at),
        })
    }
}

/// `GET /skills/jobs/{jobId}`: the caller's job (another account's is
/// 404).
pub async fn job(request: Request) -> Answer {
    let (skills, inscriptions) = enabled(&request)?;
    let principal = request.principal()?;
    let account = principal.billing(&request.headers)?;
    let id = request.params.get("jobId").to_string();
    let key = id.clone();
    let job = request.app.store.read(move |conn| stored::job(conn, &key)).await?;
    let job = job
        .filter(|j| j.account == account || principal.operator)
        .ok_or_else(|| Error::new(StatusCode::NOT_FOUND, "job_not_found", format!("no skill publish job {id}")))?;
    let shown = shown(&request, vec![job]).await?;
    Ok(reply::json(&shown[0].job_status(&inscriptions.ledger.network, &directory(skills)?)))
}

/// A listing's cursor: `<created ms>.<job id>`.
fn cursor(request: &Request) -> Result<Option<stored::Cursor>, Error> {
    let Some(text) = request.query_value("cursor")? else { return Ok(None) };
    let read = text.split_once('.').and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id.to_string())));
    read.map(Some).ok_or_else(|| Error::parameter("cursor", "cursor: expected the nextCursor of a listing"))
}

fn next_cursor(jobs: &[Job], limit: usize) -> Option<String> {
    (jobs.len() == limit).then(|| jobs.last().map(|j| format!("{}.{}", j.created_at, j.id))).flatten()
}

fn flag(request: &Request, name: &'static str) -> Result<bool, Error> {
    match request.query_value(name)?.as_deref() {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(Error::parameter(name, format!("{name}: expected true or false"))),
    }
}

/// `GET /skills`: published versions, newest first (`name`: that skill's
/// versions; otherwise each skill's latest), `version`, `accountId` (the
/// publisher), `q` (words found in the name, description or tags),
/// `limit` 1-50, `cursor`, `includeFiles`.
pub async fn list(request: Request) -> Answer {
    let (skills, inscriptions) = enabled(&request)?;
    let limit = request.query_number("limit", 1, 50)?.unwrap_or(20);
    let filter = Filter {
        name: request.query_value("name")?.map(|n| n.trim().to_string()),
        version: request.query_value("version")?.map(|v| v.trim().to_string()),
        account: request.query_value("accountId")?.map(|a| a.trim().to_string()),
        words: words(request.query_value("q")?.as_deref().unwrap_or_default()),
    };
    let with_files = flag(&request, "includeFiles")?;
    let after = cursor(&request)?;
    let jobs = request.app.store.read(move |conn| stored::published(conn, &filter, after.as_ref(), limit)).await?;
    let next = next_cursor(&jobs, limit);
    let (network, directory) = (&inscriptions.ledger.network, directory(skills)?);
    let items: Vec<Value> =
        shown(&request, jobs).await?.iter().map(|s| s.summary(network, &directory, with_files)).collect();
    Ok(reply::json(&json!({"items": items, "nextCursor": next})))
}

/// A search's words: lower case, at most 8.
pub fn words(q: &str) -> Vec<String> {
    q.split_whitespace().take(8).map(str::to_lowercase).collect()
}

/// The query parameter `name`, which the route needs.
fn name_parameter(request: &Request) -> Result<String, Error> {
    request
        .query_value("name")?
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Error::parameter("name", "name: the skill's name is required"))
}

fn no_skill(name: &str) -> Error {
    Error::new(StatusCode::NOT_FOUND, "skill_not_found", format!("no published skill {name}"))
}

/// The versions of a skill a listing of them all shows at most.
const ALL_VERSIONS: usize = 1000;

/// `name`'s published versions, newest first, at most `limit` (404 when
/// there are none; 1 says whether it is published).
async fn versions_of(request: &Request, name: &str, limit: usize) -> Result<Vec<Job>, Error> {
    let filter = Filter { name: Some(name.to_string()), ..Filter::default() };
    let jobs = request.app.store.read(move |conn| stored::published(conn, &filter, None, limit)).await?;
    if jobs.is_empty() {
        return Err(no_skill(name));
    }
    Ok(jobs)
}

/// `GET /skills/versions?name=`.
pub async fn versions(request: Request) -> Answer {
    enabled(&request)?;
    let name = name_parameter(&request)?;
    let jobs = versions_of(&request, &name, ALL_VERSIONS).await?;
    let key = name.clone();
    let verified = request.app.store.read(move |conn| stored::name(conn, &key)).await?.is_some_and(|n| n.verified);
    let items: Vec<Value> = jobs
        .iter()
        .map(|j| json!({"jobId": j.id, "version": j.version, "createdAt": store::rfc3339(j.created_at), "verified": verified}))
        .collect();
    Ok(reply::json(&json!({"name": name, "items": items})))
}

/// The caller's skills (`SkillRegistryMineItem`s), at most `limit`.
async fn mine_items(request: &Request, account: String, limit: usize) -> Result<Vec<Value>, Error> {
    let owned = request
        .app
        .store
        .read(move |conn| {
            let mut owned = Vec::new();
            for name in stored::owned(conn, &account, limit)? {
                let filter = Filter { name: Some(name.name.clone()), ..Filter::default() };
                owned.push((name, stored::published(conn, &filter, None, ALL_VERSIONS)?));
            }
            Ok(owned)
        })
        .await?;
    let owned: Vec<_> = owned.into_iter().filter(|(_, jobs)| !jobs.is_empty()).collect();
    let latest = shown(request, owned.iter().map(|(_, jobs)| jobs[0].clone()).collect()).await?;
    Ok(owned
        .iter()
        .zip(&latest)
        .map(|((name, jobs), latest)| {
            present(json!({
                "name": name.name,
                "latestVersion": latest.job.version,
                "latestCreatedAt": store::rfc3339(latest.job.created_at),
                "versions": jobs.iter().map(|j| j.version.clone()).collect::<Vec<_>>(),
                "verified": name.verified,
                "iconHcs1": latest.file_hrl("skill-icon"),
            }))
        })
        .collect())
}

/// `GET /skills/mine?limit`.
pub async fn mine(request: Request) -> Answer {
    enabled(&request)?;
    let account = request.principal()?.billing(&request.headers)?;
    let limit = request.query_number("limit", 1, 100)?.unwrap_or(20);
    Ok(reply::json(&json!({"items": mine_items(&request, account, limit).await?})))
}

/// `GET /skills/my-list?limit&cursor`: the caller's skills, and the
/// latest versions of those it upvoted (newest vote first).
pub async fn my_list(request: Request) -> Answer {
    let (skills, inscriptions) = enabled(&request)?;
    let account = request.principal()?.billing(&request.headers)?;
    let limit = request.query_number("limit", 1, 100)?.unwrap_or(20);
    let after = cursor(&request)?;
    let owned = mine_items(&request, account.clone(), limit).await?;
    let votes = request.app.store.read(move |conn| stored::upvoted(conn, &account, after.as_ref(), limit)).await?;
    let next = (votes.len() == limit).then(|| votes.last().map(|(at, name)| format!("{at}.{name}"))).flatten();
    let latest = request
        .app
        .store
        .read(move |conn| {
            let mut jobs = Vec::new();
            for (_, name) in &votes {
                let filter = Filter { name: Some(name.clone()), ..Filter::default() };
                jobs.extend(stored::published(conn, &filter, None, 1)?);
            }
            Ok(jobs)
        })
        .await?;
    let (network, directory) = (&inscriptions.ledger.network, directory(skills)?);
    let upvoted: Vec<Value> =
        shown(&request, latest).await?.iter().map(|s| s.summary(network, &directory, false)).collect();
    Ok(reply::json(&json!({
        "owned": {"items": owned},
        "upvoted": {"items": upvoted, "nextCursor": next},
    })))
}

/// `GET /skills/ownership?name&accountId`: whether the name is taken, and
/// by `accountId` (or the caller).
pub async fn ownership(request: Request) -> Answer {
    enabled(&request)?;
    let name = name_parameter(&request)?;
    let asked = match request.query_value("accountId")? {
        Some(account) => Some(account.trim().to_string()),
        None => request.principal.as_ref().and_then(|p| p.account.clone()),
    };
    let key = name.clone();
    let owner = request.app.store.read(move |conn| stored::owner(conn, &key)).await?;
    Ok(reply::json(&json!({
        "name": name,
        "exists": owner.is_some(),
        "isOwner": owner.is_some() && owner == asked,
    })))
}

async fn vote_answer(request: &Request, name: String, account: Option<String>) -> Answer {
    let key = name.clone();
    let (upvotes, mine) = request.app.store.read(move |conn| stored::votes(conn, &key, account.as_deref())).await?;
    Ok(reply::json(&json!({"name": name, "upvotes": upvotes, "hasUpvoted": mine})))
}

/// `GET /skills/vote?name=`.
pub async fn vote_status(request: Request) -> Answer {
    enabled(&request)?;
    let name = name_parameter(&request)?;
    versions_of(&request, &name, 1).await?;
    let account = request.principal.as_ref().and_then(|p| p.account.clone());
    vote_answer(&request, name, account).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Vote {
    name: String,
    upvoted: bool,
}

/// `POST /skills/vote` `{name, upvoted}`: one upvote per account.
pub async fn vote(request: Request) -> Answer {
    enabled(&request)?;
    let vote: Vote = parse_body(&request.body)?;
    let account = request.principal()?.billing(&request.headers)?;
    let name = vote.name.trim().to_string();
    versions_of(&request, &name, 1).await.map_err(|e| e.naming("name"))?;
    let (key, voter, at) = (name.clone(), account.clone(), store::now_ms());
    request.app.store.write(move |conn| stored::vote(conn, &key, &voter, vote.upvoted, at)).await?;
    vote_answer(&request, name, Some(account)).await
}

/// A verification request as answered (`SkillVerificationRequest`).
fn verification_json(v: &Verification, network: &str) -> Value {
    let approved = v.status == Review::Approved;
    present(json!({
        "id": v.id,
        "network": network,
        "name": v.name,
        "version": v.version,
        "tier": v.tier.as_str(),
        "status": v.status.as_str(),
        "usdCents": v.usd_cents,
        "creditsCharged": v.credits,
        "creditAccountId": v.account,
        "requestedBy": {"accountId": v.account},
        "approvedBy": v.decided_by.as_deref().filter(|_| approved).map(|by| json!({"userId": by})),
        "approvedAt": v.decided_at.filter(|_| approved).map(store::rfc3339),
        "createdAt": store::rfc3339(v.created_at),
        "updatedAt": store::rfc3339(v.updated_at),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerificationInput {
    name: String,
    tier: String,
}

/// `POST /skills/verification/request` `{name, tier}`: by the skill's
/// owner, charged by tier; one pending at a time (409).
pub async fn request_verification(request: Request) -> Answer {
    let (skills, inscriptions) = enabled(&request)?;
    let input: VerificationInput = parse_body(&request.body)?;
    let account = request.principal()?.billing(&request.headers)?;
    let tier: Tier = input.tier.parse().map_err(|_| {
        Error::invalid_body(format!("tier: expected one of {}", stored::TIERS.join(", "))).naming("tier")
    })?;
    let name = input.name.trim().to_string();
    let latest = versions_of(&request, &name, 1).await.map_err(|e| e.naming("name"))?;
    let key = name.clone();
    let owner = request.app.store.read(move |conn| stored::owner(conn, &key)).await?;
    if owner.as_deref() != Some(account.as_str()) {
        return Err(Error::forbidden(format!("only the owner of {name} may ask for its verification")));
    }
    let credits = match tier {
        Tier::Basic => skills.verification_credits.basic,
        Tier::Express => skills.verification_credits.express,
    };
    let pricing = &request.app.pricing;
    let usd_cents = (credits as f64 * pricing.cents_per_hbar / pricing.credits_per_hbar).ceil() as i64;
    let now = store::now_ms();
    let asked = Verification {
        id: inscription::uuid(),
        name,
        account,
        tier,
        status: Review::Pending,
        version: latest.first().map(|j| j.version.clone()),
        credits,
        usd_cents,
        decided_by: None,
        decided_at: None,
        created_at: now,
        updated_at: now,
    };
    let stored_request = asked.clone();
    let network = &inscriptions.ledger.network;
    match request.app.store.write(move |conn| stored::request_verification(conn, &stored_request)).await? {
        Requested::Done(v) => Ok(reply::json(&json!({"request": verification_json(&v, network)}))),
        Requested::Pending(v) => Err(Error::new(
            StatusCode::CONFLICT,
            "verification_pending",
            format!("request {} for {} is pending already", v.id, v.name),
        )),
        Requested::Short { balance, shortfall } => Err(super::register::short(credits, balance, shortfall)),
    }
}

/// `GET /skills/verification/status?name=`.
pub async fn verification_status(request: Request) -> Answer {
    let (_, inscriptions) = enabled(&request)?;
    let name = name_parameter(&request)?;
    versions_of(&request, &name, 1).await?;
    let key = name.clone();
    let (found, requests) =
        request.app.store.read(move |conn| Ok((stored::name(conn, &key)?, stored::verifications(conn, &key)?))).await?;
    let network = &inscriptions.ledger.network;
    Ok(reply::json(&json!({
        "name": name,
        "verified": found.is_some_and(|n| n.verified),
        "previouslyVerified": requests.iter().any(|r| r.status == Review::Approved),
        "pendingRequest": requests.iter().find(|r| r.status == Review::Pending).map(|r| verification_json(r, network)),
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    status: String,
}

/// `POST /skills/verification/{requestId}/decision` `{status: approved |
/// rejected}`: the operator's review of a pending request (the fee is
/// for the review, and is kept either way).
pub async fn decide(request: Request) -> Answer {
    let (_, inscriptions) = enabled(&request)?;
    let decision: Decision = parse_body(&request.body)?;
    let status = match decision.status.parse::<Review>() {
        Ok(status @ (Review::Approved | Review::Rejected)) => status,
        _ => return Err(Error::invalid_body("status: expected approved or rejected").naming("status")),
    };
    let id = request.params.get("requestId").to_string();
    let (key, at) = (id.clone(), store::now_ms());
    let decided = request.app.store.write(move |conn| stored::decide(conn, &key, status, "operator", at)).await?;
    let decided = decided.ok_or_else(|| {
        Error::new(StatusCode::NOT_FOUND, "request_not_found", format!("no pending verification request {id}"))
    })?;
    Ok(reply::json(&json!({"request": verification_json(&decided, &inscriptions.ledger.network)})))
}
