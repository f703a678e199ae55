//! `_manifest.json`: what a build serves. One entry per route with the file
//! that holds its bytes and every header a static host or the api sends
//! with them. The api loads it; the generator compares against the previous
//! one to rewrite only files whose bytes changed.
//!
//! A build holds millions of entries, so an entry is compact: its route and
//! file share one allocation (`route()`, `file()`), its ETag and
//! Last-Modified are `Inline` text, its header values `&'static str` (a
//! loaded manifest's are `shared`: one copy per distinct value). The JSON is
//! written through a buffer as it is made.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::http::hex;

pub const FILE_NAME: &str = "_manifest.json";
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub format: u32,
    /// Derived from the routes and their ETags: the same data gives the
    /// same build id.
    pub build: String,
    /// File name of this build's DuckDB snapshot under `data/snapshots/`.
    pub snapshot: String,
    /// Newest source time behind any file of the build (HTTP-date).
    pub last_modified: String,
    /// The full build this one is a layer over (see `site`): its routes
    /// are then only those it adds or changes, and `removed` lists the
    /// base's it no longer serves; every other route is the base's, its
    /// file in the base's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    pub routes: Vec<Entry>,
    /// The Parquet exports among the routes, with their schemas (for
    /// analysts; the files are entries of `routes` like any other).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<Export>,
}

/// A Parquet export: its route, what it holds, its rows and columns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Export {
    pub route: String,
    pub description: String,
    pub rows: u64,
    pub columns: Vec<Column>,
}

/// A column of an export, with its DuckDB type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
}

/// One route of a build. A build holds millions of these, in the
/// generator while it writes them and wherever a manifest is loaded, so
/// each is kept small: the route and the file share one allocation, the
/// ETag and HTTP-date are inline, and the header values are shared.
#[derive(Clone, PartialEq, Eq)]
pub struct Entry {
    /// The route, then the file (`paths[..split]`, `paths[split..]`).
    paths: Box<str>,
    split: u32,
    /// The strong ETag, quoted.
    pub etag: Inline<34>,
    pub last_modified: Inline<29>,
    /// `Content-Type` and `Cache-Control`: a build has a handful of
    /// each, shared by its entries (see [`shared`]).
    pub content_type: &'static str,
    pub cache_control: &'static str,
    pub length: u64,
}

impl Entry {
    /// The entry of a representation published at `route` in `file`.
    pub fn new(route: &str, file: &str, r: &crate::http::Representation) -> Entry {
        let (content_type, cache_control) = (r.content_type, r.cache.header());
        let date = r.last_modified.http_date();
        Entry::of(route, file, etag(&r.body), &date, content_type, cache_control, r.body.len() as u64)
    }

    /// An entry of its parts, the date already an HTTP-date.
    pub fn of(
        route: &str,
        file: &str,
        etag: Inline<34>,
        last_modified: &str,
        content_type: &'static str,
        cache_control: &'static str,
        length: u64,
    ) -> Entry {
        let split = u32::try_from(route.len()).expect("a route shorter than 4 GB");
        Entry {
            paths: [route, file].concat().into_boxed_str(),
            split,
            etag,
            last_modified: Inline::new(last_modified).expect("an HTTP-date is 29 bytes"),
            content_type,
            cache_control,
            length,
        }
    }

    /// The path the entry answers, as requested (percent-encoded).
    pub fn route(&self) -> &str {
        &self.paths[..self.split as usize]
    }

    /// The file holding its bytes, relative to the build's folder.
    pub fn file(&self) -> &str {
        &self.paths[self.split as usize..]
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Wire::of(self).fmt(f)
    }
}

/// An entry as `_manifest.json` spells it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire<'a> {
    #[serde(borrow)]
    route: Cow<'a, str>,
    #[serde(borrow)]
    file: Cow<'a, str>,
    etag: Inline<34>,
    last_modified: Inline<29>,
    #[serde(borrow)]
    content_type: Cow<'a, str>,
    #[serde(borrow)]
    cache_control: Cow<'a, str>,
    length: u64,
}

impl Wire<'_> {
    fn of(entry: &Entry) -> Wire<'_> {
        Wire {
            route: Cow::Borrowed(entry.route()),
            file: Cow::Borrowed(entry.file()),
            etag: entry.etag,
            last_modified: entry.last_modified,
            content_type: Cow::Borrowed(entry.content_type),
            cache_control: Cow::Borrowed(entry.cache_control),
            length: entry.length,
        }
    }
}

