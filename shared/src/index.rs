//! `_manifest.idx`: the manifest as an index, written beside
//! `_manifest.json` for the api. The JSON is for people and static hosts;
//! at a million agents it is gigabytes, too slow to parse at every build
//! swap. Opening the index costs the same at any size: its header is read,
//! its table of slots mapped, and a lookup reads one record and its
//! strings with positioned reads through the page cache. (The first
//! version was searched in place, by binary search over the whole map:
//! every page a lookup touched stayed in the api's resident set, and the
//! kernel maps large runs of cached pages around each fault, so a few
//! minutes of random routes over a 1.4 GB index made it all resident.)
//!
//! A build may be a **layer** over a full build, its base (see
//! `site`): its index then holds only the routes it adds or changes, and
//! those of the base it no longer serves, marked removed; a route it does
//! not hold is the base's. [`Stack`] is a build's index with its base's.
//!
//! Layout, little-endian:
//!
//! ```text
//! magic "ALMIDX03" | records u64 | types u32 | caches u32 | slots u64
//! build | snapshot | base ("" for a full build) | Last-Modified (HTTP-date):
//!   each (offset u64, length u64)
//! content types: (offset u64, length u64) each | cache policies: the same
//! records: 64 bytes each, by route:
//!   route offset u64 | file offset u64 | route length u32 | file length u32
//!   etag: the 16 bytes its hex spells | Last-Modified (Unix seconds) u64
//!   length u64 | content type u16 | cache policy u16 | flags u32 (1: removed)
//! slots: 8 bytes each, a power of two of them, at least 5/4 of the records:
//!   record position + 1 u32 (0: empty) | the route's hash's high half u32
//! strings: each record's route then its file
//! ```
//!
//! A route's hash is [`fnv`](crate::http::fnv) of its bytes; its record is
//! in the first slot from `hash mod slots` onwards (wrapping) whose high
//! half matches and whose route is the one asked for, before an empty slot.
//!
//! Every read is bounds-checked: a damaged index gives no entry, never a
//! panic or a read outside the file.

use std::borrow::Cow;
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::http::fnv;
use crate::manifest::{Entry, Manifest};

pub const FILE_NAME: &str = "_manifest.idx";
const MAGIC: &[u8; 8] = b"ALMIDX03";
/// The fixed fields, then the four header strings' references.
const HEADER: usize = 32 + 4 * 16;
const REMOVED: u32 = 1;
const RECORD: usize = 64;
const SLOT: usize = 8;

/// The index of `manifest`, as bytes (tests, small builds).
pub fn to_bytes(manifest: &Manifest) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write(manifest, &mut out)?;
    Ok(out)
}

/// How many slots an index of `records` routes has.
fn slot_count(records: usize) -> usize {
    (records + records / 4).max(1).next_power_of_two()
}

/// Whether the index in `dir` is of this version (an index of an older
/// one is read from the JSON manifest instead, as a build without one).
pub fn current_in(dir: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(dir.join(FILE_NAME))
        .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut magic))
        .is_ok_and(|()| &magic == MAGIC)
}

/// A record to write: a route's entry, or a route of the base removed.
#[derive(Clone, Copy)]
enum Row<'a> {
    Entry(&'a Entry),
    Removed(&'a str),
}

impl<'a> Row<'a> {
    fn route(&self) -> &'a str {
        match self {
            Row::Entry(e) => e.route(),
            Row::Removed(route) => route,
        }
    }
}

