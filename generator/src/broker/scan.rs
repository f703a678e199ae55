//! Section A's sources as a build reads them: the agent index streamed
//! twice, never whole in memory.
//!
//! **Pass 1** ([`scan`]) reads the catalog and the feedback (held whole:
//! they are small beside the index), folds the api's journal into an
//! [`Overlay`], and streams the agents through it: each agent is checked
//! as it passes (ids and UAIDs unique, its catalog references), counted
//! into the [`Tally`] the catalog files are made from, offered to the
//! [`Similar`] ranking, and listed by a small [`Row`] for the directory.
//! What it keeps grows with the catalog, the distinct capability sets and
//! one row per agent, not with the agents' records.
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
use sha2::{Digest, Sha256};

use super::catalog::{self, Catalog, FeedbackEntry, Subject};
use super::journal::{self, Overlay};
use super::render::{Similar, SimilarIndex, Tally};
use super::{source, Agent, FeedbackFile, Sources};
use crate::timestamp::Timestamp;

/// What pass 1 learnt: everything a file of the index needs besides its
/// own agent.
pub struct Summary {
    pub catalog: Catalog,
    pub feedback: Vec<FeedbackEntry>,
    /// The `seq` of the last journal record applied (0: none).
    pub journal_seq: u64,
    pub tally: Tally,
    pub similar: SimilarIndex,
    /// One row per agent, in the directory's order (by name, then UAID).
    pub directory: Vec<Row>,
    /// SHA-256 of the sources as the journal leaves them (agents in order,
    /// feedback, catalog, journal point) and of the generator's version:
    /// equal fingerprints, equal files.
    pub fingerprint: String,
    agents: Agents,
}

/// Where pass 2 reads the agents from.
enum Agents {
    /// A broker folder, with the journal folded.
    Folder { dir: PathBuf, overlay: Box<Overlay> },
    /// Agents already in memory (tests, small indexes).
    Held(Vec<Agent>),
}

/// An agent as the directory lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The order: lower-case name, then UAID.
    pub key: (String, String),
    pub name: String,
    pub registry: String,
    pub protocols: Vec<String>,
    pub trust_score: f64,
    pub available: bool,
    pub updated: Timestamp,
}

impl Row {
    fn of(agent: &Agent) -> Row {
        Row {
            key: (agent.name.to_lowercase(), agent.uaid.to_string()),
            name: agent.name.clone(),
            registry: agent.registry.clone(),
            protocols: agent.protocols.clone(),
            trust_score: agent.trust_score,
            available: agent.available,
            updated: super::render::time(&agent.updated_at),
        }
    }

    pub fn uaid(&self) -> &str {
        &self.key.1
    }
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(&mut deserializer).with_context(|| format!("{}", path.display()))
}

/// Pass 1 over the broker folder `dir` with the api's journal under
/// `journal` applied. Nothing is published when any record is wrong; the
/// error names the file, the record and the field.
pub fn scan(dir: &Path, journal: &Path) -> Result<Summary> {
    let mut catalog: Catalog = read_json(&dir.join("catalog.json"))?;
    let feedback_path = dir.join("feedback.json");
    let mut feedback = match feedback_path.exists() {
        true => read_json::<FeedbackFile>(&feedback_path)?.feedback,
        false => Vec::new(),
    };
    catalog::validate(&catalog, &[]).with_context(|| format!("{}", dir.join("catalog.json").display()))?;
    let records = journal::read(journal).context("the broker journal")?;
    let overlay = Overlay::new(&records, &mut catalog, &mut feedback).context("the broker journal")?;
    let summary =
        Summary::begin(catalog, feedback, overlay.seq, Agents::Folder { dir: dir.into(), overlay: overlay.into() });
    summary.pass_one().with_context(|| format!("{}", dir.display()))
}

impl Summary {
    /// The summary of sources already in memory.
    pub fn of(sources: &Sources) -> Result<Summary> {
        let Sources { agents, catalog, feedback, journal_seq } = sources.clone();
        Summary::begin(catalog, feedback, journal_seq, Agents::Held(agents)).pass_one()
    }

    fn begin(catalog: Catalog, feedback: Vec<FeedbackEntry>, journal_seq: u64, agents: Agents) -> Summary {
        Summary {
            tally: Tally::new(&catalog),
            catalog,
            feedback,
            journal_seq,
            similar: SimilarIndex::default(),
            directory: Vec::new(),
            fingerprint: String::new(),
            agents,
        }
    }

    fn pass_one(mut self) -> Result<Summary> {
        let _span = tracing::debug_span!("scan agents").entered();
        let mut pass = PassOne {
            ids: HashSet::new(),
            uaids: HashSet::new(),
            subjects: self.feedback.iter().map(|f| (f.uaid.clone(), None)).collect(),
            similar: Similar::default(),
            fingerprint: Sha256::new(),
        };
        let (catalog, mut tally, mut directory) = (&self.catalog, Tally::new(&self.catalog), Vec::new());
        self.agents.each(source::BATCH, &mut |batch| {
            batch.par_iter().try_for_each(super::validate).context("agents.json")?;
            catalog::validate(catalog, batch).context("catalog.json")?;
            let digests: Vec<[u8; 32]> = batch
                .par_iter()
                .map(|a| Sha256::digest(serde_json::to_vec(a).expect("agents serialise")).into())
                .collect();
            for (agent, digest) in batch.iter().zip(digests) {
                pass.add(agent, digest)?;
                tally.add(catalog, agent);
                directory.push(Row::of(agent));
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
        directory.par_sort_unstable_by(|a, b| a.key.cmp(&b.key));
        let mut fingerprint = pass.fingerprint;
        for entry in &self.feedback {
            fingerprint.update(serde_json::to_vec(entry).expect("feedback serialises"));
        }
        fingerprint.update(serde_json::to_vec(&self.catalog).expect("the catalog serialises"));
        fingerprint.update(self.journal_seq.to_le_bytes());
        fingerprint.update(env!("CARGO_PKG_VERSION"));
        self.fingerprint = crate::http::hex(&fingerprint.finalize());
        (self.tally, self.directory, self.similar) = (tally, directory, pass.similar.finish());
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
}

impl Agents {
    fn each(&mut self, batch: usize, each: &mut dyn FnMut(&[Agent]) -> Result<()>) -> Result<()> {
        match self {
            Agents::Held(agents) => agents.chunks(batch.max(1)).try_for_each(each),
            Agents::Folder { dir, overlay } => {
                source::read(dir, batch, |read| {
                    let mut kept = Vec::with_capacity(read.len());
                    for agent in read {
                        kept.extend(overlay.pass(agent)?);
                    }
                    each(&kept)
                })?;
                overlay.finish()?.chunks(batch.max(1)).try_for_each(each)
            }
        }
    }

    fn origin(&self, n: usize) -> Option<String> {
        match self {
            Agents::Folder { overlay, .. } => overlay.origin(n).map(|p| p.to_string()),
            Agents::Held(_) => None,
        }
    }
}

/// What pass 1 keeps while the agents pass.
struct PassOne {
    /// Ids and UAIDs seen, as 128-bit hashes.
    ids: HashSet<u128>,
    uaids: HashSet<u128>,
    /// The agents feedback names: what the feedback is checked against.
    subjects: HashMap<String, Option<(String, String, String)>>,
    similar: Similar,
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
        self.similar.add(agent);
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
