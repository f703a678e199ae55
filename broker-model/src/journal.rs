//! The api's journal of live events, read by the next build so that it
//! includes them. The api appends; the generator only reads.
//!
//! **Format.** `<data-dir>/journal/*.jsonl`, read in file-name order (the
//! api names files so that this is the order it wrote them, e.g. by UTC
//! start time). One JSON object per line, each with a strictly increasing
//! `seq` across the whole journal, the time it happened (`at`, RFC 3339),
//! and an `event`:
//!
//! | event | fields | effect |
//! | --- | --- | --- |
//! | `register` | `agent` (a whole agent record) | adds an agent; its UAID must be new |
//! | `update` | `agent` | replaces the agent with that UAID |
//! | `delete` | `uaid` | removes the agent and its feedback |
//! | `feedback` | `entry` (an ERC-8004 feedback record) | adds feedback to an ERC-8004 agent |
//! | `search` | `query`, `hits` | counts the query for `/popular` |
//! | `availability` | `availability` (a [`Measurement`]) | the agent's last check ([`super::availability`]); of an agent not indexed (deleted since), ignored |
//! | `ownership` | `ownership` (an [`Ownership`]) | the agent's ownership as last proven, revoked or expired ([`super::ownership`]); of an agent not indexed, ignored |
//! | `secretPolicy` | `policy` (a [`SecretPolicy`]) | a Programmable Secrets policy published, indexed or changed: replaces the catalog's of its chain and id |
//! | `secretPolicyGone` | `chainId`, `policyId` | the policy is no longer on chain (a reorganisation dropped it): removed from the catalog |
//! | `plugin` | `plugin` (a [`PluginEntry`]) | a plugin imported, or a new version of it: replaces the catalog's of its slug |
//!
//! An event that does not apply (a malformed line, a register of a known
//! UAID, an update of an unknown one, `seq` out of order) fails the build
//! with the file and line; nothing is published. The one exception is a
//! last line without its newline: a write the api did not finish, skipped.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::availability::{self, Measurement};
use crate::catalog::{Catalog, Category, FeedbackEntry, PluginEntry, RegistryEntry, SecretPolicy};
use crate::ownership::{self, Ownership};
use crate::{Agent, Sources};

/// One line. (Unknown fields cannot be refused here: serde does not
/// combine that with `flatten`; the event's own fields are checked.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub seq: u64,
    pub at: String,
    #[serde(flatten)]
    pub event: Event,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase", deny_unknown_fields)]
pub enum Event {
    Register {
        agent: Box<Agent>,
    },
    Update {
        agent: Box<Agent>,
    },
    Delete {
        uaid: String,
    },
    Feedback {
        entry: Box<FeedbackEntry>,
    },
    Search {
        query: String,
        hits: u64,
    },
    /// A category of the adapter registry, created or changed.
    Category {
        category: Box<Category>,
    },
    /// An adapter published to the adapter registry (replacing one with
    /// its `adapterId`).
    Adapter {
        entry: Box<RegistryEntry>,
    },
    /// An agent's availability, as a check changed it.
    Availability {
        availability: Box<Measurement>,
    },
    /// An agent's ownership, as a verification or a re-check changed it.
    Ownership {
        ownership: Box<Ownership>,
    },
    /// A Programmable Secrets policy published, indexed or changed.
    #[serde(rename = "secretPolicy")]
    SecretPolicy {
        policy: Box<SecretPolicy>,
    },
    /// A Programmable Secrets policy a reorganisation dropped.
    #[serde(rename = "secretPolicyGone", rename_all = "camelCase")]
    SecretPolicyGone {
        chain_id: u64,
        policy_id: u64,
    },
    /// A plugin imported, or a new version of it.
    Plugin {
        plugin: Box<PluginEntry>,
    },
}

/// Where a record was read: file and 1-based line.
#[derive(Clone, Debug, PartialEq)]
pub struct Position {
    pub file: PathBuf,
    pub line: usize,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// The journal's files under `dir`, in the order they are read.
pub fn files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
    files.sort();
    Ok(files)
}