/// Writes the index of `manifest` to `out`, front to back: the strings'
/// offsets are computed, not gathered, so nothing the size of the strings
/// is held (the slots are: 8 bytes for each of them). Fails on an entry the
/// index cannot hold (an ETag that is not 32 hex digits, a date that is not
/// an HTTP-date) before anything is written.
pub fn write(manifest: &Manifest, out: &mut impl std::io::Write) -> Result<()> {
    let mut rows: Vec<Row> = manifest.routes.iter().map(Row::Entry).collect();
    rows.extend(manifest.removed.iter().map(|r| Row::Removed(r)));
    rows.sort_by(|a, b| a.route().as_bytes().cmp(b.route().as_bytes()));
    anyhow::ensure!(rows.len() < u32::MAX as usize, "{} routes are more than an index holds", rows.len());
    if let Some(pair) = rows.windows(2).find(|w| w[0].route() == w[1].route()) {
        bail!("route {} is in the index twice", pair[0].route());
    }
    let entries = || manifest.routes.iter();
    // A handful of values among millions of entries: gathered as sets.
    let types: Vec<&str> =
        entries().map(|e| e.content_type).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let caches: Vec<&str> =
        entries().map(|e| e.cache_control).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    anyhow::ensure!(types.len() <= u16::MAX as usize && caches.len() <= u16::MAX as usize, "too many header values");
    // Every record's fields, checked before a byte is written.
    let fields: Vec<([u8; 16], u64)> = rows
        .iter()
        .map(|row| {
            let Row::Entry(e) = row else { return Ok(([0; 16], 0)) };
            let etag = digest(&e.etag).with_context(|| format!("{}: ETag {}", e.route(), e.etag))?;
            let modified = httpdate::parse_http_date(&e.last_modified)
                .with_context(|| format!("{}: Last-Modified {}", e.route(), e.last_modified))?
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            Ok((etag, modified))
        })
        .collect::<Result<_>>()?;
    let slots = slot_table(rows.iter().map(Row::route));

    let tables = (types.len() + caches.len()) * 16;
    let mut next = (HEADER + tables + rows.len() * RECORD + slots.len() * SLOT) as u64;
    let mut string = |text: &str| -> (u64, u64) {
        let at = next;
        next += text.len() as u64;
        (at, text.len() as u64)
    };
    let base = manifest.base.as_deref().unwrap_or_default();
    let heads = [manifest.build.as_str(), manifest.snapshot.as_str(), base, manifest.last_modified.as_str()];
    let mut head = Vec::with_capacity(HEADER + tables);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&(rows.len() as u64).to_le_bytes());
    head.extend_from_slice(&(types.len() as u32).to_le_bytes());
    head.extend_from_slice(&(caches.len() as u32).to_le_bytes());
    head.extend_from_slice(&(slots.len() as u64).to_le_bytes());
    for text in heads.iter().chain(&types).chain(&caches) {
        let (at, len) = string(text);
        head.extend_from_slice(&at.to_le_bytes());
        head.extend_from_slice(&len.to_le_bytes());
    }
    out.write_all(&head)?;
    let position = |list: &[&str], value: &str| list.binary_search(&value).expect("listed") as u16;
    for (row, (etag, modified)) in rows.iter().zip(&fields) {
        let mut record = [0u8; RECORD];
        let (route, route_len) = string(row.route());
        record[0..8].copy_from_slice(&route.to_le_bytes());
        record[16..20].copy_from_slice(&(route_len as u32).to_le_bytes());
        match row {
            Row::Entry(e) => {
                let (file, file_len) = string(e.file());
                record[8..16].copy_from_slice(&file.to_le_bytes());
                record[20..24].copy_from_slice(&(file_len as u32).to_le_bytes());
                record[24..40].copy_from_slice(etag);
                record[40..48].copy_from_slice(&modified.to_le_bytes());
                record[48..56].copy_from_slice(&e.length.to_le_bytes());
                record[56..58].copy_from_slice(&position(&types, e.content_type).to_le_bytes());
                record[58..60].copy_from_slice(&position(&caches, e.cache_control).to_le_bytes());
            }
            Row::Removed(_) => {
                // No file: an empty one right after the route.
                record[8..16].copy_from_slice(&(route + route_len).to_le_bytes());
                record[60..64].copy_from_slice(&REMOVED.to_le_bytes());
            }
        }
        out.write_all(&record)?;
    }
    for slot in slots {
        out.write_all(&slot.to_le_bytes())?;
    }
    // The strings, in the order their offsets were given.
    for text in heads.iter().chain(&types).chain(&caches) {
        out.write_all(text.as_bytes())?;
    }
    for row in &rows {
        out.write_all(row.route().as_bytes())?;
        if let Row::Entry(e) = row {
            out.write_all(e.file().as_bytes())?;
        }
    }
    Ok(())
}

