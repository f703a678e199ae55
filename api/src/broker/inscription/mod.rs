//! Content inscription (the spec's Content group; the hosted broker's
//! `/inscribe/content` operations, which the SDK's
//! `inscribeViaRegistryBroker` and `getRegistryBrokerQuote` call): content
//! written to a Hedera consensus topic as an HCS-1 file ([`hcs1`]) by the
//! broker's account, paid in credits.
//!
//! A quote prices some content (the network's fees for the topic and its
//! messages, in credits at the pricing file's rate) for
//! `--inscription-quote-ttl-secs`. A job is charged at its quote's price
//! (the caller's own, unexpired, for the same content, used once) or at a
//! price made then, answered 202, and run in the background ([`jobs`]);
//! it is `completed` only once its messages are read back from the mirror
//! node as the same bytes, and refunded if it fails. A request retried
//! with the same `Idempotency-Key` answers the job it made, charged once.
//! Without a configured network the config says `enabled: false` and the
//! other routes answer 503.

pub mod hcs1;
pub mod jobs;
pub mod ledger;
pub mod settings;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};
use shared::http::hex;
use warp::http::StatusCode;

use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::inscriptions::{self as stored, Created, Job, Quote, Status};
use crate::store::{self};

pub use settings::Settings;

/// The modes the hosted broker names; only `file` (a plain HCS-1 file) is
/// written here.
const MODES: &[&str] = &["file", "upload", "hashinal", "hashinal-collection"];

/// The settings, or 503 when no network is configured.
fn enabled(request: &Request) -> Result<&Settings, Error> {
    request.app.inscriptions.as_deref().ok_or_else(|| {
        Error::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_configured",
            "content inscription is not configured on this broker (no network)",
        )
    })
}

/// `GET /inscribe/content/config`.
pub async fn config(request: Request) -> Answer {
    Ok(reply::json(&match request.app.inscriptions.as_deref() {
        None => json!({"enabled": false}),
        Some(settings) => json!({
            "enabled": true,
            "maxSizeBytes": settings.max_bytes,
            "allowedMimeTypes": null,
        }),
    }))
}

/// A quote or job request (the hosted broker's
/// `ContentInscriptionQuoteRequest` and `…CreateRequest`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Input {
    input_type: String,
    url: Option<String>,
    base64: Option<String>,
    file_name: Option<String>,
    mime_type: Option<String>,
    mode: Option<String>,
    chunk_size: Option<u64>,
    /// Jobs only.
    quote_id: Option<String>,
    // Read and checked as the hosted broker's schema types them; a plain
    // HCS-1 file carries none of them, and a job is always followed on
    // its own route.
    #[serde(rename = "metadata")]
    _metadata: Option<serde_json::Map<String, Value>>,
    #[serde(rename = "tags")]
    _tags: Option<Vec<String>>,
    #[serde(rename = "fileStandard")]
    _file_standard: Option<String>,
    #[serde(rename = "waitForConfirmation")]
    _wait_for_confirmation: Option<bool>,
}

/// Content read from a request: its bytes, its mime type and its name.
struct Content {
    bytes: Vec<u8>,
    mime: String,
    file_name: Option<String>,
    mode: String,
}

fn too_large(max: usize) -> Error {
    Error::new(StatusCode::PAYLOAD_TOO_LARGE, "content_too_large", format!("the content is larger than {max} bytes"))
}

