//! Each agent's record as search serves it, the keys that order and find
//! it, its ERC-8004 feedback, and its embedding when the build has them,
//! outside the heap: the generator writes them beside the text index
//! (`records.bin`, `keys.bin`, `feedback.bin`, `vectors.bin`) as the
//! agents stream, and the api maps them. A search hit is its record's
//! bytes read into the answer; sorting across indexes and looking up a
//! UAID read only the keys; an answer made live reads one agent's
//! feedback; hybrid search reads the vectors in place.
//!
//! Records are read with positioned reads through the page cache, not
//! from the map (only their offsets are): searches return agents from all
//! over the file, and every page of a map once read stays in the api's
//! resident set, so a million agents' records (1.6 GB) would all be
//! there after a few minutes of searches.
//!
//! Each file is a list of byte strings ([`Packer`], [`Packed`]): the
//! strings end to end, their offsets after them, then a trailer, then a
//! footer saying where each part starts. Opening a file checks its
//! header and footer only, so that it takes the same time at any size (a
//! million agents' keys are 300 MB, and a first start would read them
//! all from disk): each string's offsets are checked as it is read, and
//! one the generator did not write reads as empty, never past the data.
//! A record's bytes are served as they are, so a build's records are
//! only as good as its disk (as its files are).
//!
//! Small sets (a live overlay's segments, tests) are [`Records::held`] in
//! memory and read the same way.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};

use broker_model::catalog::FeedbackEntry;
use broker_model::Agent;

/// Each agent's record as JSON, by position.
pub const RECORDS: &str = "records.bin";
/// Each agent's keys, by position, and a table of UAID hashes.
pub const KEYS: &str = "keys.bin";

/// Each agent's embedding, by position (the model's name as the trailer).
pub const VECTORS: &str = "vectors.bin";
/// Each agent's feedback entries as a JSON array (nothing for none), by
/// position.
pub const FEEDBACK: &str = "feedback.bin";

const RECORDS_MAGIC: &[u8; 8] = b"ALMREC01";
const KEYS_MAGIC: &[u8; 8] = b"ALMKEY01";
const VECTORS_MAGIC: &[u8; 8] = b"ALMVEC01";
const FEEDBACK_MAGIC: &[u8; 8] = b"ALMFBK01";
/// The footer: the count, where the offsets and the trailer start, the
/// trailer's length, and the magic again.
const FOOTER: usize = 40;

/// What orders and finds an agent without reading its record: its id
/// (ties), UAID (lookups), the two times and the lower-cased name (sorts).
/// Trust and availability are in the columns.
#[derive(Clone, Debug, PartialEq)]
pub struct Keys<'a> {
    pub id: &'a str,
    pub uaid: &'a str,
    pub created_at: &'a str,
    pub updated_at: &'a str,
    /// The name lower-cased, as the name sort compares it.
    pub name: Cow<'a, str>,
}

impl Keys<'_> {
    pub fn of(agent: &Agent) -> Keys<'_> {
        Keys {
            id: &agent.id,
            uaid: agent.uaid.as_str(),
            created_at: &agent.created_at,
            updated_at: &agent.updated_at,
            name: Cow::Owned(agent.name.to_lowercase()),
        }
    }

    /// The keys as one string of `keys.bin`: each field after its length.
    fn write(&self, out: &mut Vec<u8>) {
        for field in [self.id, self.uaid, self.created_at, self.updated_at, &self.name] {
            out.extend_from_slice(&(field.len() as u32).to_le_bytes());
            out.extend_from_slice(field.as_bytes());
        }
    }

    /// The keys from one string of `keys.bin`, read as they are asked
    /// for (not checked at open): a field cut short or not UTF-8 reads as
    /// empty, so a damaged file sorts wrongly and finds nothing, but
    /// answers.
    fn read(mut bytes: &[u8]) -> Keys<'_> {
        let mut field = || {
            let read = bytes.get(..4).and_then(|len| {
                let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
                Some((std::str::from_utf8(bytes.get(4..4 + len)?).ok()?, &bytes[4 + len..]))
            });
            let (text, rest) = read.unwrap_or(("", &[]));
            bytes = rest;
            text
        };
        Keys { id: field(), uaid: field(), created_at: field(), updated_at: field(), name: Cow::Borrowed(field()) }
    }
}