/// The slots of `routes` (in their order in the index): each record's
/// position + 1 in the low half, its hash's high half in the high one.
fn slot_table<'a>(routes: impl ExactSizeIterator<Item = &'a str>) -> Vec<u64> {
    let mut slots = vec![0u64; slot_count(routes.len())];
    let mask = slots.len() - 1;
    for (position, route) in routes.enumerate() {
        let hash = fnv(route.as_bytes());
        let mut at = hash as usize & mask;
        while slots[at] != 0 {
            at = (at + 1) & mask;
        }
        slots[at] = (hash >> 32) << 32 | (position as u64 + 1);
    }
    slots
}

/// `len` bytes of `file` from `offset`, by a positioned read: no cursor
/// moves, so threads read one file at once, and nothing of it is mapped
/// (what the api reads at random from files of gigabytes: mapped, every
/// page touched would stay in its resident set).
pub fn read_at(file: &std::fs::File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut out = vec![0; len];
    std::os::unix::fs::FileExt::read_exact_at(file, &mut out, offset)?;
    Ok(out)
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

/// Where an index's bytes live: a file (its slots mapped, the rest read
/// as asked for), or bytes (an index made from a JSON manifest, for builds
/// older than this index).
enum Bytes {
    File { file: std::fs::File, map: memmap2::Mmap },
    Owned(Vec<u8>),
}

impl Bytes {
    fn len(&self) -> usize {
        match self {
            Bytes::File { map, .. } => map.len(),
            Bytes::Owned(v) => v.len(),
        }
    }

    /// Bytes `start..start + len`, when all inside: from the file by a
    /// positioned read, so no page of it stays mapped.
    fn read(&self, start: u64, len: u64) -> Option<Cow<'_, [u8]>> {
        let start = usize::try_from(start).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?).filter(|end| *end <= self.len())?;
        match self {
            Bytes::Owned(v) => Some(Cow::Borrowed(&v[start..end])),
            Bytes::File { file, .. } => read_at(file, start as u64, end - start).ok().map(Cow::Owned),
        }
    }

    /// Bytes `range` in place (the slots: touched a few at a time, at
    /// most 8 bytes a route).
    fn mapped(&self, range: std::ops::Range<usize>) -> Option<&[u8]> {
        match self {
            Bytes::File { map, .. } => map.get(range),
            Bytes::Owned(v) => v.get(range),
        }
    }
}

/// An opened index: its header and header strings read, its slots mapped.
pub struct Index {
    bytes: Bytes,
    records: usize,
    slots: usize,
    build: String,
    snapshot: String,
    /// The build this one is a layer over, if it is one.
    base: Option<String>,
    last_modified: String,
    /// The content types, then the cache policies.
    values: Vec<String>,
    types: usize,
}

/// One route's entry, read from the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Its place in the index (0 to `len() - 1`).
    pub position: usize,
    pub route: String,
    pub file: String,
    pub etag: [u8; 16],
    /// Unix seconds.
    pub last_modified: u64,
    pub length: u64,
    pub content_type: &'a str,
    pub cache_control: &'a str,
    /// A route of the base that this layer no longer serves (no file,
    /// no fields: only the route).
    pub removed: bool,
}

impl Record<'_> {
    /// The ETag as the manifest spells it.
    pub fn etag_text(&self) -> String {
        format!("\"{}\"", crate::http::hex(&self.etag))
    }

    /// Whether `bytes` are this record's file: its length and ETag.
    pub fn check(&self, bytes: &[u8]) -> Result<(), crate::manifest::Damage> {
        crate::manifest::check(&self.file, bytes, self.length, &self.etag_text())
    }
}

