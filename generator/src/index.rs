//! `_manifest.idx`: the manifest as an index, written beside
//! `_manifest.json` for the api. The JSON is for people and static hosts;
//! at a million agents it is gigabytes, too slow to parse at every build
//! swap. The index is opened as a memory map and searched in place: routes
//! sorted by their bytes, fixed-size records, strings in one heap. Opening
//! it costs the same at any size; a lookup is a binary search.
//!
//! Layout, little-endian:
//!
//! ```text
//! magic "ALMIDX01" | records u64 | types u32 | caches u32
//! build (offset u64, length u64) | snapshot (offset u64, length u64)
//! content types: (offset u64, length u64) each | cache policies: the same
//! records: 64 bytes each, by route:
//!   route offset u64 | file offset u64 | route length u32 | file length u32
//!   etag: the 16 bytes its hex spells | Last-Modified (Unix seconds) u64
//!   length u64 | content type u16 | cache policy u16 | 0 u32
//! strings
//! ```
//!
//! Every read is bounds-checked: a damaged index gives no entry, never a
//! panic or a read outside the file.

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::manifest::{Entry, Manifest};

pub const FILE_NAME: &str = "_manifest.idx";
const MAGIC: &[u8; 8] = b"ALMIDX01";
const HEADER: usize = 24 + 32;
const RECORD: usize = 64;

/// The index of `manifest`, as bytes (tests, small builds).
pub fn to_bytes(manifest: &Manifest) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write(manifest, &mut out)?;
    Ok(out)
}

/// Writes the index of `manifest` to `out`, front to back: the strings'
/// offsets are computed, not gathered, so nothing the size of the index
/// is held. Fails on an entry the index cannot hold (an ETag that is not
/// 32 hex digits, a date that is not an HTTP-date) before anything is
/// written.
pub fn write(manifest: &Manifest, out: &mut impl std::io::Write) -> Result<()> {
    let mut entries: Vec<&Entry> = manifest.routes.iter().collect();
    entries.sort_by(|a, b| a.route().as_bytes().cmp(b.route().as_bytes()));
    // A handful of values among millions of entries: gathered as sets.
    let types: Vec<&str> =
        entries.iter().map(|e| e.content_type).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let caches: Vec<&str> =
        entries.iter().map(|e| e.cache_control).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    anyhow::ensure!(types.len() <= u16::MAX as usize && caches.len() <= u16::MAX as usize, "too many header values");
    // Every record's fields, checked before a byte is written.
    let fields: Vec<([u8; 16], u64)> = entries
        .iter()
        .map(|e| {
            let etag = digest(&e.etag).with_context(|| format!("{}: ETag {}", e.route(), e.etag))?;
            let modified = httpdate::parse_http_date(&e.last_modified)
                .with_context(|| format!("{}: Last-Modified {}", e.route(), e.last_modified))?
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            Ok((etag, modified))
        })
        .collect::<Result<_>>()?;

    let tables = (types.len() + caches.len()) * 16;
    let mut next = (HEADER + tables + entries.len() * RECORD) as u64;
    let mut string = |text: &str| -> (u64, u64) {
        let at = next;
        next += text.len() as u64;
        (at, text.len() as u64)
    };
    let heads = [manifest.build.as_str(), manifest.snapshot.as_str()];
    let mut head = Vec::with_capacity(HEADER + tables);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    head.extend_from_slice(&(types.len() as u32).to_le_bytes());
    head.extend_from_slice(&(caches.len() as u32).to_le_bytes());
    for text in heads.iter().chain(&types).chain(&caches) {
        let (at, len) = string(text);
        head.extend_from_slice(&at.to_le_bytes());
        head.extend_from_slice(&len.to_le_bytes());
    }
    out.write_all(&head)?;
    let position = |list: &[&str], value: &str| list.binary_search(&value).expect("listed") as u16;
    for (e, (etag, modified)) in entries.iter().zip(&fields) {
        let (route, route_len) = string(e.route());
        let (file, file_len) = string(e.file());
        let mut record = [0u8; RECORD];
        record[0..8].copy_from_slice(&route.to_le_bytes());
        record[8..16].copy_from_slice(&file.to_le_bytes());
        record[16..20].copy_from_slice(&(route_len as u32).to_le_bytes());
        record[20..24].copy_from_slice(&(file_len as u32).to_le_bytes());
        record[24..40].copy_from_slice(etag);
        record[40..48].copy_from_slice(&modified.to_le_bytes());
        record[48..56].copy_from_slice(&e.length.to_le_bytes());
        record[56..58].copy_from_slice(&position(&types, e.content_type).to_le_bytes());
        record[58..60].copy_from_slice(&position(&caches, e.cache_control).to_le_bytes());
        out.write_all(&record)?;
    }
    // The strings, in the order their offsets were given.
    for text in heads.iter().chain(&types).chain(&caches) {
        out.write_all(text.as_bytes())?;
    }
    for e in &entries {
        out.write_all(e.route().as_bytes())?;
        out.write_all(e.file().as_bytes())?;
    }
    Ok(())
}