/// Reads every record under `dir` in order (none when `dir` is missing).
pub fn read(dir: &Path) -> Result<Vec<(Position, Record)>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let files = files(dir)?;
    let mut out = Vec::new();
    for (n, file) in files.iter().enumerate() {
        let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let last_file = n + 1 == files.len();
        let lines: Vec<&str> = text.split('\n').collect();
        for (i, line) in lines.iter().enumerate() {
            let position = Position { file: file.clone(), line: i + 1 };
            if line.trim().is_empty() {
                continue;
            }
            // The final piece after the last newline is an unfinished write.
            if i + 1 == lines.len() {
                if last_file {
                    tracing::warn!(%position, "skipping an unfinished journal line");
                    continue;
                }
                bail!("{position}: the line has no newline, and a later journal file exists");
            }
            let record: Record = serde_json::from_str(line).with_context(|| format!("{position}"))?;
            if !super::catalog::rfc3339(&record.at) {
                bail!("{position}: at {:?} is not an RFC 3339 time", record.at);
            }
            out.push((position, record));
        }
    }
    Ok(out)
}

/// The records through `seq`, by their content (each as serialised, in
/// order): what a build applied of the journal. A later run compares it
/// with its own to know that the journal only grew since.
pub fn digest_through(records: &[(Position, Record)], seq: u64) -> String {
    let mut hasher = Sha256::new();
    for (_, record) in records.iter().take_while(|(_, r)| r.seq <= seq) {
        let bytes = serde_json::to_vec(record).expect("records serialise");
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    shared::http::hex(&hasher.finalize())
}

/// How many `/popular` lists.
pub const POPULAR: usize = 10;

/// A search query as counted: trimmed, lower case, single spaces.
pub fn normalise(query: &str) -> String {
    query.split_whitespace().map(str::to_lowercase).collect::<Vec<_>>().join(" ")
}

/// Applies the records to the sources, in order, and checks the result.
pub fn apply(sources: &mut Sources, records: &[(Position, Record)]) -> Result<()> {
    if records.is_empty() {
        // The sources were checked when loaded; nothing to check again.
        return Ok(());
    }
    let mut overlay = Overlay::new(records, &mut sources.catalog, &mut sources.feedback)?;
    let mut agents = Vec::with_capacity(sources.agents.len());
    for agent in std::mem::take(&mut sources.agents) {
        agents.extend(overlay.pass(agent)?);
    }
    agents.extend(overlay.finish()?);
    sources.agents = agents;
    sources.journal_seq = overlay.seq;
    sources.validate_with(&|n| overlay.origin(n).map(|p| p.to_string())).context("the sources with the journal applied")
}

/// What the journal does, applied to the catalog and the feedback (held
/// whole) and kept for the agents, which pass by one at a time
/// ([`Overlay::pass`]): a build streams the agent index through it rather
/// than hold it. Whether a UAID the journal names must be among the
/// sources is decided by its first event (a register: must not be; an
/// update, a delete or feedback: must be) and checked as the sources pass.
pub struct Overlay {
    fates: HashMap<String, Fate>,
    /// Registers so far (each registered agent's place after the sources).
    registers: usize,
    /// Per feedback entry, the record that added it (`None`: a source).
    origins: Vec<Option<Position>>,
    /// The `seq` of the last record (0: none).
    pub seq: u64,
    /// Each UAID's last measurement: applied to the agent as it passes,
    /// whatever else the journal did to it.
    measured: HashMap<String, Measurement>,
    /// Each UAID's last ownership, applied likewise.
    owned: HashMap<String, Ownership>,
}

/// One UAID the events name, as they leave it.
pub struct Changed<'a> {
    pub uaid: &'a str,
    /// Whether the UAID must be indexed before the events, as its first
    /// event requires.
    pub indexed_before: bool,
    /// Whether it is indexed after them.
    pub present: bool,
    /// The record the journal gave it last (`None`: deleted, or only
    /// feedback given).
    pub record: Option<&'a Agent>,
    /// When registered by the events (and not deleted since), its place
    /// among their registers.
    pub added: Option<usize>,
    first: &'a (Position, &'static str),
}

impl Changed<'_> {
    /// Whether the index before the events agrees with them (`indexed`:
    /// it held the UAID); else the error a scan gives, naming the line.
    pub fn check(&self, indexed: bool) -> Result<()> {
        match self.indexed_before == indexed {
            true => Ok(()),
            false => Err(disagreement(self.first, self.uaid, indexed)),
        }
    }
}