impl Index {
    /// Opens the index of the build in `dir`.
    pub fn open(dir: &Path) -> Result<Index> {
        let path = dir.join(FILE_NAME);
        let file = std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        // Safety: the file is never written after its build is named (a
        // build folder is written whole, then renamed into place), and a
        // reader checks every bound, so bytes changed under it by hand give
        // wrong answers, not undefined behaviour in this process's Rust
        // (the map is only read as bytes).
        let map = unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("mapping {}", path.display()))?;
        Index::new(Bytes::File { file, map }).with_context(|| format!("{} is not an index", path.display()))
    }

    /// An index of `manifest` made in memory.
    pub fn of(manifest: &Manifest) -> Result<Index> {
        Index::new(Bytes::Owned(to_bytes(manifest)?))
    }

    fn new(bytes: Bytes) -> Result<Index> {
        let head = bytes.read(0, HEADER as u64).filter(|h| &h[..8] == MAGIC);
        let Some(head) = head else { bail!("no index header") };
        let u32_at = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().expect("4 bytes")) as usize;
        let u64_at = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().expect("8 bytes")) as usize;
        let (records, types, caches, slots) = (u64_at(8), u32_at(16), u32_at(20), u64_at(24));
        let end = records
            .checked_mul(RECORD)
            .and_then(|r| r.checked_add(slots.checked_mul(SLOT)?))
            .and_then(|r| r.checked_add(HEADER + (types + caches) * 16))
            .filter(|end| *end <= bytes.len());
        if end.is_none() || !slots.is_power_of_two() || slots < records {
            bail!("the index is shorter than its header says, or its slots are not a table");
        }
        let strings = bytes.read(32, (4 + types + caches) as u64 * 16).context("the header's strings")?;
        let string = |n: usize| -> Result<String> {
            let reference = |at: usize| u64::from_le_bytes(strings[at..at + 8].try_into().expect("8 bytes"));
            let text =
                bytes.read(reference(16 * n), reference(16 * n + 8)).context("a header string out of the index")?;
            Ok(std::str::from_utf8(&text).context("a header string not UTF-8")?.to_string())
        };
        let (build, snapshot, base, last_modified) = (string(0)?, string(1)?, string(2)?, string(3)?);
        let base = Some(base).filter(|b| !b.is_empty());
        let values = (0..types + caches).map(|n| string(4 + n)).collect::<Result<_>>()?;
        Ok(Index { records, slots, build, snapshot, base, last_modified, values, types, bytes })
    }

    pub fn build(&self) -> Option<&str> {
        Some(&self.build)
    }

    pub fn snapshot(&self) -> Option<&str> {
        Some(&self.snapshot)
    }

    /// The build this one is a layer over, if it is one.
    pub fn base(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// The newest Last-Modified of the build (a layer's: of it and its base).
    pub fn last_modified(&self) -> &str {
        &self.last_modified
    }

    pub fn len(&self) -> usize {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    fn records_start(&self) -> usize {
        HEADER + self.values.len() * 16
    }

    /// The record at `position`.
    pub fn at(&self, position: usize) -> Option<Record<'_>> {
        if position >= self.records {
            return None;
        }
        let r = self.bytes.read((self.records_start() + position * RECORD) as u64, RECORD as u64)?;
        let u16_at = |i: usize| u16::from_le_bytes([r[i], r[i + 1]]) as usize;
        let u32_at = |i: usize| u32::from_le_bytes(r[i..i + 4].try_into().expect("4 bytes")) as u64;
        let u64_at = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().expect("8 bytes"));
        let (content_type, cache_control) = (u16_at(56), u16_at(58));
        let removed = u32_at(60) & u64::from(REMOVED) != 0;
        if !removed && (content_type >= self.types || self.types + cache_control >= self.values.len()) {
            return None;
        }
        let (route, file) = self.strings((u64_at(0), u32_at(16)), (u64_at(8), u32_at(20)))?;
        if removed {
            let (etag, last_modified, length, content_type, cache_control) = ([0; 16], 0, 0, "", "");
            return Some(Record {
                position,
                route,
                file,
                etag,
                last_modified,
                length,
                content_type,
                cache_control,
                removed,
            });
        }
        Some(Record {
            position,
            route,
            file,
            etag: r[24..40].try_into().expect("16 bytes"),
            last_modified: u64_at(40),
            length: u64_at(48),
            content_type: &self.values[content_type],
            cache_control: &self.values[self.types + cache_control],
            removed,
        })
    }

    /// A record's route and file, each (offset, length): one read when
    /// the file follows the route, as the writer puts them.
    fn strings(&self, route: (u64, u64), file: (u64, u64)) -> Option<(String, String)> {
        let text = |bytes: &[u8]| std::str::from_utf8(bytes).ok().map(str::to_string);
        if route.0.checked_add(route.1) == Some(file.0) {
            let both = self.bytes.read(route.0, route.1 + file.1)?;
            let (r, f) = both.split_at(route.1 as usize);
            return Some((text(r)?, text(f)?));
        }
        Some((text(&self.bytes.read(route.0, route.1)?)?, text(&self.bytes.read(file.0, file.1)?)?))
    }

    /// The record of `route`, from its slot.
    pub fn get(&self, route: &str) -> Option<Record<'_>> {
        let hash = fnv(route.as_bytes());
        let table = self.records_start() + self.records * RECORD;
        let mask = self.slots - 1;
        let mut at = hash as usize & mask;
        // At most every slot once: a damaged table may have no empty one.
        for _ in 0..self.slots {
            let slot = self.bytes.mapped(table + at * SLOT..table + (at + 1) * SLOT)?;
            let slot = u64::from_le_bytes(slot.try_into().expect("8 bytes"));
            if slot == 0 {
                return None;
            }
            if slot >> 32 == hash >> 32 {
                let record = self.at(((slot & u64::from(u32::MAX)) as usize).checked_sub(1)?)?;
                if record.route == route {
                    return Some(record);
                }
            }
            at = (at + 1) & mask;
        }
        None
    }

    /// Every record, by route.
    pub fn iter(&self) -> impl Iterator<Item = Record<'_>> {
        (0..self.records).filter_map(|p| self.at(p))
    }

    /// The position of the first record whose route is not below `route`
    /// (by bytes), by binary search: a record read per step.
    pub fn lower_bound(&self, route: &str) -> usize {
        let (mut low, mut high) = (0, self.records);
        while low < high {
            let middle = low + (high - low) / 2;
            // An unreadable record (a damaged index) counts as below.
            match self.at(middle) {
                Some(r) if r.route.as_bytes() >= route.as_bytes() => high = middle,
                _ => low = middle + 1,
            }
        }
        low
    }

    /// The records whose routes begin with `prefix`, by route.
    pub fn with_prefix<'a>(&'a self, prefix: &str) -> impl Iterator<Item = Record<'a>> + 'a {
        let start = self.lower_bound(prefix);
        let prefix = prefix.to_string();
        (start..self.records).map_while(move |p| self.at(p).filter(|r| r.route.starts_with(&prefix)))
    }
}