/// The 16 bytes a manifest ETag (`"` 32 hex digits `"`) spells.
fn digest(etag: &str) -> Option<[u8; 16]> {
    let hex = etag.strip_prefix('"')?.strip_suffix('"')?;
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Where an index's bytes live: a memory map of the file, or bytes (an
/// index made from a JSON manifest, for builds older than the index).
enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

/// An opened index.
pub struct Index {
    bytes: Bytes,
    records: usize,
    types: usize,
    caches: usize,
}

/// One route's entry, read from the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Its place in the index (0 to `len() - 1`), a key for caches.
    pub position: usize,
    pub route: &'a str,
    pub file: &'a str,
    pub etag: [u8; 16],
    /// Unix seconds.
    pub last_modified: u64,
    pub length: u64,
    pub content_type: &'a str,
    pub cache_control: &'a str,
}

impl Record<'_> {
    /// The ETag as the manifest spells it.
    pub fn etag_text(&self) -> String {
        format!("\"{}\"", crate::http::hex(&self.etag))
    }

    /// Whether `bytes` are this record's file: its length and ETag.
    pub fn check(&self, bytes: &[u8]) -> Result<(), crate::manifest::Damage> {
        crate::manifest::check(self.file, bytes, self.length, &self.etag_text())
    }
}