/// The content `input` names: its base64, or what its URL serves (through
/// the egress gate, within the size bound).
async fn content(request: &Request, input: &Input, settings: &Settings) -> Result<Content, Error> {
    let mode = input.mode.clone().unwrap_or_else(|| "file".into());
    if !MODES.contains(&mode.as_str()) {
        return Err(Error::invalid_body(format!("mode: expected one of {}", MODES.join(", "))).naming("mode"));
    }
    if mode != "file" {
        let message = format!("mode {mode:?} is not offered here: inscribe as \"file\"");
        return Err(Error::new(StatusCode::BAD_REQUEST, "mode_unsupported", message).naming("mode"));
    }
    if let Some(size) = input.chunk_size.filter(|n| *n == 0) {
        return Err(Error::invalid_body(format!("chunkSize: {size} is below 1")).naming("chunkSize"));
    }
    let max = settings.max_bytes;
    let (bytes, served) = match (input.input_type.as_str(), &input.base64, &input.url) {
        ("base64", Some(text), None) => {
            // Four characters for three bytes: refused before decoding.
            if text.len() / 4 * 3 > max + 3 {
                return Err(too_large(max));
            }
            let text = text.trim();
            let text = text.split_once(";base64,").map_or(text, |(_, data)| data);
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|_| Error::invalid_body("base64: not base64").naming("base64"))?;
            (bytes, None)
        }
        ("url", None, Some(url)) => fetch(request, url, max).await?,
        ("base64", _, _) => {
            return Err(Error::invalid_body("inputType base64 needs base64 (and no url)").naming("base64"))
        }
        ("url", _, _) => return Err(Error::invalid_body("inputType url needs url (and no base64)").naming("url")),
        _ => return Err(Error::invalid_body("inputType: expected base64 or url").naming("inputType")),
    };
    if bytes.len() > max {
        return Err(too_large(max));
    }
    if bytes.is_empty() {
        return Err(Error::invalid_body("the content is empty").naming(if input.url.is_some() {
            "url"
        } else {
            "base64"
        }));
    }
    let mime = input.mime_type.clone().or(served).unwrap_or_else(|| "application/octet-stream".into());
    let mime = mime.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let valid = mime.split_once('/').is_some_and(|(kind, sub)| {
        let token =
            |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b));
        token(kind) && token(sub)
    });
    if !valid {
        return Err(Error::invalid_body("mimeType: expected type/subtype").naming("mimeType"));
    }
    Ok(Content { bytes, mime, file_name: input.file_name.clone(), mode })
}

/// GETs `url` through the egress gate: the body (at most `max` bytes) and
/// its content type.
async fn fetch(request: &Request, url: &str, max: usize) -> Result<(Vec<u8>, Option<String>), Error> {
    let gate = &request.app.chat.gate;
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(Error::invalid_body("url: expected an absolute http(s) URL").naming("url"));
    }
    let response = match gate.get(url).send().await {
        Ok(response) => response,
        Err(crate::egress::Error::NotAllowed) => return Err(crate::egress::refusal().naming("url")),
        Err(e) => return Err(Error::new(StatusCode::BAD_GATEWAY, "url_unreachable", e.to_string()).naming("url")),
    };
    if !response.status().is_success() {
        let message = format!("{url} answered {}", response.status().as_u16());
        return Err(Error::new(StatusCode::BAD_GATEWAY, "url_unreachable", message).naming("url"));
    }
    let served = response.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
    let body = crate::chat::turn::read_bounded(response, max).await.map_err(|_| too_large(max))?;
    Ok((body.to_vec(), served))
}

/// The price of `content`: (messages, tinybars, credits, US cents).
fn price(request: &Request, settings: &Settings, content: &Content) -> Result<(i64, i64, i64, i64), Error> {
    let messages = hcs1::messages_for(&content.bytes, &content.mime).map_err(|e| {
        tracing::error!(error = %e, "inscriptions: compression failed");
        Error::new(StatusCode::INTERNAL_SERVER_ERROR, "compression_failed", "the content cannot be compressed")
    })? as i64;
    let fees = settings.ledger.fees;
    let tinybars = fees.topic as i64 + messages * fees.message as i64;
    let (credits, usd_cents) = charge(&request.app.pricing, tinybars);
    Ok((messages, tinybars, credits, usd_cents))
}

/// What `tinybars` of network fees cost a client: (credits, US cents), at
/// the pricing file's rates, each rounded up and at least 1.
pub fn charge(pricing: &crate::broker::pricing::Pricing, tinybars: i64) -> (i64, i64) {
    let per_hbar = |rate: f64| (tinybars as f64 / 1e8 * rate).ceil().max(1.0) as i64;
    (per_hbar(pricing.credits_per_hbar), per_hbar(pricing.cents_per_hbar))
}