/// A build's index with, when the build is a layer, its base's: what
/// every route of the build is. A layer is over a full build, never over
/// another layer, so a route is found in at most two lookups.
pub struct Stack {
    pub top: Index,
    pub base: Option<Index>,
}

/// Where a route of a [`Stack`] is: in the build's own folder, or its base's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    Top,
    Base,
}

impl Stack {
    /// The index of build `id` in `builds` (the folder of builds), with
    /// its base's, which must be a full build of that name.
    pub fn open(builds: &Path, id: &str) -> Result<Stack> {
        let top = Index::open(&builds.join(id))?;
        anyhow::ensure!(top.build() == Some(id), "the index of build {id} names build {}", top.build);
        let base = match top.base() {
            Some(base) => {
                let index = Index::open(&builds.join(base)).with_context(|| format!("the base of build {id}"))?;
                anyhow::ensure!(
                    index.build() == Some(base) && index.base().is_none(),
                    "build {id} is a layer over {base}, whose index names build {} over {:?}",
                    index.build,
                    index.base()
                );
                Some(index)
            }
            None => None,
        };
        Ok(Stack { top, base })
    }

    /// The record of `route`, and which folder holds its file; `None` when
    /// the build does not serve it.
    pub fn get(&self, route: &str) -> Option<(Record<'_>, Layer)> {
        match self.top.get(route) {
            Some(r) if r.removed => None,
            Some(r) => Some((r, Layer::Top)),
            None => Some((self.base.as_ref()?.get(route)?, Layer::Base)),
        }
    }