impl Index {
    /// Maps the index of the build in `dir`.
    pub fn open(dir: &Path) -> Result<Index> {
        let path = dir.join(FILE_NAME);
        let file = std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        // Safety: the file is never written after its build is named (a
        // build folder is written whole, then renamed into place), and a
        // reader checks every bound, so bytes changed under it by hand give
        // wrong answers, not undefined behaviour in this process's Rust
        // (the map is only read as bytes).
        let map = unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("mapping {}", path.display()))?;
        Index::new(Bytes::Mapped(map)).with_context(|| format!("{} is not an index", path.display()))
    }

    /// An index of `manifest` made in memory.
    pub fn of(manifest: &Manifest) -> Result<Index> {
        Index::new(Bytes::Owned(to_bytes(manifest)?))
    }

    fn new(bytes: Bytes) -> Result<Index> {
        let data: &[u8] = match &bytes {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        };
        if data.len() < HEADER || &data[..8] != MAGIC {
            bail!("no index header");
        }
        let records = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes")) as usize;
        let types = u32::from_le_bytes(data[16..20].try_into().expect("4 bytes")) as usize;
        let caches = u32::from_le_bytes(data[20..24].try_into().expect("4 bytes")) as usize;
        let end = records
            .checked_mul(RECORD)
            .and_then(|r| r.checked_add(HEADER + (types + caches) * 16))
            .filter(|end| *end <= data.len());
        if end.is_none() {
            bail!("the index is shorter than its header says");
        }
        let index = Index { bytes, records, types, caches };
        if index.build().is_none() || index.snapshot().is_none() {
            bail!("the index names no build");
        }
        Ok(index)
    }

    fn data(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }

    fn u64_at(&self, at: usize) -> Option<u64> {
        Some(u64::from_le_bytes(self.data().get(at..at + 8)?.try_into().ok()?))
    }

    fn bytes_at(&self, offset: u64, length: u64) -> Option<&[u8]> {
        let start = usize::try_from(offset).ok()?;
        self.data().get(start..start.checked_add(usize::try_from(length).ok()?)?)
    }

    /// The string whose reference is at `at` (offset, length).
    fn string_ref(&self, at: usize) -> Option<&str> {
        std::str::from_utf8(self.bytes_at(self.u64_at(at)?, self.u64_at(at + 8)?)?).ok()
    }

    pub fn build(&self) -> Option<&str> {
        self.string_ref(24)
    }

    pub fn snapshot(&self) -> Option<&str> {
        self.string_ref(40)
    }

    pub fn len(&self) -> usize {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    fn record_start(&self, position: usize) -> usize {
        HEADER + (self.types + self.caches) * 16 + position * RECORD
    }

    /// The route bytes of the record at `position`.
    fn route_bytes(&self, position: usize) -> Option<&[u8]> {
        let at = self.record_start(position);
        let len = u32::from_le_bytes(self.data().get(at + 16..at + 20)?.try_into().ok()?);
        self.bytes_at(self.u64_at(at)?, len as u64)
    }

    /// The record at `position`.
    pub fn at(&self, position: usize) -> Option<Record<'_>> {
        if position >= self.records {
            return None;
        }
        let at = self.record_start(position);
        let r = self.data().get(at..at + RECORD)?;
        let u16_at = |i: usize| u16::from_le_bytes([r[i], r[i + 1]]) as usize;
        let u32_at = |i: usize| u32::from_le_bytes(r[i..i + 4].try_into().expect("4 bytes")) as u64;
        let u64_at = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().expect("8 bytes"));
        let text = |offset: u64, length: u64| std::str::from_utf8(self.bytes_at(offset, length)?).ok();
        let (content_type, cache_control) = (u16_at(56), u16_at(58));
        if content_type >= self.types || cache_control >= self.caches {
            return None;
        }
        let table = HEADER;
        Some(Record {
            position,
            route: text(u64_at(0), u32_at(16))?,
            file: text(u64_at(8), u32_at(20))?,
            etag: r[24..40].try_into().expect("16 bytes"),
            last_modified: u64_at(40),
            length: u64_at(48),
            content_type: self.string_ref(table + content_type * 16)?,
            cache_control: self.string_ref(table + (self.types + cache_control) * 16)?,
        })
    }

    /// The record of `route`, found by binary search.
    pub fn get(&self, route: &str) -> Option<Record<'_>> {
        let (mut low, mut high) = (0, self.records);
        while low < high {
            let middle = low + (high - low) / 2;
            match self.route_bytes(middle)?.cmp(route.as_bytes()) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return self.at(middle),
            }
        }
        None
    }

    /// Every record, by route.
    pub fn iter(&self) -> impl Iterator<Item = Record<'_>> {
        (0..self.records).filter_map(|p| self.at(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(route: &str, etag_byte: u8, modified: &str, content_type: &str) -> Entry {
        let file = format!("{}.json", route.trim_start_matches('/'));
        let etag = crate::manifest::Inline::new(&format!("\"{}\"", crate::http::hex(&[etag_byte; 16]))).unwrap();
        let content_type = crate::manifest::shared(content_type);
        Entry::of(route, &file, etag, modified, content_type, "public, max-age=60", route.len() as u64)
    }

    #[test]
    fn every_route_is_found_with_its_entry_and_nothing_else_is() {
        let entries: Vec<Entry> = (0..500)
            .map(|i| entry(&format!("/r/{i}"), i as u8, "Mon, 01 Jan 2024 00:00:00 GMT", ["a/b", "c/d"][i % 2]))
            .chain([entry("/", 1, "Thu, 01 Jan 1970 00:00:00 GMT", "text/html; charset=utf-8")])
            .collect();
        let manifest = Manifest::new(entries.clone());
        let index = Index::of(&manifest).unwrap();
        assert_eq!(
            (index.len(), index.build(), index.snapshot()),
            (501, Some(manifest.build.as_str()), Some(manifest.snapshot.as_str()))
        );
        for e in &entries {
            let r = index.get(e.route()).unwrap_or_else(|| panic!("{}", e.route()));
            assert_eq!((r.route, r.file, r.etag_text(), r.length), (e.route(), e.file(), e.etag.to_string(), e.length));
            assert_eq!(
                httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(r.last_modified)),
                e.last_modified.as_str()
            );
            assert_eq!((r.content_type, r.cache_control), (e.content_type, e.cache_control));
            assert_eq!(index.at(r.position), Some(r));
        }
        for missing in ["", "/r", "/r/", "/r/500", "/r/1 ", "/R/1", "/s"] {
            assert!(index.get(missing).is_none(), "{missing:?}");
        }
        let routes: Vec<&str> = index.iter().map(|r| r.route).collect();
        assert!(routes.windows(2).all(|w| w[0].as_bytes() < w[1].as_bytes()));
        // The same manifest gives the same bytes.
        assert_eq!(
            to_bytes(&manifest).unwrap(),
            to_bytes(&Manifest::new(entries.into_iter().rev().collect())).unwrap()
        );
    }

    #[test]
    fn a_damaged_index_gives_errors_or_nothing_never_a_panic() {
        let manifest = Manifest::new(
            (0..50).map(|i| entry(&format!("/r/{i}"), i as u8, "Mon, 01 Jan 2024 00:00:00 GMT", "a/b")).collect(),
        );
        let bytes = to_bytes(&manifest).unwrap();
        for cut in [0, 7, 8, 30, HEADER, bytes.len() / 2, bytes.len() - 1] {
            if let Ok(index) = Index::new(Bytes::Owned(bytes[..cut].to_vec())) {
                for i in 0..60 {
                    let _ = index.get(&format!("/r/{i}"));
                }
            }
        }
        // Every byte flipped in turn: lookups answer or miss, and never panic.
        for at in (0..bytes.len()).step_by(7) {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0xff;
            if let Ok(index) = Index::new(Bytes::Owned(damaged)) {
                for i in 0..50 {
                    let _ = index.get(&format!("/r/{i}"));
                }
                let _ = index.iter().count();
            }
        }
        assert!(Index::new(Bytes::Owned(b"ALMIDX01".to_vec())).is_err());
        assert!(digest("\"zz\"").is_none() && digest("W/\"00\"").is_none());
    }
}