/// `POST /inscribe/content/quote`.
pub async fn quote(request: Request) -> Answer {
    let settings = enabled(&request)?;
    let input: Input = parse_body(&request.body)?;
    let account = request.principal()?.billing(&request.headers)?;
    let content = content(&request, &input, settings).await?;
    let (messages, tinybars, credits, usd_cents) = price(&request, settings, &content)?;
    let now = store::now_ms();
    let quote = Quote {
        id: uuid(),
        account,
        content_hash: hcs1::hash(&content.bytes),
        size_bytes: content.bytes.len() as i64,
        mime: content.mime,
        mode: content.mode,
        messages,
        tinybars,
        credits,
        usd_cents,
        created_at: now,
        expires_at: now + settings.quote_ttl.as_millis() as i64,
    };
    let stored = quote.clone();
    request
        .app
        .store
        .write(move |conn| {
            stored::prune_quotes(conn, now - 86_400_000)?;
            stored::insert_quote(conn, &stored)
        })
        .await?;
    Ok(reply::json(&json!({
        "quoteId": quote.id,
        "contentHash": quote.content_hash,
        "sizeBytes": quote.size_bytes,
        "totalCostHbar": tinybars as f64 / 1e8,
        "credits": credits,
        "usdCents": usd_cents,
        "expiresAt": store::rfc3339(quote.expires_at),
        "mode": quote.mode,
        "rawQuote": {"messages": messages, "tinybars": tinybars, "network": settings.ledger.network},
    })))
}

/// What a stored quote says, as [`judge_quote`] reads it.
pub struct Terms<'a> {
    /// Whose it is.
    pub account: &'a str,
    pub expires_at: i64,
    /// Whether it was made for what the request sends.
    pub same: bool,
}

/// Quote `id` as stored (`found`), if it prices a request of `account`
/// at `now`: the account's (400 `quote_not_found` otherwise), unexpired
/// (`quote_expired`) and for the same content (`quote_mismatch`), as
/// `terms` reads it. Its single use is the store's to check.
pub fn judge_quote<Q>(
    id: &str,
    found: Option<Q>,
    account: &str,
    now: i64,
    terms: impl Fn(&Q) -> Terms<'_>,
) -> Result<Q, Error> {
    let refused = |code, message: String| Err(Error::new(StatusCode::BAD_REQUEST, code, message).naming("quoteId"));
    let Some(quote) = found else { return refused("quote_not_found", format!("no quote {id} of this account")) };
    let t = terms(&quote);
    if t.account != account {
        return refused("quote_not_found", format!("no quote {id} of this account"));
    }
    if now >= t.expires_at {
        return refused("quote_expired", "the quote has expired; ask for a new one".into());
    }
    if !t.same {
        return refused("quote_mismatch", "the quote was made for other content".into());
    }
    Ok(quote)
}

