//! Section A's sources as a build reads them: the agent index streamed
//! twice, never whole in memory.
//!
//! **Pass 1** ([`scan`]) reads the catalog and the feedback (held whole:
//! they are small beside the index), folds the api's journal into an
//! [`Overlay`], and streams the agents through it: each agent is checked
//! as it passes (ids and UAIDs unique, its catalog references), counted
//! into the [`Tally`] the catalog files are made from, and listed by a
//! small [`Row`] for the directory. What it keeps grows with the catalog
//! and one row per agent, not with the agents' records.
//!
//! **Pass 2** ([`Summary::agents`]) streams the agents again, as the
//! journal leaves them, in bounded batches: the build renders and writes
//! each batch's files and stores its rows, then drops it.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::de::DeserializeOwned;
use sha2::{Digest as _, Sha256};

use super::{source, Agent, FeedbackFile};
use broker_model::catalog::{self, Catalog, FeedbackEntry, Subject};
use broker_model::journal::{self, Overlay};
use broker_site::render::Tally;
use broker_site::rows::{Digest, Facts, Row, Shared};
use shared::timestamp::Timestamp;

/// What pass 1 learnt: everything a file of the index needs besides its
/// own agent.
pub struct Summary {
    pub catalog: Catalog,
    pub feedback: Vec<FeedbackEntry>,
    /// The `seq` of the last journal record applied (0: none).
    pub journal_seq: u64,
    pub tally: Tally,
    /// One row per agent, in the directory's order (by name, then UAID).
    pub directory: Vec<Row>,
    /// SHA-256 of the sources as the journal leaves them (agents in order,
    /// feedback, catalog, journal point) and of the generator's version:
    /// equal fingerprints, equal files.
    pub fingerprint: String,
    /// The sources by their bytes ([`digest`]).
    pub digest: Digest,
    /// The journal's records applied, by their content
    /// ([`journal::digest_through`]).
    pub journal_digest: String,
    agents: Agents,
}

/// Files read in chunks of this size, the chunks hashed over the cores
/// (BLAKE3: a million agents' sources are gigabytes, digested every run).
const DIGEST_CHUNK: u64 = 16 << 20;

/// The [`Digest`] of the broker folder `dir` and the journal under
/// `journal`.
pub fn digest(dir: &Path, journal: &Path) -> Result<Digest> {
    let mut paths = source::files(dir)?;
    paths.extend(["catalog.json", "feedback.json"].map(|name| dir.join(name)));
    let mut hasher = Sha256::new();
    hasher.update(env!("CARGO_PKG_VERSION"));
    hash_files(&mut hasher, &paths)?;
    let sources = shared::http::hex(&hasher.finalize());
    let mut hasher = Sha256::new();
    hasher.update(&sources);
    if journal.exists() {
        hash_files(&mut hasher, &journal::files(journal).context("the broker journal")?)?;
    }
    Ok(Digest { whole: shared::http::hex(&hasher.finalize()), sources })
}

/// Hashes each file's name, length and bytes (a missing one as missing).
fn hash_files(hasher: &mut Sha256, paths: &[PathBuf]) -> Result<()> {
    for path in paths {
        let name = path.file_name().map(|n| n.as_encoded_bytes()).unwrap_or_default();
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name);
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                hasher.update(u64::MAX.to_le_bytes());
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
        };
        let len = file.metadata().with_context(|| format!("reading {}", path.display()))?.len();
        hasher.update(len.to_le_bytes());
        // One buffer per worker, read into again and again: a fresh one per
        // chunk cost more in page faults than the hashing.
        let chunks: Vec<[u8; 32]> = (0..len.div_ceil(DIGEST_CHUNK))
            .into_par_iter()
            .map_init(Vec::new, |buffer, n| {
                let at = n * DIGEST_CHUNK;
                buffer.resize(DIGEST_CHUNK.min(len - at) as usize, 0);
                std::os::unix::fs::FileExt::read_exact_at(&file, buffer, at)?;
                Ok(*blake3::hash(buffer).as_bytes())
            })
            .collect::<std::io::Result<_>>()
            .with_context(|| format!("reading {}", path.display()))?;
        chunks.iter().for_each(|c| hasher.update(c));
    }
    Ok(())
}

/// Where the passes read the agents from: a broker folder, through the
/// journal's overlay.
struct Agents {
    dir: PathBuf,
    overlay: Box<Overlay>,
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(&mut deserializer).with_context(|| format!("{}", path.display()))
}