/// A set of agents' records and keys, by position.
pub enum Records {
    /// In memory, each record serialised once.
    Held { agents: Vec<Agent>, json: Vec<Box<str>> },
    /// A build's, from its search index folder: keys mapped, records
    /// read as asked for.
    Folder { records: Packed, keys: Packed },
}

impl Records {
    pub fn held(agents: Vec<Agent>) -> Records {
        let json = agents.iter().map(|a| serde_json::to_string(a).expect("agents serialise").into()).collect();
        Records::Held { agents, json }
    }

    /// Maps the records the generator wrote into the search index folder
    /// `dir`; both files' frames and counts are checked, not each string
    /// (see the module's doc).
    pub fn open(dir: &Path) -> Result<Records> {
        let records = Packed::open(&dir.join(RECORDS), RECORDS_MAGIC)?;
        let keys = Packed::open(&dir.join(KEYS), KEYS_MAGIC)?;
        let path = dir.join(KEYS);
        ensure!(
            records.len() == keys.len(),
            "{} holds {} agents, {} {}",
            path.display(),
            keys.len(),
            RECORDS,
            records.len()
        );
        // The UAID table is searched in place: an entry out of order is
        // not found, and one pointing elsewhere fails the UAID's check in
        // `find`.
        ensure!(
            keys.trailer().len() == keys.len() * UAID_ENTRY,
            "{}: the UAID table is not one entry per agent",
            path.display()
        );
        Ok(Records::Folder { records, keys })
    }

    /// Lets the pages of mapped records read so far leave this process's
    /// resident set (the page cache keeps them, and a later read maps them
    /// again): for a pass over every record, as the generator makes the
    /// text index, so that its memory stays within its bound.
    pub fn release(&self) -> Result<()> {
        match self {
            Records::Held { .. } => Ok(()),
            Records::Folder { records, keys } => records.release().and_then(|()| keys.release()),
        }
    }

    /// The agents, when held in memory.
    pub fn held_agents(&self) -> Option<&[Agent]> {
        match self {
            Records::Held { agents, .. } => Some(agents),
            Records::Folder { .. } => None,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Records::Held { agents, .. } => agents.len(),
            Records::Folder { records, .. } => records.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Agent `i`'s record, as JSON (empty when out of place in its
    /// file); an error when the file cannot be read.
    pub fn json(&self, i: usize) -> Result<Cow<'_, [u8]>> {
        match self {
            Records::Held { json, .. } => Ok(Cow::Borrowed(json[i].as_bytes())),
            Records::Folder { records, .. } => {
                records.read(i).map(Cow::Owned).with_context(|| format!("reading the record of agent {i}"))
            }
        }
    }

    /// Agent `i` (read from its record in a folder).
    pub fn agent(&self, i: usize) -> Result<Cow<'_, Agent>> {
        match self {
            Records::Held { agents, .. } => Ok(Cow::Borrowed(&agents[i])),
            Records::Folder { .. } => serde_json::from_slice(&self.json(i)?)
                .map(Cow::Owned)
                .with_context(|| format!("the record of agent {i} is not an agent")),
        }
    }

    /// Agent `i`'s keys.
    pub fn keys(&self, i: usize) -> Keys<'_> {
        match self {
            Records::Held { agents, .. } => Keys::of(&agents[i]),
            Records::Folder { keys, .. } => Keys::read(keys.get(i)),
        }
    }

    /// The position of the agent with this UAID.
    pub fn find(&self, uaid: &str) -> Option<usize> {
        match self {
            Records::Held { agents, .. } => agents.iter().position(|a| a.uaid.as_str() == uaid),
            Records::Folder { keys, .. } => {
                let (table, hash) = (keys.trailer(), fnv(uaid));
                let n = keys.len();
                let first = partition_point(n, |k| uaid_entry(table, k).0 < hash);
                (first..n)
                    .map(|k| uaid_entry(table, k))
                    .take_while(|(h, _)| *h == hash)
                    .map(|(_, at)| at as usize)
                    .find(|at| *at < n && self.keys(*at).uaid == uaid)
            }
        }
    }
}

