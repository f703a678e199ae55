//! Builds on S3-compatible object storage, so that api replicas need no
//! shared disk and a CDN can serve a build's files.
//!
//! ```text
//! <prefix>/objects/<etag>-<headers>   a route's bytes, content-addressed; its
//!                                     Content-Type, Cache-Control and ETag as
//!                                     the object's metadata
//! <prefix>/builds/<id>/_manifest.idx  the build's index, its host
//!                                     configurations, and, written last,
//! <prefix>/builds/<id>/_manifest.json its manifest: a build whose manifest is
//!                                     there is there whole
//! <prefix>/search/<id>/...            its search folder
//! <prefix>/snapshots/<name>.duckdb    its snapshot
//! <prefix>/current                    the live build's id, replaced only once
//!                                     the build it names is there whole
//! ```
//!
//! An object's key is its bytes' hash (the route's ETag) and its headers',
//! so a file unchanged since the last build is not uploaded again, and two
//! routes with the same bytes but other headers are two objects. Nothing is
//! ever overwritten but `current`; a publish interrupted at any point
//! leaves the previous build live and whole, and the next publish uploads
//! only what is missing.
//!
//! The bucket is the operator's, named by a URL (`s3://bucket/prefix`) and
//! reached with the AWS SDKs' environment variables (`AWS_ENDPOINT_URL`,
//! `AWS_REGION`, `AWS_ACCESS_KEY_ID`, ...): never a place a client names, so
//! it is not behind the api's egress gate.

mod fetch;
mod publish;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt};

pub use fetch::ObjectCache;
pub use publish::Published;

/// How the bucket is reached: every bound of a transfer.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    /// Objects moved at once.
    pub concurrency: usize,
    /// One request, from sending it to its body's end.
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
}

impl Default for Transfer {
    fn default() -> Transfer {
        Transfer { concurrency: 16, request_timeout: Duration::from_secs(60), connect_timeout: Duration::from_secs(5) }
    }
}

/// A bucket and prefix builds are published under.
pub struct Bucket {
    store: Arc<dyn ObjectStore>,
    /// The prefix, `""` for the bucket's root.
    prefix: String,
    transfer: Transfer,
    url: String,
}

/// The object key of a route's bytes: its ETag's 32 hex digits, and 8 of
/// the SHA-256 of its `Content-Type` and `Cache-Control`.
pub fn object_key(etag_hex: &str, content_type: &str, cache_control: &str) -> String {
    debug_assert!(etag_hex.len() == 32 && etag_hex.bytes().all(|b| b.is_ascii_hexdigit()), "{etag_hex}");
    let headers = shared::manifest::etag(format!("{content_type}\n{cache_control}").as_bytes());
    // The quoted ETag's first 8 hex digits.
    format!("{etag_hex}-{}", &headers.as_str()[1..9])
}

/// The object key of a manifest entry's bytes.
pub fn entry_key(entry: &shared::manifest::Entry) -> String {
    object_key(entry.etag.as_str().trim_matches('"'), entry.content_type, entry.cache_control)
}

/// The object key of an index record's bytes.
pub fn record_key(record: &shared::index::Record) -> String {
    object_key(&shared::http::hex(&record.etag), record.content_type, record.cache_control)
}

impl Bucket {
    /// The bucket `url` names (`s3://bucket/prefix`), reached as the AWS
    /// environment variables say. Nothing is sent yet.
    pub fn open(url: &str, transfer: Transfer) -> Result<Bucket> {
        Bucket::open_with(url, transfer, std::env::vars())
    }