    /// The build's routes beginning with `prefix` (each with where its
    /// file is), by route: the layer's and the base's merged, the base's
    /// it replaces or removes left out.
    pub fn with_prefix<'a>(&'a self, prefix: &str) -> Vec<(Record<'a>, Layer)> {
        let top: Vec<Record> = self.top.with_prefix(prefix).collect();
        let mut out: Vec<(Record, Layer)> = Vec::new();
        if let Some(base) = &self.base {
            let held: std::collections::HashSet<&str> = top.iter().map(|r| r.route.as_str()).collect();
            out.extend(base.with_prefix(prefix).filter(|r| !held.contains(r.route.as_str())).map(|r| (r, Layer::Base)));
        }
        out.extend(top.into_iter().filter(|r| !r.removed).map(|r| (r, Layer::Top)));
        out.sort_by(|a, b| a.0.route.as_bytes().cmp(b.0.route.as_bytes()));
        out
    }

    /// How many routes the build serves: the base's, less those the layer
    /// removes, and the layer's that are not the base's (a lookup in the
    /// base for each of the layer's records).
    pub fn len(&self) -> usize {
        let Some(base) = &self.base else { return self.top.len() };
        self.top.iter().fold(base.len(), |n, r| match (r.removed, base.get(&r.route).is_some()) {
            (true, true) => n - 1,
            (false, false) => n + 1,
            _ => n,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        // Made in memory, and written to a file and opened from it (the
        // header read, the slots mapped, the records read as asked for).
        let dir = std::env::temp_dir().join(format!("almanac-index-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(FILE_NAME), to_bytes(&manifest).unwrap()).unwrap();
        assert!(current_in(&dir));
        let opened = Index::open(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        for index in [Index::of(&manifest).unwrap(), opened] {
            assert_eq!(
                (index.len(), index.build(), index.snapshot()),
                (501, Some(manifest.build.as_str()), Some(manifest.snapshot.as_str()))
            );
            for e in &entries {
                let r = index.get(e.route()).unwrap_or_else(|| panic!("{}", e.route()));
                assert_eq!(
                    (r.route.as_str(), r.file.as_str(), r.etag_text(), r.length),
                    (e.route(), e.file(), e.etag.to_string(), e.length)
                );
                assert_eq!(
                    httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(r.last_modified)),
                    e.last_modified.as_str()
                );
                assert_eq!((r.content_type, r.cache_control), (e.content_type, e.cache_control));
                assert_eq!(index.at(r.position).as_ref(), Some(&r));
            }
            for missing in ["", "/r", "/r/", "/r/500", "/r/1 ", "/R/1", "/s"] {
                assert!(index.get(missing).is_none(), "{missing:?}");
            }
            let routes: Vec<String> = index.iter().map(|r| r.route).collect();
            assert!(routes.windows(2).all(|w| w[0].as_bytes() < w[1].as_bytes()));
        }
        // Slots for a quarter more than the routes, a power of two: here
        // 1,024 for 501, so routes share a first slot and are found further.
        let mask = slot_count(entries.len()) - 1;
        let mut first: Vec<usize> = entries.iter().map(|e| fnv(e.route().as_bytes()) as usize & mask).collect();
        first.sort();
        first.dedup();
        assert!(first.len() < entries.len(), "no two routes share a first slot");
        // The same manifest gives the same bytes.
        assert_eq!(
            to_bytes(&manifest).unwrap(),
            to_bytes(&Manifest::new(entries.into_iter().rev().collect())).unwrap()
        );
    }

    /// A layer's index: its base's name and newest date in the header, its
    /// routes and the base's it removes; through a [`Stack`] a route is
    /// the layer's, else the base's, unless removed.
    #[test]
    fn a_layer_is_read_over_its_base() {
        let date = "Mon, 01 Jan 2024 00:00:00 GMT";
        let base = Manifest::new((0..20).map(|i| entry(&format!("/r/{i}"), i as u8, date, "a/b")).collect());
        let changed = vec![entry("/r/3", 99, "Tue, 02 Jan 2024 00:00:00 GMT", "c/d"), entry("/new", 7, date, "a/b")];
        let removed = vec!["/r/5".to_string(), "/r/11".to_string()];
        let layer = Manifest::layer(changed, &base.build, &base.last_modified, removed.clone());
        assert_ne!(layer.build, Manifest::layer(vec![], &base.build, &base.last_modified, removed).build);
        let builds = std::env::temp_dir().join(format!("almanac-index-layer-{}", std::process::id()));
        for m in [&base, &layer] {
            std::fs::create_dir_all(builds.join(&m.build)).unwrap();
            std::fs::write(builds.join(&m.build).join(FILE_NAME), to_bytes(m).unwrap()).unwrap();
        }
        let stack = Stack::open(&builds, &layer.build).unwrap();
        assert_eq!(
            (stack.top.base(), stack.top.last_modified()),
            (Some(base.build.as_str()), "Tue, 02 Jan 2024 00:00:00 GMT")
        );
        assert_eq!(stack.len(), 20 - 2 + 1);
        let (r, at) = stack.get("/r/3").unwrap();
        assert_eq!((r.etag, r.content_type, at), ([99; 16], "c/d", Layer::Top));
        assert_eq!(stack.get("/r/4").map(|(r, at)| (r.etag, at)), Some(([4; 16], Layer::Base)));
        assert_eq!(stack.get("/new").map(|(_, at)| at), Some(Layer::Top));
        assert!(stack.get("/r/5").is_none() && stack.get("/r/11").is_none() && stack.get("/r/20").is_none());
        assert!(stack.top.get("/r/5").is_some_and(|r| r.removed && r.file.is_empty()));
        let under: Vec<(String, Layer)> = stack.with_prefix("/r/1").into_iter().map(|(r, at)| (r.route, at)).collect();
        let expected: Vec<(String, Layer)> =
            [1, 10, 12, 13, 14, 15, 16, 17, 18, 19].iter().map(|i| (format!("/r/{i}"), Layer::Base)).collect();
        assert_eq!(under, expected);
        // A layer over a layer is refused: a route is in at most two indexes.
        let deeper = Manifest::layer(vec![entry("/x", 1, date, "a/b")], &layer.build, date, vec![]);
        std::fs::create_dir_all(builds.join(&deeper.build)).unwrap();
        std::fs::write(builds.join(&deeper.build).join(FILE_NAME), to_bytes(&deeper).unwrap()).unwrap();
        assert!(Stack::open(&builds, &deeper.build).is_err());
        std::fs::remove_dir_all(&builds).unwrap();
        // A route both served and removed cannot be written.
        let both = Manifest::layer(vec![entry("/a", 1, date, "a/b")], "b", date, vec!["/a".into()]);
        assert!(to_bytes(&both).is_err());
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
        // An index of the first version is not taken for this one (the api
        // reads such a build's JSON manifest instead).
        let dir = std::env::temp_dir().join(format!("almanac-index-v1-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(FILE_NAME), [&b"ALMIDX01"[..], &bytes[8..]].concat()).unwrap();
        assert!(!current_in(&dir) && Index::open(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(digest("\"zz\"").is_none() && digest("W/\"00\"").is_none());
    }
}
