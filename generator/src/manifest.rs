//! `_manifest.json`: what a build serves. One entry per route with the file
//! that holds its bytes and every header a static host or the api sends
//! with them. The api loads it; the generator compares against the previous
//! one to rewrite only files whose bytes changed.

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub route: String,
    pub file: String,
    /// The strong ETag, quoted; held inline, as is the HTTP-date: a build
    /// holds millions of entries, and these are no allocation of their own.
    pub etag: Inline<34>,
    pub last_modified: Inline<29>,
    /// `Content-Type` and `Cache-Control`: a build's own values are
    /// borrowed, not copied into each of its millions of entries.
    pub content_type: Cow<'static, str>,
    pub cache_control: Cow<'static, str>,
    pub length: u64,
}

impl Entry {
    /// The entry of a representation published at `route` in `file`.
    pub fn new(route: String, file: String, r: &crate::http::Representation) -> Entry {
        Entry {
            route,
            file,
            etag: etag(&r.body),
            last_modified: Inline::new(&r.last_modified.http_date()).expect("an HTTP-date is 29 bytes"),
            content_type: Cow::Borrowed(r.content_type),
            cache_control: Cow::Borrowed(r.cache.header()),
            length: r.body.len() as u64,
        }
    }
}

impl Entry {
    /// Whether `bytes` are what this entry describes: its length, and the
    /// hash its ETag is made from.
    pub fn check(&self, bytes: &[u8]) -> Result<(), Damage> {
        check(&self.file, bytes, self.length, &self.etag)
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
    pub fn new(mut entries: Vec<Entry>) -> Manifest {
        // Unstable: no scratch half the size of millions of entries (routes
        // are unique; a duplicate fails the build).
        entries.par_sort_unstable_by(|a, b| a.route.cmp(&b.route));
        let last_modified = entries
            .iter()
            .filter_map(|e| httpdate::parse_http_date(&e.last_modified).ok())
            .max()
            .map_or_else(|| httpdate::fmt_http_date(std::time::UNIX_EPOCH), httpdate::fmt_http_date);
        let mut hasher = Sha256::new();
        for entry in &entries {
            for part in [entry.route.as_str(), entry.etag.as_str(), entry.last_modified.as_str(), &entry.cache_control]
            {
                hasher.update(part.as_bytes());
                hasher.update([0]);
            }
        }
        let build = hex(&hasher.finalize()[..8]);
        Manifest {
            format: FORMAT,
            snapshot: format!("{build}.duckdb"),
            build,
            last_modified,
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
        self.routes.iter().map(|e| (e.route.as_str(), e)).collect()
    }
}