/// The smallest `k` in `0..n` for which `before(k)` is false (`before`
/// true then false along `0..n`): a slice's `partition_point` over
/// positions whose entries are read only when asked.
pub(crate) fn partition_point(n: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut low, mut high) = (0, n);
    while low < high {
        let mid = low + (high - low) / 2;
        if before(mid) {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    low
}

/// One entry of the UAID table: the UAID's hash, the agent's position.
const UAID_ENTRY: usize = 12;

fn uaid_entry(table: &[u8], n: usize) -> (u64, u32) {
    let at = n * UAID_ENTRY;
    let hash = u64::from_le_bytes(table[at..at + 8].try_into().expect("8 bytes"));
    (hash, u32::from_le_bytes(table[at + 8..at + 12].try_into().expect("4 bytes")))
}

/// FNV-1a, 64 bits: a UAID's place in the table. Written down here, so
/// that the file means the same to every build of the api.
fn fnv(text: &str) -> u64 {
    shared::http::fnv(text.as_bytes())
}

/// The agents' embeddings, mapped: one vector of little-endian `f32`s per
/// agent, all of one length, made by one model.
pub struct Vectors {
    pub model: String,
    packed: Packed,
    dimensions: usize,
}

impl Vectors {
    /// The embeddings in the search index folder `dir`; `None` when the
    /// build has none.
    pub fn open(dir: &Path) -> Result<Option<Vectors>> {
        let path = dir.join(VECTORS);
        if !path.exists() {
            return Ok(None);
        }
        let packed = Packed::open(&path, VECTORS_MAGIC)?;
        let model = std::str::from_utf8(packed.trailer())
            .with_context(|| format!("{}: the model's name is not UTF-8", path.display()))?
            .to_string();
        // Each vector's length is checked as it is read ([`Vectors::get`]).
        let dimensions = if packed.len() == 0 { 0 } else { packed.get(0).len() / 4 };
        Ok(Some(Vectors { model, packed, dimensions }))
    }

    pub fn len(&self) -> usize {
        self.packed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// Agent `i`'s vector, as its bytes; empty (no similarity) when it
    /// is not as long as the first.
    pub fn get(&self, i: usize) -> &[u8] {
        Some(self.packed.get(i)).filter(|v| v.len() == self.dimensions * 4).unwrap_or_default()
    }
}

/// The agents' feedback entries, mapped.
pub struct Feedback(Packed);

impl Feedback {
    pub fn open(dir: &Path) -> Result<Feedback> {
        Ok(Feedback(Packed::open(&dir.join(FEEDBACK), FEEDBACK_MAGIC)?))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Agent `i`'s entries.
    pub fn get(&self, i: usize) -> Result<Vec<FeedbackEntry>> {
        let bytes = self.0.get(i);
        if bytes.is_empty() {
            return Ok(Vec::new());
        }
        serde_json::from_slice(bytes).with_context(|| format!("the feedback of agent {i} is not feedback"))
    }
}

/// The dot product of `query` and a vector kept as little-endian bytes.
pub fn dot_bytes(query: &[f32], vector: &[u8]) -> f32 {
    query.iter().zip(vector.chunks_exact(4)).map(|(x, y)| x * f32::from_le_bytes([y[0], y[1], y[2], y[3]])).sum()
}

/// Agents given to a search index folder, in position order, with what
/// goes beside each: its record as serialised, its feedback entries, and
/// its embedding when the folder keeps them.
#[derive(Clone, Copy)]
pub struct Batch<'a> {
    pub agents: &'a [Agent],
    pub json: &'a [String],
    pub feedback: &'a [&'a [&'a FeedbackEntry]],
    pub vectors: Option<&'a [Vec<f32>]>,
}

/// Writes the records, keys, feedback (and embeddings) of agents given in
/// position order.
pub struct Writer {
    records: Packer,
    keys: Packer,
    feedback: Packer,
    vectors: Option<(Packer, String)>,
    uaids: Vec<(u64, u32)>,
    scratch: Vec<u8>,
}

impl Writer {
    /// Starts the files in the search index folder `dir` (which exists);
    /// the embeddings' too when the agents have them, made by `model`.
    pub fn create(dir: &Path, model: Option<&str>) -> Result<Writer> {
        let vectors = match model {
            Some(model) => Some((Packer::create(&dir.join(VECTORS), VECTORS_MAGIC)?, model.to_string())),
            None => None,
        };
        Ok(Writer {
            records: Packer::create(&dir.join(RECORDS), RECORDS_MAGIC)?,
            keys: Packer::create(&dir.join(KEYS), KEYS_MAGIC)?,
            feedback: Packer::create(&dir.join(FEEDBACK), FEEDBACK_MAGIC)?,
            vectors,
            uaids: Vec::new(),
            scratch: Vec::new(),
        })
    }

    /// Appends the next agents.
    pub fn add(&mut self, batch: &Batch) -> Result<()> {
        let Batch { agents: batch, json, feedback, vectors } = *batch;
        ensure!(json.len() == batch.len() && feedback.len() == batch.len(), "a record for each agent");
        for entries in feedback {
            let bytes = if entries.is_empty() { Vec::new() } else { serde_json::to_vec(entries)? };
            self.feedback.push(&bytes)?;
        }
        match (&mut self.vectors, vectors) {
            (Some((packer, _)), Some(vectors)) => {
                ensure!(vectors.len() == batch.len(), "an embedding for each agent");
                for vector in vectors {
                    self.scratch.clear();
                    vector.iter().for_each(|x| self.scratch.extend_from_slice(&x.to_le_bytes()));
                    packer.push(&self.scratch)?;
                }
            }
            (None, None) => {}
            _ => bail!("embeddings for some agents and not others"),
        }
        for (agent, json) in batch.iter().zip(json) {
            self.uaids.push((fnv(agent.uaid.as_str()), self.records.offsets.len() as u32 - 1));
            self.records.push(json.as_bytes())?;
            self.scratch.clear();
            Keys::of(agent).write(&mut self.scratch);
            self.keys.push(&self.scratch)?;
        }
        Ok(())
    }

    /// Ends the files (the UAID table sorted into the keys' trailer) and
    /// syncs them.
    pub fn finish(self) -> Result<()> {
        let table = uaid_table(self.uaids);
        if let Some((packer, model)) = self.vectors {
            packer.finish(model.as_bytes())?;
        }
        self.records.finish(&[])?;
        self.feedback.finish(&[])?;
        self.keys.finish(&table)
    }
}

/// Writes the files of the search index folder `dir` again with their
/// agents in `order` (the agent at position `k` is the one that was at
/// `order[k]`; every position once), each replacing its old self once
/// whole: the UAID table points at the new positions, the trailers are
/// kept. The pages read are let go as it goes ([`Records::release`]), so
/// that a million agents' records pass through in bounded memory.
pub fn reorder(dir: &Path, order: &[u32]) -> Result<()> {
    for (name, magic) in
        [(RECORDS, RECORDS_MAGIC), (KEYS, KEYS_MAGIC), (FEEDBACK, FEEDBACK_MAGIC), (VECTORS, VECTORS_MAGIC)]
    {
        let path = dir.join(name);
        if name == VECTORS && !path.exists() {
            continue;
        }
        let old = Packed::open(&path, magic)?;
        ensure!(old.len() == order.len(), "{}: {} agents, {} to order", path.display(), old.len(), order.len());
        let staged = dir.join(format!("{name}.reordered"));
        let mut new = Packer::create(&staged, magic)?;
        let mut uaids = Vec::with_capacity(if name == KEYS { order.len() } else { 0 });
        for (k, at) in order.iter().enumerate() {
            let bytes = old.get(*at as usize);
            if name == KEYS {
                uaids.push((fnv(Keys::read(bytes).uaid), k as u32));
            }
            new.push(bytes)?;
            if k % RELEASE_EVERY == RELEASE_EVERY - 1 {
                old.release()?;
            }
        }
        let trailer = if name == KEYS { uaid_table(uaids) } else { old.trailer().to_vec() };
        new.finish(&trailer)?;
        drop(old);
        std::fs::rename(&staged, &path).with_context(|| format!("replacing {}", path.display()))?;
    }
    Ok(())
}

/// How many strings [`reorder`] copies between letting go of the pages
/// it read.
const RELEASE_EVERY: usize = 1_024;

/// The keys' trailer: each (UAID hash, position), sorted.
fn uaid_table(mut uaids: Vec<(u64, u32)>) -> Vec<u8> {
    uaids.sort_unstable();
    let mut table = Vec::with_capacity(uaids.len() * UAID_ENTRY);
    for (hash, at) in &uaids {
        table.extend_from_slice(&hash.to_le_bytes());
        table.extend_from_slice(&at.to_le_bytes());
    }
    table
}

/// Writes a list of byte strings (see the module's doc), one at a time.
struct Packer {
    path: std::path::PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    magic: &'static [u8; 8],
    /// Where each string starts, from the end of the magic; and where the
    /// next one will.
    offsets: Vec<u64>,
}

impl Packer {
    fn create(path: &Path, magic: &'static [u8; 8]) -> Result<Packer> {
        let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        out.write_all(magic)?;
        Ok(Packer { path: path.to_path_buf(), out, magic, offsets: vec![0] })
    }

    fn push(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).with_context(|| format!("writing {}", self.path.display()))?;
        let end = self.offsets.last().expect("starts with 0") + bytes.len() as u64;
        self.offsets.push(end);
        Ok(())
    }

    fn finish(mut self, trailer: &[u8]) -> Result<()> {
        let context = || format!("writing {}", self.path.display());
        let data_end = 8 + *self.offsets.last().expect("starts with 0");
        let pad = (8 - data_end % 8) % 8;
        self.out.write_all(&[0u8; 8][..pad as usize]).with_context(context)?;
        let offsets_at = data_end + pad;
        for offset in &self.offsets {
            self.out.write_all(&offset.to_le_bytes()).with_context(context)?;
        }
        let trailer_at = offsets_at + 8 * self.offsets.len() as u64;
        self.out.write_all(trailer).with_context(context)?;
        let count = self.offsets.len() as u64 - 1;
        for n in [count, offsets_at, trailer_at, trailer.len() as u64] {
            self.out.write_all(&n.to_le_bytes()).with_context(context)?;
        }
        self.out.write_all(self.magic).with_context(context)?;
        let file = self.out.into_inner().map_err(|e| e.into_error()).with_context(context)?;
        file.sync_all().with_context(|| format!("syncing {}", self.path.display()))
    }
}

/// A list of byte strings, mapped (and open, for [`Packed::read`]).
pub struct Packed {
    map: memmap2::Mmap,
    file: std::fs::File,
    count: usize,
    offsets_at: usize,
    trailer: std::ops::Range<usize>,
}

impl Packed {
    fn open(path: &Path, magic: &[u8; 8]) -> Result<Packed> {
        let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        // Safety: a search index folder is written whole under a staging
        // name and renamed into place, never written again; every read is
        // bounds-checked, so bytes changed under the map give wrong
        // answers, not undefined behaviour (the map is only read as bytes).
        let map = unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("mapping {}", path.display()))?;
        // A search reads a few records here and there: no read-ahead
        // around each (it would fill the page cache, and the api's
        // resident size, with records nobody asked for).
        #[cfg(unix)]
        map.advise(memmap2::Advice::Random).with_context(|| format!("advising {}", path.display()))?;
        Packed::new(map, file, magic).with_context(|| format!("{} is not a list of {}", path.display(), name(magic)))
    }

    /// See [`Records::release`].
    fn release(&self) -> Result<()> {
        #[cfg(unix)]
        // Safety: the map is shared, of a file, and only read: dropping its
        // pages loses nothing, the next read faults them in from the file.
        unsafe { self.map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) }.context("releasing mapped records")?;
        Ok(())
    }

    fn new(map: memmap2::Mmap, file: std::fs::File, magic: &[u8; 8]) -> Result<Packed> {
        let len = map.len();
        ensure!(len >= 8 + FOOTER && &map[..8] == magic && &map[len - 8..] == magic, "no header or footer");
        let word = |at: usize| u64::from_le_bytes(map[at..at + 8].try_into().expect("8 bytes"));
        let footer = len - FOOTER;
        let (count, offsets_at, trailer_at, trailer_len) =
            (word(footer), word(footer + 8), word(footer + 16), word(footer + 24));
        let offsets_end = count.checked_add(1).and_then(|n| n.checked_mul(8)).and_then(|n| n.checked_add(offsets_at));
        let trailer_end = trailer_at.checked_add(trailer_len);
        ensure!(
            offsets_at >= 8 && offsets_end == Some(trailer_at) && trailer_end == Some(footer as u64),
            "the footer's parts do not meet"
        );
        let (count, offsets_at) = (count as usize, offsets_at as usize);
        let packed = Packed { count, offsets_at, trailer: trailer_at as usize..footer, map, file };
        ensure!(packed.offset(0) == 0, "the first string does not start at the start");
        Ok(packed)
    }

    fn offset(&self, n: usize) -> u64 {
        let at = self.offsets_at + 8 * n;
        u64::from_le_bytes(self.map[at..at + 8].try_into().expect("8 bytes"))
    }

    fn len(&self) -> usize {
        self.count
    }

    /// Where string `n` is in the file; empty when its offsets are out of
    /// order or point past the data (offsets are checked here, as they
    /// are used).
    fn span(&self, n: usize) -> std::ops::Range<usize> {
        let (start, end) = (self.offset(n), self.offset(n + 1));
        match start <= end && end <= self.offsets_at as u64 - 8 {
            true => 8 + start as usize..8 + end as usize,
            false => 0..0,
        }
    }

    /// String `n`, in place ([`Packed::span`]).
    fn get(&self, n: usize) -> &[u8] {
        &self.map[self.span(n)]
    }

    /// String `n`, read from the file: nothing of it is mapped.
    fn read(&self, n: usize) -> std::io::Result<Vec<u8>> {
        let span = self.span(n);
        shared::index::read_at(&self.file, span.start as u64, span.len())
    }

    fn trailer(&self) -> &[u8] {
        &self.map[self.trailer.clone()]
    }
}