/// The error when the index before the events disagrees with a UAID's
/// first event (`first`, where and which): it held the UAID (`indexed`)
/// where the event is a register, or did not where it is not.
fn disagreement(first: &(Position, &'static str), uaid: &str, indexed: bool) -> anyhow::Error {
    match indexed {
        true => anyhow::anyhow!("{}: register of {uaid}, which is already indexed", first.0),
        false => anyhow::anyhow!("{}: {} of {uaid}, which is not indexed", first.0, first.1),
    }
}

/// One UAID's events, folded.
struct Fate {
    /// Whether the sources hold the UAID, as its first event requires.
    in_sources: bool,
    /// That first event, for the error when the sources disagree.
    first: (Position, &'static str),
    /// Whether the UAID is indexed after the events so far.
    present: bool,
    /// The record the journal gave it last (`None`: the source's).
    agent: Option<Agent>,
    /// When registered by the journal (and not deleted since), the
    /// register's place among the journal's registers: the agent follows
    /// the sources, in that order.
    added: Option<usize>,
    /// Whether a source with the UAID has passed.
    seen: bool,
}

impl Overlay {
    /// Folds `records` (in order, `seq` strictly increasing): catalog,
    /// search and feedback events are applied to `catalog` and `feedback`
    /// at once; agent events are kept per UAID. Each agent is checked as a
    /// source record would be, so that the error names its line.
    pub fn new(
        records: &[(Position, Record)],
        catalog: &mut Catalog,
        feedback: &mut Vec<FeedbackEntry>,
    ) -> Result<Overlay> {
        let mut overlay = Overlay {
            fates: HashMap::new(),
            registers: 0,
            origins: vec![None; feedback.len()],
            seq: 0,
            measured: HashMap::new(),
            owned: HashMap::new(),
        };
        let mut last_seq: Option<(u64, &Position)> = None;
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for (position, record) in records {
            if let Some((seq, at)) = last_seq.filter(|(seq, _)| record.seq <= *seq) {
                bail!("{position}: seq {} does not follow seq {seq} at {at}", record.seq);
            }
            last_seq = Some((record.seq, position));
            let check_agent = |agent: &Agent| -> Result<()> {
                super::validate(agent)
                    .and_then(|()| super::catalog::validate(catalog, std::slice::from_ref(agent)))
                    .with_context(|| format!("{position}"))
            };
            match &record.event {
                Event::Register { agent } => {
                    check_agent(agent)?;
                    overlay.event(position, "register", &agent.uaid, Some((**agent).clone()))?;
                }
                Event::Update { agent } => {
                    check_agent(agent)?;
                    overlay.event(position, "update", &agent.uaid, Some((**agent).clone()))?;
                }
                Event::Delete { uaid } => {
                    overlay.event(position, "delete", uaid, None)?;
                    let mut origins = std::mem::take(&mut overlay.origins).into_iter();
                    feedback.retain(|f| {
                        let keep = f.uaid != *uaid;
                        let origin = origins.next().expect("one origin per entry");
                        if keep {
                            overlay.origins.push(origin);
                        }
                        keep
                    });
                }
                Event::Feedback { entry } => {
                    overlay.event(position, "feedback", &entry.uaid, None)?;
                    feedback.push((**entry).clone());
                    overlay.origins.push(Some(position.clone()));
                }
                Event::Category { category } => {
                    let registry = &mut catalog.adapter_registry;
                    if registry.categories.iter().any(|c| c.slug == category.slug && c.id != category.id) {
                        bail!("{position}: category {} has the slug {} of another", category.id, category.slug);
                    }
                    match registry.categories.iter().position(|c| c.id == category.id) {
                        Some(i) => registry.categories[i] = (**category).clone(),
                        None => registry.categories.push((**category).clone()),
                    }
                }
                Event::SecretPolicy { policy } => {
                    SecretPolicy::upsert(&mut catalog.secret_policies, (**policy).clone())
                }
                Event::SecretPolicyGone { chain_id, policy_id } => {
                    catalog.secret_policies.retain(|p| (p.chain_id, p.policy_id) != (*chain_id, *policy_id))
                }
                Event::Plugin { plugin } => PluginEntry::upsert(&mut catalog.plugins, (**plugin).clone()),
                Event::Adapter { entry } => {
                    let registry = &mut catalog.adapter_registry;
                    if !registry.categories.iter().any(|c| c.id == entry.category_id) {
                        bail!(
                            "{position}: adapter {} names category {}, which is not known",
                            entry.adapter_id,
                            entry.category_id
                        );
                    }
                    match registry.adapters.iter().position(|a| a.adapter_id == entry.adapter_id) {
                        Some(i) => registry.adapters[i] = (**entry).clone(),
                        None => registry.adapters.push((**entry).clone()),
                    }
                }
                Event::Availability { availability } => {
                    overlay.measured.insert(availability.uaid.clone(), (**availability).clone());
                }
                Event::Ownership { ownership } => {
                    overlay.owned.insert(ownership.uaid.clone(), (**ownership).clone());
                }
                Event::Search { query, .. } => {
                    let query = normalise(query);
                    if !query.is_empty() {
                        *counts.entry(query).or_default() += 1;
                    }
                }
            }
        }
        if let Some((seq, _)) = last_seq {
            overlay.seq = seq;
        }
        if !counts.is_empty() {
            catalog.popular_searches = popular(&counts, &catalog.popular_searches);
        }
        Ok(overlay)
    }

    /// One agent event: `agent` is the UAID's record after a register or
    /// an update.
    fn event(&mut self, at: &Position, kind: &'static str, uaid: &str, agent: Option<Agent>) -> Result<()> {
        let registers = self.registers;
        let fate = self.fates.entry(uaid.to_string()).or_insert_with(|| Fate {
            in_sources: kind != "register",
            first: (at.clone(), kind),
            present: kind != "register",
            agent: None,
            added: None,
            seen: false,
        });
        match (kind, fate.present) {
            ("register", true) => bail!("{at}: register of {uaid}, which is already indexed"),
            ("register", false) => {}
            (_, false) => bail!("{at}: {kind} of {uaid}, which is not indexed"),
            _ => {}
        }
        match kind {
            "register" => {
                (fate.present, fate.agent, fate.added) = (true, agent, Some(registers));
                self.registers += 1;
            }
            "update" => fate.agent = agent,
            "delete" => (fate.present, fate.agent, fate.added) = (false, None, None),
            _ => {}
        }
        Ok(())
    }

    /// A source agent, as the journal leaves it: itself, the journal's
    /// record of it, or nothing (deleted, or registered again: it then
    /// follows the sources).
    pub fn pass(&mut self, agent: Agent) -> Result<Option<Agent>> {
        let Some(fate) = self.fates.get_mut(agent.uaid.as_str()) else { return Ok(Some(self.settle(agent))) };
        if !fate.in_sources {
            return Err(disagreement(&fate.first, &agent.uaid, true));
        }
        fate.seen = true;
        let now = match (fate.present, fate.added, &fate.agent) {
            (false, _, _) | (_, Some(_), _) => None,
            (true, None, Some(record)) => Some(record.clone()),
            (true, None, None) => Some(agent),
        };
        Ok(now.map(|agent| self.settle(agent)))
    }

    /// `agent` with its availability as the journal's last measurement of
    /// it leaves it ([`availability::settle`]; never measured: unknown),
    /// and its ownership as the journal's last ownership of it leaves it
    /// ([`ownership::settle`]).
    pub fn settle(&self, mut agent: Agent) -> Agent {
        let measured = self.measured.get(agent.uaid.as_str());
        availability::settle(&mut agent, measured);
        let owned = self.owned.get(agent.uaid.as_str());
        ownership::settle(&mut agent, owned);
        agent
    }

    /// The UAIDs the journal measured or whose ownership it changed, each
    /// once, in no order.
    pub fn settled(&self) -> impl Iterator<Item = &str> {
        let owned_only = self.owned.keys().filter(|uaid| !self.measured.contains_key(*uaid));
        self.measured.keys().chain(owned_only).map(String::as_str)
    }

    /// After the last source: the agents the journal registered, in order.
    /// A UAID the journal found indexed that no source had fails here.
    pub fn finish(&self) -> Result<Vec<Agent>> {
        let mut missing: Vec<(&String, &Fate)> = self.fates.iter().filter(|(_, f)| f.in_sources && !f.seen).collect();
        missing.sort_by_key(|(_, f)| f.first.0.line);
        if let Some((uaid, fate)) = missing.first() {
            return Err(disagreement(&fate.first, uaid, false));
        }
        let mut added: Vec<&Fate> = self.fates.values().filter(|f| f.present && f.added.is_some()).collect();
        added.sort_by_key(|f| f.added);
        Ok(added.iter().map(|f| self.settle(f.agent.clone().expect("a registered agent has its record"))).collect())
    }

    /// Every UAID the events name, in no order: what a run that applies
    /// them to an index held elsewhere (a layer's warehouse) changes.
    pub fn changed(&self) -> impl Iterator<Item = Changed<'_>> {
        self.fates.iter().map(|(uaid, f)| Changed {
            uaid,
            indexed_before: f.in_sources,
            present: f.present,
            record: f.agent.as_ref(),
            added: f.added,
            first: &f.first,
        })
    }

    /// The journal record that added feedback entry `n` (`None`: a source
    /// entry), so that a check of the whole names it.
    pub fn origin(&self, n: usize) -> Option<&Position> {
        self.origins.get(n).and_then(Option::as_ref)
    }
}

/// The most counted queries (ties by text), then the seeds not among them,
/// up to [`POPULAR`] or the number of seeds, whichever is more.
fn popular(counts: &BTreeMap<String, u64>, seeds: &[String]) -> Vec<String> {
    let mut ranked: Vec<(&String, &u64)> = counts.iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let mut out: Vec<String> = ranked.into_iter().take(POPULAR).map(|(q, _)| q.clone()).collect();
    for seed in seeds {
        if !out.iter().any(|q| *q == normalise(seed)) {
            out.push(seed.clone());
        }
    }
    out.truncate(POPULAR.max(seeds.len()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate;
    use crate::ownership::Prior;

    fn sources() -> Sources {
        let agents = generate::agents(40, 3);
        let feedback = generate::feedback(&agents, 3);
        Sources { agents, catalog: generate::checked_in_catalog(), feedback, journal_seq: 0 }
    }

    fn records(lines: &[String]) -> Vec<(Position, Record)> {
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| (Position { file: "j.jsonl".into(), line: i + 1 }, serde_json::from_str(l).unwrap()))
            .collect()
    }

    fn line(seq: u64, event: serde_json::Value) -> String {
        let mut v = event;
        v["seq"] = seq.into();
        v["at"] = "2026-11-01T10:00:00Z".into();
        v.to_string()
    }

    #[test]
    fn events_apply_in_order_and_bad_ones_name_their_line() {
        let base = sources();
        let mut newcomer = generate::agents(41, 9).pop().unwrap();
        newcomer.id = "nanda:newcomer".into();
        let known = base.agents[0].clone();
        let mut renamed = known.clone();
        renamed.name = "Renamed Agent".into();
        let erc = base.agents.iter().find(|a| a.registry == "erc-8004").unwrap().clone();
        let mut entry =
            base.feedback.iter().find(|f| erc.uaid == f.uaid).cloned().unwrap_or_else(|| {
                generate::feedback(&base.agents, 3).into_iter().find(|f| erc.uaid == f.uaid).unwrap()
            });
        entry.client = "0xfeedfeedfeedfeedfeedfeedfeedfeedfeedfeed".into();

        let check = |lines: Vec<String>, want: Result<&dyn Fn(&Sources), &str>| {
            let mut s = base.clone();
            let got = apply(&mut s, &records(&lines));
            match (got, want) {
                (Ok(()), Ok(expect)) => expect(&s),
                (Err(e), Err(fragment)) => {
                    let text = format!("{e:#}");
                    assert!(text.contains(fragment), "{text} lacks {fragment}");
                    assert!(text.contains("j.jsonl:"), "{text} names no line");
                }
                (got, _) => panic!("unexpected outcome {got:?} for {lines:?}"),
            }
        };
        let register = serde_json::json!({"event": "register", "agent": newcomer});
        check(vec![line(1, register.clone())], Ok(&|s| assert!(s.agents.iter().any(|a| a.id == "nanda:newcomer"))));
        check(vec![line(1, register.clone()), line(1, register.clone())], Err("does not follow"));
        check(vec![line(1, register.clone()), line(2, register.clone())], Err("already indexed"));
        check(
            vec![line(1, serde_json::json!({"event": "update", "agent": renamed}))],
            Ok(&|s| assert_eq!(s.agents[0].name, "Renamed Agent")),
        );
        check(vec![line(1, serde_json::json!({"event": "update", "agent": newcomer}))], Err("not indexed"));
        let erc_uaid = erc.uaid.clone();
        check(
            vec![line(5, serde_json::json!({"event": "delete", "uaid": erc.uaid}))],
            Ok(&|s| {
                assert!(s.agents.iter().all(|a| a.uaid != erc_uaid));
                assert!(s.feedback.iter().all(|f| erc_uaid != f.uaid));
            }),
        );
        check(vec![line(1, serde_json::json!({"event": "delete", "uaid": "uaid:aid:x;uid=0"}))], Err("not indexed"));
        let client = entry.client.clone();
        check(
            vec![line(1, serde_json::json!({"event": "feedback", "entry": entry}))],
            Ok(&|s| assert!(s.feedback.iter().any(|f| f.client == client))),
        );
        let mut orphan = entry.clone();
        orphan.uaid = known.uaid.to_string();
        if known.registry != "erc-8004" {
            check(vec![line(1, serde_json::json!({"event": "feedback", "entry": orphan}))], Err("not in the erc-8004"));
        }
        // An update that breaks a record is refused like a bad source record.
        let mut broken = known.clone();
        broken.trust_score = 250.0;
        check(vec![line(1, serde_json::json!({"event": "update", "agent": broken}))], Err("trustScore"));
    }

    #[test]
    fn the_last_ownership_of_an_agent_settles_it_whatever_else_the_journal_did() {
        let base = sources();
        let known = base.agents.iter().find(|a| a.verification_status == crate::Verification::Indexed).unwrap();
        let ownership = |state: &str| {
            serde_json::json!({"event": "ownership", "ownership": {
                "uaid": known.uaid, "state": state, "method": "dns-txt", "ownerId": "0.0.1001",
                "verifiedAt": "2026-11-01T10:00:00Z", "prior": Prior::of(known)}})
        };
        let mut renamed = known.clone();
        renamed.name = "Renamed Agent".into();
        let applied = |lines: Vec<String>| {
            let mut s = base.clone();
            apply(&mut s, &records(&lines)).unwrap();
            s.agents.into_iter().find(|a| a.uaid == known.uaid).unwrap()
        };
        let verified = applied(vec![
            line(1, ownership("verified")),
            line(2, serde_json::json!({"event": "update", "agent": renamed})),
        ]);
        assert_eq!(verified.name, "Renamed Agent", "the update applies");
        assert_eq!(verified.verification_status, crate::Verification::Registered, "so does the ownership");
        assert_eq!(verified.trust_signals[crate::ownership::SIGNAL], 100.0);
        let owned = |a: &Agent| (a.verification_status, a.trust_signals.get(crate::ownership::SIGNAL).copied());
        let revoked = applied(vec![line(1, ownership("verified")), line(2, ownership("revoked"))]);
        assert_eq!(owned(&revoked), owned(known), "revoked: as before the proof");
        // Of an agent not indexed: ignored.
        let mut gone = ownership("verified");
        gone["ownership"]["uaid"] = "uaid:aid:x;uid=0".into();
        assert_eq!(owned(&applied(vec![line(1, gone)])), owned(known));
    }

    #[test]
    fn searches_rank_popular_queries_ahead_of_the_seeds() {
        let base = sources();
        let search = |seq, q: &str| line(seq, serde_json::json!({"event": "search", "query": q, "hits": 3}));
        let mut s = base.clone();
        let lines =
            vec![search(1, "MCP  github"), search(2, "zebra agents"), search(3, "zebra agents"), search(4, " ")];
        apply(&mut s, &records(&lines)).unwrap();
        assert_eq!(s.catalog.popular_searches[..2], ["zebra agents".to_string(), "mcp github".to_string()]);
        // Seeds fill the rest, without repeating a counted query.
        assert_eq!(s.catalog.popular_searches.len(), base.catalog.popular_searches.len().max(POPULAR));
        assert_eq!(s.catalog.popular_searches.iter().filter(|q| q.as_str() == "mcp github").count(), 1);
    }

    #[test]
    fn reading_skips_only_an_unfinished_last_line() {
        let dir = std::env::temp_dir().join(format!("almanac-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let search = |seq, q: &str| line(seq, serde_json::json!({"event": "search", "query": q, "hits": 1}));
        std::fs::write(dir.join("20261101T000000Z.jsonl"), format!("{}\n{}\n", search(1, "a"), search(2, "b")))
            .unwrap();
        std::fs::write(dir.join("20261102T000000Z.jsonl"), format!("{}\n{{\"seq\":4,", search(3, "c"))).unwrap();
        std::fs::write(dir.join("notes.txt"), "not a journal").unwrap();
        let got = read(&dir).unwrap();
        assert_eq!(got.iter().map(|(_, r)| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(got[2].0.line, 1);
        // An unfinished line in an earlier file, or a malformed finished one, fails.
        std::fs::write(dir.join("20261101T000000Z.jsonl"), search(1, "a")).unwrap();
        assert!(format!("{:#}", read(&dir).unwrap_err()).contains("no newline"));
        std::fs::write(dir.join("20261101T000000Z.jsonl"), "{\"seq\":1}\n").unwrap();
        assert!(format!("{:#}", read(&dir).unwrap_err()).contains("20261101T000000Z.jsonl:1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