impl From<Wire<'_>> for Entry {
    fn from(w: Wire) -> Entry {
        let (content_type, cache_control) = (shared(&w.content_type), shared(&w.cache_control));
        Entry::of(&w.route, &w.file, w.etag, &w.last_modified, content_type, cache_control, w.length)
    }
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Entry, D::Error> {
        Wire::deserialize(deserializer).map(Entry::from)
    }
}

impl Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Wire::of(self).serialize(serializer)
    }
}

/// `text` as a string that lives as long as the process, one copy per
/// distinct value: what a loaded manifest's entries hold for their header
/// values. A build has a handful (the content types and cache policies
/// the generator writes), so what is kept stays small however many
/// builds are loaded.
pub fn shared(text: &str) -> &'static str {
    static SEEN: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut seen = SEEN.lock().expect("shared header values");
    match seen.get(text) {
        Some(kept) => kept,
        None => {
            let kept: &'static str = Box::leak(text.to_string().into_boxed_str());
            seen.insert(kept);
            kept
        }
    }
}

impl Entry {
    /// Whether `bytes` are what this entry describes: its length, and the
    /// hash its ETag is made from.
    pub fn check(&self, bytes: &[u8]) -> Result<(), Damage> {
        check(self.file(), bytes, self.length, &self.etag)
    }
}

/// Whether `bytes`, the content of `file`, have the `length` and ETag a
/// build says (its manifest entry, or its index record).
pub fn check(file: &str, bytes: &[u8], length: u64, expected_etag: &str) -> Result<(), Damage> {
    let damage = |problem: String| Err(Damage { file: file.to_string(), problem });
    if bytes.len() as u64 != length {
        return damage(format!("is {} bytes, the manifest says {length}", bytes.len()));
    }
    if etag(bytes) != expected_etag {
        return damage(format!("does not hash to its ETag {expected_etag}"));
    }
    Ok(())
}

/// A file of a build that is not what the manifest says it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file} {problem}")]
pub struct Damage {
    pub file: String,
    pub problem: String,
}

/// A strong entity tag from the SHA-256 of the exact bytes sent (128 bits
/// of it, quoted).
pub fn etag(body: &[u8]) -> Inline<34> {
    let digest = Sha256::digest(body);
    Inline::new(&format!("\"{}\"", hex(&digest[..16]))).expect("32 hex digits and two quotes")
}

/// Text of at most `N` bytes held inline: a field of millions of entries
/// that would otherwise be an allocation each. Reads as a `str`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Inline<const N: usize> {
    len: u8,
    bytes: [u8; N],
}

impl<const N: usize> Inline<N> {
    /// `text`, or `None` when it is longer than `N` bytes.
    pub fn new(text: &str) -> Option<Inline<N>> {
        let mut bytes = [0u8; N];
        bytes.get_mut(..text.len())?.copy_from_slice(text.as_bytes());
        Some(Inline { len: text.len() as u8, bytes })
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).expect("made from a str")
    }
}

impl<const N: usize> std::ops::Deref for Inline<N> {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl<const N: usize> std::fmt::Display for Inline<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<const N: usize> std::fmt::Debug for Inline<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const N: usize> PartialEq<str> for Inline<N> {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl<const N: usize> PartialEq<&str> for Inline<N> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl<const N: usize> PartialEq<String> for Inline<N> {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl<const N: usize> PartialEq<Inline<N>> for &str {
    fn eq(&self, other: &Inline<N>) -> bool {
        *self == other.as_str()
    }
}

impl<const N: usize> PartialEq<Inline<N>> for String {
    fn eq(&self, other: &Inline<N>) -> bool {
        self == other.as_str()
    }
}

impl<const N: usize> Serialize for Inline<N> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de, const N: usize> Deserialize<'de> for Inline<N> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Inline<N>, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        Inline::new(&text).ok_or_else(|| serde::de::Error::custom(format!("{text:?} is longer than {N} bytes")))
    }
}

impl Manifest {
    /// Builds the manifest of `entries`, sorted by route, naming the build
    /// after its content.
    pub fn new(entries: Vec<Entry>) -> Manifest {
        Manifest::made(entries, None)
    }