fn name(magic: &[u8; 8]) -> &'static str {
    match magic {
        RECORDS_MAGIC => "agent records",
        KEYS_MAGIC => "agent keys",
        FEEDBACK_MAGIC => "agent feedback",
        _ => "agent embeddings",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_model::generate::agents;

    /// A folder of this test process, removed when dropped.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn written(agents: &[Agent]) -> Scratch {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = Scratch(std::env::temp_dir().join(format!("almanac-records-{}-{n}", std::process::id())));
        std::fs::create_dir_all(dir.path()).unwrap();
        let mut writer = Writer::create(dir.path(), Some("model-x")).unwrap();
        for (n, batch) in agents.chunks(7).enumerate() {
            let json: Vec<String> = batch.iter().map(|a| serde_json::to_string(a).unwrap()).collect();
            let entries = feedback_of(batch);
            let feedback: Vec<Vec<&FeedbackEntry>> = entries.iter().map(|e| e.iter().collect()).collect();
            let feedback: Vec<&[&FeedbackEntry]> = feedback.iter().map(Vec::as_slice).collect();
            let vectors = vectors(n * 7, batch.len());
            writer.add(&Batch { agents: batch, json: &json, feedback: &feedback, vectors: Some(&vectors) }).unwrap();
        }
        writer.finish().unwrap();
        dir
    }

    /// The generated feedback of each agent (ERC-8004 agents have some).
    fn feedback_of(batch: &[Agent]) -> Vec<Vec<FeedbackEntry>> {
        let all = broker_model::generate::feedback(batch, 2);
        batch.iter().map(|a| all.iter().filter(|f| f.uaid == a.uaid.as_str()).cloned().collect()).collect()
    }

    /// Embeddings of three dimensions for agents `from..from + n`.
    fn vectors(from: usize, n: usize) -> Vec<Vec<f32>> {
        (from..from + n).map(|i| vec![i as f32, -0.5, 1.0 / (i as f32 + 1.0)]).collect()
    }

    /// A mapped set answers as the same set held in memory: records, keys,
    /// agents, lookups (and unknown UAIDs are not found).
    #[test]
    fn mapped_records_read_as_held_ones() {
        let agents = agents(120, 4);
        let dir = written(&agents);
        let mapped = Records::open(dir.path()).unwrap();
        let held = Records::held(agents.clone());
        assert_eq!(mapped.len(), 120);
        for (i, agent) in agents.iter().enumerate() {
            assert_eq!(mapped.json(i).unwrap(), held.json(i).unwrap());
            assert_eq!(mapped.keys(i), held.keys(i));
            assert_eq!(mapped.agent(i).unwrap().as_ref(), agent);
            assert_eq!(mapped.find(agent.uaid.as_str()), Some(i));
            assert_eq!(held.find(agent.uaid.as_str()), Some(i));
        }
        assert_eq!(mapped.find("uaid:aid:nobody"), None);
        assert_eq!(mapped.find(""), None);
        let feedback = Feedback::open(dir.path()).unwrap();
        for (batch, at) in agents.chunks(7).zip((0..).step_by(7)) {
            for (n, entries) in feedback_of(batch).into_iter().enumerate() {
                assert_eq!(feedback.get(at + n).unwrap(), entries);
            }
        }
        assert!(feedback_of(&agents).iter().any(|e| !e.is_empty()) && feedback_of(&agents).iter().any(Vec::is_empty));
        let vectors = Vectors::open(dir.path()).unwrap().unwrap();
        assert_eq!((vectors.model.as_str(), vectors.len(), vectors.dimensions()), ("model-x", 120, 3));
        for (i, vector) in super::tests::vectors(0, 120).iter().enumerate() {
            let query = [0.25, 2.0, -1.0];
            assert_eq!(dot_bytes(&query, vectors.get(i)), crate::fusion::dot(&query, vector));
        }
        let empty = written(&[]);
        assert!(Records::open(empty.path()).unwrap().is_empty());
        std::fs::remove_file(empty.path().join(VECTORS)).unwrap();
        assert!(Vectors::open(empty.path()).unwrap().is_none());
    }

    /// A cut file, one of another build, or a frame damaged is refused at
    /// open; a string damaged inside reads as empty when it is read (open
    /// checks no string: its time does not grow with the agents).
    #[test]
    fn damaged_records_are_refused_or_read_as_empty() {
        let agents = agents(30, 2);
        let damaged = |damage: &dyn Fn(&Path)| {
            let dir = written(&agents);
            damage(dir.path());
            dir
        };
        let check = |damage: &dyn Fn(&Path), expected: &str| {
            let dir = damaged(damage);
            let error = format!("{:#}", Records::open(dir.path()).err().expect("refused"));
            assert!(error.contains(expected), "{error}");
        };
        let edit = |file: &'static str, f: &'static dyn Fn(&mut Vec<u8>)| {
            move |dir: &Path| {
                let mut bytes = std::fs::read(dir.join(file)).unwrap();
                f(&mut bytes);
                std::fs::write(dir.join(file), bytes).unwrap();
            }
        };
        check(&edit(RECORDS, &|b| b.truncate(b.len() - 3)), "no header or footer");
        check(&edit(KEYS, &|b| b[0] = b'X'), "no header or footer");
        check(&edit(RECORDS, &|b| b.insert(100, b' ')), "do not meet");
        // The offset of string 5 set past the data: string 4 and 5 read
        // as empty, their neighbours as written.
        let dir = damaged(&edit(RECORDS, &|b| {
            let at = u64::from_le_bytes(b[b.len() - 32..b.len() - 24].try_into().unwrap()) as usize + 5 * 8;
            b[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        }));
        let records = Records::open(dir.path()).unwrap();
        assert!(records.json(4).unwrap().is_empty() && records.json(5).unwrap().is_empty());
        assert!(records.agent(4).is_err());
        assert_eq!(records.agent(3).unwrap().as_ref(), &agents[3]);
        assert_eq!(records.agent(6).unwrap().as_ref(), &agents[6]);
        // The first key's length made longer than the key: its fields read
        // as empty and its UAID is not found; the next agent's are intact.
        let dir = damaged(&edit(KEYS, &|b| b[8] = 0xff));
        let records = Records::open(dir.path()).unwrap();
        assert_eq!((records.keys(0).id, records.keys(0).uaid), ("", ""));
        assert_eq!(records.find(agents[0].uaid.as_str()), None);
        assert_eq!(records.keys(1), Keys::of(&agents[1]));
        assert_eq!(records.find(agents[1].uaid.as_str()), Some(1));
        let other = written(&agents[..10]);
        check(&|dir: &Path| std::fs::copy(other.path().join(KEYS), dir.join(KEYS)).map(drop).unwrap(), "holds 10");
    }
}