    /// [`Bucket::open`] reached as `variables` say, named as the AWS
    /// environment variables are (others are ignored).
    pub fn open_with(
        url: &str,
        transfer: Transfer,
        variables: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Bucket> {
        let parsed = url::Url::parse(url).with_context(|| format!("{url} is not a URL"))?;
        anyhow::ensure!(parsed.scheme() == "s3", "{url}: a bucket is named s3://bucket/prefix");
        let mut builder = AmazonS3Builder::new();
        for (name, value) in variables {
            if name.starts_with("AWS_") {
                if let Ok(key) = name.to_ascii_lowercase().parse() {
                    builder = builder.with_config(key, value);
                }
            }
        }
        let store = builder
            .with_url(url)
            .with_http_connector(Connector(transfer))
            .build()
            .with_context(|| format!("opening {url}"))?;
        let prefix = parsed.path().trim_matches('/').to_string();
        Ok(Bucket { store: Arc::new(store), prefix, transfer, url: url.to_string() })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The key of `relative` under the prefix.
    fn key(&self, relative: &str) -> Key {
        match self.prefix.is_empty() {
            true => Key::from(relative),
            false => Key::from(format!("{}/{relative}", self.prefix)),
        }
    }

    /// The live build's id, `None` when nothing is published.
    pub async fn current(&self) -> Result<Option<String>> {
        let Some(bytes) = self.get_if_there("current").await? else { return Ok(None) };
        let id = std::str::from_utf8(&bytes).context("the current build's id is not text")?.trim().to_string();
        anyhow::ensure!(
            !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric()),
            "the pointer names no build: {id:?}"
        );
        Ok(Some(id))
    }

    /// Whether build `id` is there whole (its manifest, written last, is).
    pub async fn has_build(&self, id: &str) -> Result<bool> {
        self.exists(&format!("builds/{id}/{}", shared::manifest::FILE_NAME)).await
    }

    /// Whether object `relative` is there (one `HEAD`).
    async fn exists(&self, relative: &str) -> Result<bool> {
        let head = found(self.store.head(&self.key(relative)).await);
        Ok(head.with_context(|| format!("asking {} for {relative}", self.url))?.is_some())
    }

    /// Object `relative` (`objects/<key>`, `builds/<id>/_manifest.json`,
    /// ...) as a CDN in front of the bucket would send it: its bytes and
    /// the headers stored with it. `None` when there is no such object.
    pub async fn read(&self, relative: &str) -> Result<Option<Stored>> {
        let read = async {
            let got = self.store.get(&self.key(relative)).await?;
            let attributes = got.attributes.clone();
            Ok((got.bytes().await?, attributes))
        };
        let read = found(read.await).with_context(|| format!("reading {relative} from {}", self.url))?;
        let Some((bytes, attributes)) = read else { return Ok(None) };
        let text = |attribute: &object_store::Attribute| attributes.get(attribute).map(|v| v.to_string());
        Ok(Some(Stored {
            bytes,
            content_type: text(&object_store::Attribute::ContentType),
            cache_control: text(&object_store::Attribute::CacheControl),
            etag: text(&object_store::Attribute::Metadata("etag".into())),
        }))
    }

    /// The bytes of `relative`, `None` when there is no such object.
    async fn get_if_there(&self, relative: &str) -> Result<Option<Bytes>> {
        Ok(self.read(relative).await?.map(|stored| stored.bytes))
    }

    /// The names under `folder/` (relative to it), listed in pages of
    /// 1,000: O(N / 1000) requests.
    async fn names_under(&self, folder: &str) -> Result<std::collections::HashSet<String>> {
        let root = self.key(folder);
        let strip = format!("{root}/");
        self.store
            .list(Some(&root))
            .map_ok(|meta| meta.location.as_ref().strip_prefix(&strip).unwrap_or_default().to_string())
            .try_collect()
            .await
            .with_context(|| format!("listing {folder}/ of {}", self.url))
    }
}

/// An object as stored, with its headers.
#[derive(Debug, Clone)]
pub struct Stored {
    pub bytes: Bytes,
    pub content_type: Option<String>,
    pub cache_control: Option<String>,
    /// The route's ETag (`x-amz-meta-etag`), on route objects.
    pub etag: Option<String>,
}

/// `result`, with no such object as `None`.
fn found<T>(result: object_store::Result<T>) -> object_store::Result<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Every client of the bucket from `http-client`, bounded as [`Transfer`]
/// says (object_store's own options are not read).
#[derive(Debug)]
struct Connector(Transfer);

impl object_store::client::HttpConnector for Connector {
    fn connect(&self, _: &object_store::ClientOptions) -> object_store::Result<object_store::client::HttpClient> {
        let client = http_client::builder()
            .timeout(self.0.request_timeout)
            .connect_timeout(self.0.connect_timeout)
            .build()
            .map_err(|e| object_store::Error::Generic { store: "S3", source: Box::new(e) })?;
        Ok(object_store::client::HttpClient::new(client))
    }
}