    /// The manifest of a layer over build `base` (whose newest
    /// Last-Modified is `base_modified`): `entries` it adds or changes,
    /// `removed` routes of the base it no longer serves. Named after all
    /// three.
    pub fn layer(entries: Vec<Entry>, base: &str, base_modified: &str, mut removed: Vec<String>) -> Manifest {
        removed.sort_unstable();
        Manifest::made(entries, Some((base, base_modified, removed)))
    }

    fn made(mut entries: Vec<Entry>, layer: Option<(&str, &str, Vec<String>)>) -> Manifest {
        // Unstable: no scratch half the size of millions of entries (routes
        // are unique; a duplicate fails the build).
        entries.par_sort_unstable_by(|a, b| a.route().cmp(b.route()));
        let base_modified = layer.as_ref().and_then(|(_, modified, _)| httpdate::parse_http_date(modified).ok());
        let last_modified = entries
            .iter()
            .filter_map(|e| httpdate::parse_http_date(&e.last_modified).ok())
            .chain(base_modified)
            .max()
            .map_or_else(|| httpdate::fmt_http_date(std::time::UNIX_EPOCH), httpdate::fmt_http_date);
        let mut hasher = Sha256::new();
        for entry in &entries {
            for part in [entry.route(), entry.etag.as_str(), entry.last_modified.as_str(), entry.cache_control] {
                hasher.update(part.as_bytes());
                hasher.update([0]);
            }
        }
        let (base, removed) = match layer {
            Some((base, _, removed)) => {
                for part in std::iter::once(base).chain(removed.iter().map(String::as_str)) {
                    hasher.update([1]);
                    hasher.update(part.as_bytes());
                }
                (Some(base.to_string()), removed)
            }
            None => (None, Vec::new()),
        };
        let build = hex(&hasher.finalize()[..8]);
        Manifest {
            format: FORMAT,
            snapshot: format!("{build}.duckdb"),
            build,
            last_modified,
            base,
            removed,
            routes: entries,
            exports: Vec::new(),
        }
    }

    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join(FILE_NAME);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let manifest: Manifest =
            serde_json::from_slice(&bytes).with_context(|| format!("{} is not a manifest", path.display()))?;
        anyhow::ensure!(manifest.format == FORMAT, "{}: unknown manifest format {}", path.display(), manifest.format);
        Ok(manifest)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.write(&mut bytes).expect("a vector takes every byte");
        bytes
    }

    /// Writes `_manifest.json`'s bytes to `out`, as they are made.
    pub fn write(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, self)?;
        out.write_all(b"\n")
    }

    pub fn by_route(&self) -> BTreeMap<&str, &Entry> {
        self.routes.iter().map(|e| (e.route(), e)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry reads back from `_manifest.json` as it was written: the
    /// route and file apart again (one of them empty, or holding what a
    /// JSON string escapes), the header values shared with equal ones.
    #[test]
    fn entries_read_back_as_written() {
        let check = |route: &str, file: &str| {
            let etag = etag(route.as_bytes());
            let entry = Entry::of(route, file, etag, "Mon, 01 Jan 2024 00:00:00 GMT", "text/html", "no-cache", 7);
            assert_eq!((entry.route(), entry.file()), (route, file));
            let json = serde_json::to_string(&entry).unwrap();
            let expected = serde_json::json!({"route": route, "file": file, "etag": etag.as_str(),
                "lastModified": "Mon, 01 Jan 2024 00:00:00 GMT", "contentType": "text/html",
                "cacheControl": "no-cache", "length": 7});
            assert_eq!(serde_json::from_str::<serde_json::Value>(&json).unwrap(), expected);
            let read: Entry = serde_json::from_str(&json).unwrap();
            assert_eq!(read, entry, "{route}");
            // Owned text (a reader, not a slice) reads the same.
            let owned: Entry = serde_json::from_reader(json.as_bytes()).unwrap();
            assert_eq!(owned, entry, "{route}");
            assert!(std::ptr::eq(read.content_type, shared("text/html")));
        };
        check("/api/v1/agents/uaid%3Aa", "api/v1/agents/uaid%253Aa.json");
        check("/", "index.html");
        check("/a\"b\\c", "x\ny.json");
        check("", "");
        check("/route/ünïcode", "ü.json");
    }
}