/// A random id in the form of a UUID (version 4), as the hosted broker's
/// quote and job ids are.
pub fn uuid() -> String {
    let mut bytes = store::random::<16>();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let h = hex(&bytes);
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

/// A job as answered (`ContentInscriptionJobStatusResponse`).
fn job_json(job: &Job, network: &str) -> Value {
    let completed = job.status == Status::Completed;
    json!({
        "jobId": job.id,
        "status": job.status.as_str(),
        "hrl": job.topic_id.as_deref().filter(|_| completed).map(hcs1::hrl),
        "topicId": job.topic_id.as_deref().filter(|_| completed),
        "transactionId": job.topic_tx,
        "failureReason": job.failure,
        "sizeBytes": job.size_bytes,
        "fileName": job.file_name,
        "mimeType": job.mime,
        "mode": job.mode,
        "quoteCredits": job.credits,
        "quoteUsdCents": job.usd_cents,
        "createdAt": store::rfc3339(job.created_at),
        "updatedAt": store::rfc3339(job.updated_at),
        "reservationId": null,
        "network": network,
    })
}

/// `POST /inscribe/content`: 202 with the job.
pub async fn create(request: Request) -> Answer {
    let settings = enabled(&request)?;
    let input: Input = parse_body(&request.body)?;
    let account = request.principal()?.billing(&request.headers)?;
    let key = crate::idempotency::for_route(&request, "inscription", &account, None)?;
    crate::idempotency::check(&request, key.as_ref()).await?;
    let content = content(&request, &input, settings).await?;
    let hash = hcs1::hash(&content.bytes);
    let now = store::now_ms();
    let (messages, credits, usd_cents, quote_id) = match &input.quote_id {
        Some(id) => {
            let key = id.clone();
            let quote = request.app.store.read(move |conn| stored::quote(conn, &key)).await?;
            let quote = judge_quote(id, quote, &account, now, |q| Terms {
                account: &q.account,
                expires_at: q.expires_at,
                same: q.content_hash == hash && q.mime == content.mime,
            })?;
            (quote.messages, quote.credits, quote.usd_cents, Some(quote.id))
        }
        None => {
            let (messages, _, credits, usd_cents) = price(&request, settings, &content)?;
            (messages, credits, usd_cents, None)
        }
    };
    let job = Job {
        id: uuid(),
        account,
        idempotency_key: key.as_ref().map(|k| k.key.clone()),
        quote_id,
        status: Status::Pending,
        mode: content.mode,
        file_name: content.file_name,
        mime: content.mime,
        size_bytes: content.bytes.len() as i64,
        content_hash: hash,
        messages,
        credits,
        usd_cents,
        topic_tx: None,
        topic_id: None,
        written: 0,
        pending_tx: None,
        failure: None,
        parent: None,
        created_at: now,
        updated_at: now,
    };
    let max_open = settings.max_open;
    let bytes = content.bytes;
    let created =
        request.app.store.write(move |conn| stored::create(conn, &job, &bytes, key.as_ref(), max_open)).await?;
    let job = match created {
        Created::Done(job) => {
            settings.wake.notify_one();
            job
        }
        Created::Replayed(job) => job,
        Created::Short { balance, shortfall } => return Err(super::register::short(credits, balance, shortfall)),
        Created::Busy(open) => {
            let message = format!("this account has {open} inscriptions running; wait for one to end");
            return Err(Error::new(StatusCode::TOO_MANY_REQUESTS, "too_many_jobs", message));
        }
        Created::QuoteUsed => {
            return Err(
                Error::new(StatusCode::CONFLICT, "quote_used", "the quote was used by another job").naming("quoteId")
            )
        }
        Created::KeyReused => return Err(crate::idempotency::reused()),
    };
    Ok(reply::json_with(StatusCode::ACCEPTED, &job_json(&job, &settings.ledger.network)))
}

/// The caller's job `id`, or 404 (another account's is not shown).
async fn own_job(request: &Request, id: &str) -> Result<Job, Error> {
    let principal = request.principal()?;
    let account = principal.billing(&request.headers)?;
    let key = id.to_string();
    let job = request.app.store.read(move |conn| stored::job(conn, &key)).await?;
    job.filter(|j| j.account == account || principal.operator)
        .ok_or_else(|| Error::new(StatusCode::NOT_FOUND, "job_not_found", format!("no inscription job {id}")))
}

/// `GET /inscribe/content/{jobId}`.
pub async fn job(request: Request) -> Answer {
    let settings = enabled(&request)?;
    let id = request.params.get("jobId").to_string();
    let job = own_job(&request, &id).await?;
    Ok(reply::json(&job_json(&job, &settings.ledger.network)))
}

/// `GET /inscribe/content`: the caller's jobs, newest first (`limit`
/// 1-100, default 20; `offset`; `status`).
pub async fn list(request: Request) -> Answer {
    let settings = enabled(&request)?;
    let account = request.principal()?.billing(&request.headers)?;
    let limit = request.query_number("limit", 1, 100)?.unwrap_or(20);
    let offset = request.query_number("offset", 0, 1_000_000)?.unwrap_or(0);
    let status = match request.query_value("status")? {
        None => None,
        Some(text) => Some(text.parse::<Status>().map_err(|_| {
            Error::parameter("status", format!("status: expected one of {}", stored::STATUSES.join(", ")))
        })?),
    };
    let (jobs, total) = request.app.store.read(move |conn| stored::jobs(conn, &account, status, limit, offset)).await?;
    let network = &settings.ledger.network;
    Ok(reply::json(&json!({
        "inscriptions": jobs.iter().map(|j| job_json(j, network)).collect::<Vec<_>>(),
        "total": total,
        "limit": limit,
        "offset": offset,
    })))
}