/// Pass 1 over the broker folder `dir` with the api's journal under
/// `journal` applied; `digest` is theirs ([`digest`], taken by the caller
/// before it decides to read them). Nothing is published when any record is wrong; the
/// error names the file, the record and the field.
pub fn scan(dir: &Path, journal: &Path, digest: Digest) -> Result<Summary> {
    let mut catalog: Catalog = read_json(&dir.join("catalog.json"))?;
    let feedback_path = dir.join("feedback.json");
    let mut feedback = match feedback_path.exists() {
        true => read_json::<FeedbackFile>(&feedback_path)?.feedback,
        false => Vec::new(),
    };
    catalog::validate(&catalog, &[]).with_context(|| format!("{}", dir.join("catalog.json").display()))?;
    let records = journal::read(journal).context("the broker journal")?;
    let overlay = Overlay::new(&records, &mut catalog, &mut feedback).context("the broker journal")?;
    let mut summary =
        Summary::begin(catalog, feedback, overlay.seq, Agents { dir: dir.into(), overlay: overlay.into() });
    summary.digest = digest;
    summary.journal_digest = journal::digest_through(&records, summary.journal_seq);
    summary.pass_one().with_context(|| format!("{}", dir.display()))
}

impl Summary {
    fn begin(catalog: Catalog, feedback: Vec<FeedbackEntry>, journal_seq: u64, agents: Agents) -> Summary {
        Summary {
            tally: Tally::new(&catalog),
            catalog,
            feedback,
            journal_seq,
            directory: Vec::new(),
            fingerprint: String::new(),
            digest: Digest::default(),
            journal_digest: String::new(),
            agents,
        }
    }

    fn pass_one(mut self) -> Result<Summary> {
        let _span = tracing::debug_span!("scan agents").entered();
        let mut pass = PassOne {
            ids: HashSet::new(),
            uaids: HashSet::new(),
            subjects: self.feedback.iter().map(|f| (f.uaid.clone(), None)).collect(),
            fingerprint: Sha256::new(),
        };
        let (catalog, mut tally, mut directory) = (&self.catalog, Tally::new(&self.catalog), Vec::new());
        let mut shared = Shared::default();
        self.agents.each(source::BATCH, &mut |batch| {
            batch.par_iter().try_for_each(broker_model::validate).context("agents.json")?;
            catalog::validate(catalog, batch).context("catalog.json")?;
            let digests: Vec<[u8; 32]> = batch
                .par_iter()
                .map(|a| Sha256::digest(serde_json::to_vec(a).expect("agents serialise")).into())
                .collect();
            for (agent, digest) in batch.iter().zip(digests) {
                pass.add(agent, digest)?;
                tally.add(catalog, agent);
                directory.push(shared.row(agent));
            }
            Ok(())
        })?;
        let subjects = &pass.subjects;
        let origin = |n: usize| self.agents.origin(n);
        catalog::validate_feedback_by(
            &self.feedback,
            |uaid| {
                subjects.get(uaid).and_then(Option::as_ref).map(|(id, registry, original)| Subject {
                    id,
                    registry,
                    original_id: original,
                })
            },
            &origin,
        )
        .context("feedback.json")?;
        Row::sort(&mut directory);
        let mut fingerprint = pass.fingerprint;
        for entry in &self.feedback {
            fingerprint.update(serde_json::to_vec(entry).expect("feedback serialises"));
        }
        fingerprint.update(serde_json::to_vec(&self.catalog).expect("the catalog serialises"));
        fingerprint.update(self.journal_seq.to_le_bytes());
        fingerprint.update(env!("CARGO_PKG_VERSION"));
        self.fingerprint = shared::http::hex(&fingerprint.finalize());
        (self.tally, self.directory) = (tally, directory);
        Ok(self)
    }

    /// Pass 2: every agent as the journal leaves it, in order, in batches
    /// of at most `batch`.
    pub fn agents(&mut self, batch: usize, mut each: impl FnMut(&[Agent]) -> Result<()>) -> Result<()> {
        self.agents.each(batch, &mut each)
    }

    /// Each agent's feedback entries, by UAID.
    pub fn feedback_by_agent(&self) -> HashMap<&str, Vec<&FeedbackEntry>> {
        let mut by_agent: HashMap<&str, Vec<&FeedbackEntry>> = HashMap::new();
        for f in &self.feedback {
            by_agent.entry(f.uaid.as_str()).or_default().push(f);
        }
        by_agent
    }

    pub fn count(&self) -> usize {
        self.tally.total
    }

    /// What the pages say of these agents, given the newest time of their
    /// pages (known once they are rendered).
    pub fn facts(&self, profiles_newest: Timestamp) -> Facts {
        Facts::of(&self.tally, &self.catalog, self.journal_seq, profiles_newest)
    }
}

impl Agents {
    fn each(&mut self, batch: usize, each: &mut dyn FnMut(&[Agent]) -> Result<()>) -> Result<()> {
        let overlay = &mut self.overlay;
        source::read(&self.dir, batch, |read| {
            let mut kept = Vec::with_capacity(read.len());
            for agent in read {
                kept.extend(overlay.pass(agent)?);
            }
            each(&kept)
        })?;
        overlay.finish()?.chunks(batch.max(1)).try_for_each(each)
    }

