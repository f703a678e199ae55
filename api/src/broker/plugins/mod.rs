//! The plugin catalog ([docs/plugins.md](../../../docs/plugins.md)):
//! plugins imported from repositories at pinned commits, each version
//! scanned as the reference scanner scans it and answered with its trust.
//!
//! An import ([`import`]) names a repository at a commit, an archive URL,
//! a marketplace source, or a marketplace listing many; its repositories
//! are claimed for the account at once (403 for another account's), and
//! a job then fetches each archive through the egress gate, unpacks it
//! within bounds, finds its plugins and stores a version of each. The
//! routes here read the store: the catalog with cursors that never repeat
//! (`seq` is fixed at a plugin's first import), a plugin's versions, its
//! badges. [`view`] is the one place a stored record becomes what a
//! client reads, trust included; the Guard trust routes
//! (`crate::guard::trust`) answer from it too.

pub mod import;
pub mod settings;
pub mod view;

pub use settings::Settings;

use serde_json::{json, Value};
use shared::timestamp::Timestamp;
use warp::http::StatusCode;

use crate::reply::{self, Answer, Error};
use crate::request::Request;
use crate::store::plugins as stored;

/// A catalog's filters, read from the query string.
struct Filter {
    category: Option<String>,
    ecosystem: Option<String>,
    owner_verified: Option<bool>,
    words: Vec<String>,
}

impl Filter {
    fn read(request: &Request) -> Result<Filter, Error> {
        let ecosystem = request.query_value("ecosystem")?;
        if let Some(e) = &ecosystem {
            if plugins::locate::Ecosystem::parse(e).is_none() {
                return Err(Error::parameter(
                    "ecosystem",
                    "ecosystem must be one of codex, claude-code, agent-plugins",
                ));
            }
        }
        let owner_verified = match request.query_value("ownerVerified")?.as_deref() {
            None => None,
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(_) => return Err(Error::parameter("ownerVerified", "ownerVerified: expected true or false")),
        };
        let words = request
            .query_value("q")?
            .map(|q| q.split_whitespace().map(str::to_lowercase).collect())
            .unwrap_or_default();
        Ok(Filter { category: request.query_value("category")?, ecosystem, owner_verified, words })
    }

    fn admits(&self, item: &Value) -> bool {
        let text = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default();
        self.category.as_deref().is_none_or(|c| text("category").eq_ignore_ascii_case(c))
            && self.ecosystem.as_deref().is_none_or(|e| text("ecosystem") == e)
            && self.owner_verified.is_none_or(|v| item["ownerVerified"].as_bool() == Some(v))
            && {
                let haystack = [text("slug"), text("name"), text("displayName"), text("description"), text("category")]
                    .join(" ")
                    .to_lowercase();
                self.words.iter().all(|w| haystack.contains(w.as_str()))
            }
    }
}

/// A catalog cursor: `p<seq>`, the last item's `seq`; items follow in
/// decreasing `seq`, which is fixed at a plugin's first import, so no item
/// comes twice across pages, whatever is imported meanwhile.
fn cursor(request: &Request) -> Result<Option<i64>, Error> {
    let Some(text) = request.query_value("cursor")? else { return Ok(None) };
    let seq = text.strip_prefix('p').and_then(|n| n.parse::<i64>().ok()).filter(|n| *n > 0);
    seq.map(Some).ok_or_else(|| Error::parameter("cursor", "cursor: expected the nextCursor of a catalog page"))
}

/// `GET /plugins/catalog`: plugins newest first, `limit` 1-100 (20),
/// `cursor`, and the filters `category`, `ecosystem`, `ownerVerified`,
/// `q` (words all found in the slug, name, description or category).
pub async fn catalog(request: Request) -> Answer {
    let limit = request.query_number("limit", 1, 100)?.unwrap_or(20);
    let after = cursor(&request)?;
    let filter = Filter::read(&request)?;
    let context = view::Context::of(&request);
    let listings = request.app.store.read(stored::listings).await?;
    let mut items = Vec::new();
    let mut next = None;
    for listing in listings.iter().filter(|l| after.is_none_or(|a| l.seq < a)) {
        let item = context.item(listing);
        if !filter.admits(&item) {
            continue;
        }
        if items.len() == limit {
            next = items.last().map(|(seq, _)| format!("p{seq}"));
            break;
        }
        items.push((listing.seq, item));
    }
    let items: Vec<Value> = items.into_iter().map(|(_, item)| item).collect();
    Ok(reply::json(&json!({"items": items, "nextCursor": next})))
}

fn not_found(slug: &str) -> Error {
    Error::new(StatusCode::NOT_FOUND, "plugin_not_found", format!("no plugin {slug}"))
}

/// The listing of the plugin `slug`, if there is one.
pub async fn listing(request: &Request, slug: &str) -> Result<Option<plugins::catalog::Listing>, Error> {
    let key = slug.to_string();
    Ok(request
        .app
        .store
        .read(move |conn| stored::plugin(conn, &key)?.map(|plugin| stored::listing(conn, plugin)).transpose())
        .await?)
}

/// `GET /plugins/{slug}` (`owner%2Fname`): the plugin with its latest
/// version's manifest, components, files, scan and trust, and every
/// version.
pub async fn plugin(request: Request) -> Answer {
    let slug = request.params.get("slug").to_ascii_lowercase();
    let listing = listing(&request, &slug).await?.ok_or_else(|| not_found(&slug))?;
    Ok(reply::json(&view::Context::of(&request).detail(&listing)))
}

