//! `_manifest.json`: what a build serves. One entry per route with the file
//! that holds its bytes and every header a static host or the api sends
//! with them. The api loads it; the generator compares against the previous
//! one to rewrite only files whose bytes changed.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
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
    pub etag: String,
    pub last_modified: String,
    pub content_type: String,
    pub cache_control: String,
    pub length: u64,
}

impl Entry {
    /// The entry of a representation published at `route` in `file`.
    pub fn new(route: String, file: String, r: &crate::http::Representation) -> Entry {
        Entry {
            route,
            file,
            etag: etag(&r.body),
            last_modified: r.last_modified.http_date(),
            content_type: r.content_type.to_string(),
            cache_control: r.cache.header().to_string(),
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
pub fn etag(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    format!("\"{}\"", hex(&digest[..16]))
}

impl Manifest {
    /// Builds the manifest of `entries`, sorted by route, naming the build
    /// after its content.
    pub fn new(mut entries: Vec<Entry>) -> Manifest {
        entries.sort_by(|a, b| a.route.cmp(&b.route));
        let last_modified = entries
            .iter()
            .filter_map(|e| httpdate::parse_http_date(&e.last_modified).ok())
            .max()
            .map_or_else(|| httpdate::fmt_http_date(std::time::UNIX_EPOCH), httpdate::fmt_http_date);
        let mut hasher = Sha256::new();
        for entry in &entries {
            for part in [&entry.route, &entry.etag, &entry.last_modified, &entry.cache_control] {
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
        let mut bytes = serde_json::to_vec_pretty(self).expect("manifest serialises");
        bytes.push(b'\n');
        bytes
    }

    pub fn by_route(&self) -> BTreeMap<&str, &Entry> {
        self.routes.iter().map(|e| (e.route.as_str(), e)).collect()
    }
}