    fn origin(&self, n: usize) -> Option<String> {
        self.overlay.origin(n).map(|p| p.to_string())
    }
}

/// What pass 1 keeps while the agents pass.
struct PassOne {
    /// Ids and UAIDs seen, as 128-bit hashes.
    ids: HashSet<u128>,
    uaids: HashSet<u128>,
    /// The agents feedback names: what the feedback is checked against.
    subjects: HashMap<String, Option<(String, String, String)>>,
    fingerprint: Sha256,
}

impl PassOne {
    fn add(&mut self, agent: &Agent, digest: [u8; 32]) -> Result<()> {
        if !self.ids.insert(wide_hash(&agent.id)) {
            bail!("agents.json: agent {:?}: field \"id\": used twice", agent.id);
        }
        if !self.uaids.insert(wide_hash(agent.uaid.as_str())) {
            bail!("agents.json: agent {:?}: field \"uaid\": {} is used twice", agent.id, agent.uaid);
        }
        if let Some(subject) = self.subjects.get_mut(agent.uaid.as_str()) {
            *subject = Some((agent.id.clone(), agent.registry.clone(), agent.original_id.clone()));
        }
        self.fingerprint.update(digest);
        Ok(())
    }
}

/// 128 bits of hash: two SipHash runs with different seeds. Two of a
/// million values collide with odds below 10^-26.
fn wide_hash(value: &str) -> u128 {
    let half = |seed: u8| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        seed.hash(&mut hasher);
        value.hash(&mut hasher);
        hasher.finish() as u128
    };
    half(0) << 64 | half(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_model::{generate, journal};

    /// The two passes give what loading the sources whole and applying the
    /// journal gives: the same agents in the same order, counted and ranked
    /// the same; a bad record fails pass 1, naming it.
    #[test]
    fn the_passes_read_what_the_whole_sources_hold() {
        let root = std::env::temp_dir().join(format!("almanac-scan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (dir, journal_dir) = (root.join("broker"), root.join("journal"));
        std::fs::create_dir_all(&journal_dir).unwrap();
        let datasets = &shared::checkout::path("datasets/broker");
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["agents.json", "catalog.json", "feedback.json"] {
            std::fs::copy(datasets.join(name), dir.join(name)).unwrap();
        }
        let whole = crate::broker::load(&dir).unwrap();
        let mut newcomer = generate::agents(301, 9).pop().unwrap();
        newcomer.id = "nanda:newcomer".into();
        let mut renamed = whole.agents[5].clone();
        renamed.name = "Renamed Agent".into();
        let events = [
            serde_json::json!({"event": "register", "agent": newcomer}),
            serde_json::json!({"event": "update", "agent": renamed}),
            serde_json::json!({"event": "delete", "uaid": whole.agents[9].uaid}),
            serde_json::json!({"event": "delete", "uaid": newcomer.uaid}),
            serde_json::json!({"event": "register", "agent": newcomer}),
        ];
        let lines: String = events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let mut e = e.clone();
                e["seq"] = (i + 1).into();
                e["at"] = "2026-11-01T10:00:00Z".into();
                e.to_string() + "\n"
            })
            .collect();
        std::fs::write(journal_dir.join("1.jsonl"), lines).unwrap();
        let mut expected = whole.clone();
        journal::apply(&mut expected, &journal::read(&journal_dir).unwrap()).unwrap();

        let mut summary = scan(&dir, &journal_dir, digest(&dir, &journal_dir).unwrap()).unwrap();
        let mut streamed = Vec::new();
        summary
            .agents(7, |batch| {
                assert!(batch.len() <= 7);
                streamed.extend_from_slice(batch);
                Ok(())
            })
            .unwrap();
        assert_eq!(streamed, expected.agents);
        assert_eq!(streamed.last().map(|a| a.id.as_str()), Some("nanda:newcomer"));
        assert_eq!((summary.count(), summary.journal_seq), (expected.agents.len(), 5));
        assert_eq!(summary.directory.len(), expected.agents.len());
        assert!(summary.directory.windows(2).all(|w| Row::order(&w[0], &w[1]).is_lt()));
        let mut tally = broker_site::render::Tally::new(&expected.catalog);
        expected.agents.iter().for_each(|a| tally.add(&expected.catalog, a));
        assert_eq!(summary.tally.stats(), tally.stats());

        // A duplicate id fails pass 1, naming the agent and the field.
        let mut agents: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("agents.json")).unwrap()).unwrap();
        let first = agents["agents"][0]["id"].clone();
        agents["agents"][3]["id"] = first.clone();
        std::fs::write(dir.join("agents.json"), agents.to_string()).unwrap();
        let error =
            format!("{:#}", scan(&dir, &journal_dir, Digest::default()).err().expect("a duplicate id is refused"));
        assert!(error.contains("\"id\": used twice") && error.contains(first.as_str().unwrap()), "{error}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