/// The badge styles shields.io draws.
const BADGE_STYLES: [&str; 5] = ["flat", "flat-square", "plastic", "for-the-badge", "social"];

/// `GET /api/registry/badges/plugin?slug=&metric=trust|security&style=&label=`:
/// shields.io endpoint JSON; an unknown plugin is a badge with `isError`.
pub async fn badge(request: Request) -> Answer {
    let slug = request
        .query_value("slug")?
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::parameter("slug", "slug is required (owner/name)"))?;
    let metric = request.query_value("metric")?.unwrap_or_else(|| "trust".into());
    if !["trust", "security"].contains(&metric.as_str()) {
        return Err(Error::parameter("metric", "metric must be trust or security"));
    }
    let style = request.query_value("style")?;
    if style.as_deref().is_some_and(|s| !BADGE_STYLES.contains(&s)) {
        return Err(Error::parameter("style", format!("style must be one of {}", BADGE_STYLES.join(", "))));
    }
    let found = listing(&request, &slug).await?;
    let context = view::Context::of(&request);
    let (message, color, is_error) = match found.map(|l| context.trust(&l)) {
        None => ("not found".to_string(), "lightgrey", true),
        Some(trust) => {
            let score = match metric.as_str() {
                "security" => trust.safety_score,
                _ => Some(trust.trust_score),
            };
            match score {
                None => ("not scanned".to_string(), "lightgrey", false),
                Some(score) => (score.to_string(), badge_color(score), false),
            }
        }
    };
    let label = request.query_value("label")?.filter(|l| !l.is_empty()).unwrap_or(metric);
    let mut body = json!({"schemaVersion": 1, "label": label, "message": message, "color": color,
        "cacheSeconds": 300});
    if let Some(style) = style {
        body["style"] = json!(style);
    }
    if is_error {
        body["isError"] = json!(true);
    }
    Ok(reply::json(&body))
}

/// A score's colour, by the scanner's grade bands.
fn badge_color(score: u32) -> &'static str {
    match score {
        90.. => "brightgreen",
        80..=89 => "green",
        70..=79 => "yellowgreen",
        60..=69 => "orange",
        _ => "red",
    }
}

/// Whether the build holds every import, so that its files are served:
/// otherwise the catalog's files and pages are made from the store (as
/// Programmable Secrets' are). 404 for a build without the broker.
fn build_holds_every_import(request: &Request) -> Result<bool, Error> {
    let build = request.build()?;
    let broker = build.broker.as_deref().ok_or_else(|| Error::not_found(&request.path))?;
    Ok(request.app.plugin_changes.get() <= broker.journal_seq)
}

/// Every listing, and the newest change among them (the files' and the
/// list page's Last-Modified).
async fn listings(request: &Request) -> Result<(Vec<plugins::catalog::Listing>, Vec<Value>, Timestamp), Error> {
    let listings = request.app.store.read(stored::listings).await?;
    let context = view::Context::of(request);
    let items: Vec<Value> = listings.iter().map(|l| context.item(l)).collect();
    let newest = items.iter().map(pages::plugins::last_modified).max().unwrap_or_default();
    Ok((listings, items, newest))
}

/// `GET /plugins/plugins.json` and `/plugins/marketplace.json`: the
/// build's files, or made from the store when an import is newer.
pub async fn export(request: Request) -> Answer {
    let route = request.path.clone();
    if build_holds_every_import(&request)? {
        return crate::service::published(&request, &route).await.ok_or_else(|| Error::not_found(&request.path));
    }
    let (listings, _, newest) = listings(&request).await?;
    let body = plugins::catalog::export(&route, &listings, &newest.iso8601()[..10])
        .ok_or_else(|| Error::not_found(&request.path))?;
    let representation = shared::http::Representation::json(&body, newest, shared::http::Cache::Catalog);
    let made = reply::Representation::computed(representation)?;
    Ok(super::live(reply::representation(&request.method, &request.headers, &made)))
}

/// `GET /registry/plugins`: the catalog's page.
pub async fn list_page(request: Request) -> Answer {
    if build_holds_every_import(&request)? {
        return crate::service::page(request).await;
    }
    let (_, items, newest) = listings(&request).await?;
    let file = request.build()?.pages.plugin_list(&items, newest, pages::Made::Live);
    super::made_page(&request, file).map(super::live)
}

/// `GET /registry/plugins/{owner}/{name}`: a plugin's page.
pub async fn plugin_page(request: Request) -> Answer {
    if build_holds_every_import(&request)? {
        return crate::service::page(request).await;
    }
    let slug = format!("{}/{}", request.params.get("owner"), request.params.get("name")).to_ascii_lowercase();
    let listing = listing(&request, &slug).await?.ok_or_else(|| not_found(&slug))?;
    let file = request.build()?.pages.plugin(&view::Context::of(&request).detail(&listing), pages::Made::Live);
    super::made_page(&request, file).map(super::live)
}

/// `GET /registry/plugins/{owner}%2F{name}`, the hosted registry's
/// spelling: a permanent redirect to the page's path.
pub async fn slug_page(request: Request) -> Answer {
    let slug = request.params.get("slug").to_ascii_lowercase();
    let Some((owner, name)) = slug.split_once('/') else { return Err(not_found(&slug)) };
    let (route, _) = pages::routes::plugin(&format!("{owner}/{name}"));
    let location = warp::http::HeaderValue::from_str(&route).map_err(|_| not_found(&slug))?;
    let mut reply = reply::json_with(StatusCode::PERMANENT_REDIRECT, &json!({"location": route}));
    reply.headers_mut().insert(warp::http::header::LOCATION, location);
    Ok(reply)
}
