//! Agents changed since the live build, applied to the warehouse alone:
//! what a layer over changed agents is made of (`crate::layer`).
//!
//! When the broker's sources are byte for byte the live build's and the
//! journal only grew, by agents registered, updated or deleted, the new
//! records are the whole difference between the live build's agents and
//! this run's. They are checked as a scan checks them, against the
//! warehouse (which holds the live build's agents) in place of the
//! sources; written into it in one transaction; and what the files are
//! made of is read back from it: the changed agents as they are now and
//! the tally (the directory's rows are read by the caller, beside the
//! exports). Nothing reads the sources or every agent's record.

use std::collections::{HashMap, HashSet};

use anyhow::{bail, Context, Result};
use duckdb_files::sql::Connection;
use sha2::{Digest as _, Sha256};

use broker_model::catalog::{self, Catalog, FeedbackEntry, Subject, FEEDBACK_REGISTRY};
use broker_model::journal::{self, Event, Overlay, Position, Record};
use broker_model::Agent;
use broker_site::render::{time, Tally};
use broker_site::rows::{Digest, Facts, Row};
use broker_site::store::{self, SearchIndex};
use shared::timestamp::Timestamp;

/// The journal's records after the live build's point: agents registered,
/// updated or deleted.
pub struct Delta {
    records: Vec<(Position, Record)>,
    /// The journal point after them.
    pub seq: u64,
    /// The journal's records through `seq`, by their content.
    pub journal_digest: String,
}

/// The journal's `records` as a delta over a build that applied them
/// through `live_seq` (their digest then `live_digest`); else why a whole
/// build is needed.
pub fn after(records: Vec<(Position, Record)>, live_seq: u64, live_digest: &str) -> Result<Delta, &'static str> {
    if journal::digest_through(&records, live_seq) != live_digest {
        return Err("the journal's records the live build applied changed");
    }
    let Some(seq) = records.last().map(|(_, r)| r.seq).filter(|seq| *seq > live_seq) else {
        return Err("the journal changed, but holds no new record");
    };
    let journal_digest = journal::digest_through(&records, seq);
    let records: Vec<(Position, Record)> = records.into_iter().filter(|(_, r)| r.seq > live_seq).collect();
    let agents_only = records.iter().all(|(_, r)| {
        matches!(
            r.event,
            Event::Register { .. }
                | Event::Update { .. }
                | Event::Delete { .. }
                | Event::Availability { .. }
                | Event::Ownership { .. }
        )
    });
    if !agents_only {
        return Err("the journal's new records are not only agents registered, updated, deleted, measured or owned");
    }
    Ok(Delta { records, seq, journal_digest })
}

/// The warehouse after a [`Delta`]: what the layer's files are made of.
pub struct Applied {
    /// The changed agents as they are now (not the deleted), with their
    /// feedback, by UAID.
    pub agents: Vec<Agent>,
    pub feedback: HashMap<String, Vec<FeedbackEntry>>,
    /// The agents deleted, as they were, with their feedback (their files go).
    pub deleted: Vec<(Agent, Vec<FeedbackEntry>)>,
    /// The newest `updatedAt` of every agent, as a time.
    pub updated: Timestamp,
    /// The directory rows of the agents updated or deleted, as they were.
    pub before: Vec<Row>,
    pub tally: Tally,
    pub catalog: Catalog,
    pub journal_seq: u64,
    /// The newest times ([`contribution`]) of the changed agents as they
    /// were (`removed`) and as they are now (`added`).
    removed: (Timestamp, Timestamp),
    added: (Timestamp, Timestamp),
}

impl Applied {
    /// The UAIDs of the agents changed or deleted.
    pub fn changed(&self) -> HashSet<&str> {
        let now = self.agents.iter().map(|a| a.uaid.as_str());
        now.chain(self.deleted.iter().map(|(a, _)| a.uaid.as_str())).collect()
    }

    /// The newest times of every agent's files now, from what they were
    /// (`before`, as [`newest`] found them): `None` when a changed agent
    /// gave one of them (it may have been the only one that did: every
    /// agent must be read again).
    pub fn newest_after(&self, before: (Timestamp, Timestamp)) -> Option<(Timestamp, Timestamp)> {
        if self.removed.0 >= before.0 || self.removed.1 >= before.1 {
            return None;
        }
        Some((before.0.max(self.added.0), before.1.max(self.added.1)))
    }

    /// What the pages say of the agents now, given the newest time of
    /// their pages ([`newest`]).
    pub fn facts(&self, profiles_newest: Timestamp) -> Facts {
        Facts::of(&self.tally, &self.catalog, self.journal_seq, profiles_newest)
    }
}

/// The newest Last-Modified of every agent's JSON files, and of every
/// agent's page, as a build rendering them all would find: from each
/// agent's `updatedAt` (the newest: `updated`), the feedback stored, and the `createdAt`
/// of ERC-8004 agents without feedback (their feedback files' time).
pub fn newest(conn: &Connection, updated: Timestamp) -> Result<(Timestamp, Timestamp)> {
    let feedback = greatest(store::all_feedback(conn)?.iter().map(entry_times));
    let (mut json, pages) = greatest([(updated, updated), feedback].into_iter());
    for created in store::created_without_feedback(conn, FEEDBACK_REGISTRY)? {
        json = json.max(time(&created));
    }
    Ok((json, pages))
}

/// The newest Last-Modified one agent gives its JSON files and its page
/// ([`newest`] is their greatest over every agent), with its feedback.
fn contribution(agent: &Agent, feedback: Option<&Vec<FeedbackEntry>>) -> (Timestamp, Timestamp) {
    let updated = time(&agent.updated_at);
    let feedback = feedback.map(Vec::as_slice).unwrap_or_default();
    let (mut json, page) = greatest(std::iter::once((updated, updated)).chain(feedback.iter().map(entry_times)));
    if agent.registry == FEEDBACK_REGISTRY && feedback.is_empty() {
        json = json.max(time(&agent.created_at));
    }
    (json, page)
}

/// What one feedback entry gives those times: its JSON files' (when it
/// was given, and revoked), and its agent's page's unless it is revoked.
fn entry_times(entry: &FeedbackEntry) -> (Timestamp, Timestamp) {
    let created = time(&entry.created_at);
    let json = entry.revoked_at.as_deref().map_or(created, |revoked| created.max(time(revoked)));
    (json, if entry.revoked { Timestamp::default() } else { created })
}

/// The greatest of several pairs of those times.
fn greatest(each: impl Iterator<Item = (Timestamp, Timestamp)>) -> (Timestamp, Timestamp) {
    each.fold(Default::default(), |(j, p), (json, page)| (j.max(json), p.max(page)))
}

/// Applies `delta` to the warehouse's agents (`conn`), checked as a scan
/// checks the sources; `digest` is this run's, `search` the folder the
/// layer keeps. Nothing changes when a record is refused: the error names
/// its journal line.
pub fn apply(conn: &Connection, delta: &Delta, digest: &Digest, search: &SearchIndex) -> Result<Applied> {
    let catalog = store::catalog(conn)?;
    let overlay = Overlay::new(&delta.records, &mut catalog.clone(), &mut Vec::new()).context("the broker journal")?;
    let mut changes: Vec<journal::Changed> = overlay.changed().collect();
    changes.sort_by(|a, b| a.uaid.cmp(b.uaid));
    let mut uaids: Vec<&str> = changes.iter().map(|c| c.uaid).collect();
    // The agents as the delta leaves them (the records it gives: an agent
    // whose events leave its record as stored is not among them).
    let now: Vec<&Agent> = changes.iter().filter(|c| c.present).filter_map(|c| c.record).collect();
    let mut stored: HashMap<String, (u32, Agent)> =
        store::records_of(conn, &uaids)?.into_iter().map(|(at, agent)| (agent.uaid.to_string(), (at, agent))).collect();
    for change in &changes {
        change.check(stored.contains_key(change.uaid)).context("the broker journal")?;
    }
    // Agents the delta only measured or whose ownership it changed:
    // changed where stored (of an agent deleted since, ignored).
    let fated: HashSet<&str> = uaids.iter().copied().collect();
    let mut measured: Vec<&str> = overlay.settled().filter(|uaid| !fated.contains(uaid)).collect();
    measured.sort_unstable();
    let measured: Vec<(u32, Agent)> = store::records_of(conn, &measured)?;
    for (_, agent) in &measured {
        uaids.push(agent.uaid.as_str());
    }
    let ids: Vec<&str> = now.iter().map(|a| a.id.as_str()).collect();
    check_ids(&now, &store::id_clashes(conn, &uaids, &ids)?)?;

    // The agents as they are now: an updated one in its place, registered
    // ones after every other, in the order registered.
    let mut registered: Vec<(usize, Agent)> = Vec::new();
    let (mut agents, mut positions, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
    for change in &changes {
        let old = stored.get(change.uaid);
        let now = change.record.or(old.map(|(_, a)| a)).filter(|_| change.present);
        let now = now.map(|agent| overlay.settle(agent.clone()));
        match (now, change.added, old) {
            (Some(agent), Some(order), _) => registered.push((order, agent)),
            (Some(agent), None, Some((position, _))) => {
                agents.push(agent);
                positions.push(*position);
            }
            (Some(_), None, None) => unreachable!("checked: an agent not registered is stored"),
            (None, _, _) => deleted.extend(old.map(|(_, a)| a.uaid.to_string())),
        }
    }
    for (position, agent) in &measured {
        agents.push(overlay.settle(agent.clone()));
        positions.push(*position);
        stored.insert(agent.uaid.to_string(), (*position, agent.clone()));
    }
    registered.sort_by_key(|(order, _)| *order);
    let next = store::next_position(conn)?;
    positions.extend((next..).take(registered.len()));
    agents.extend(registered.into_iter().map(|(_, a)| a));

    let mut feedback: HashMap<String, Vec<FeedbackEntry>> = HashMap::new();
    for entry in store::feedback_about(conn, &uaids)? {
        feedback.entry(entry.uaid.clone()).or_default().push(entry);
    }
    let removed = greatest(stored.values().map(|(_, old)| contribution(old, feedback.get(old.uaid.as_str()))));
    let mut shared = broker_site::rows::Shared::default();
    let before: Vec<Row> = stored.values().map(|(_, old)| shared.row(old)).collect();
    let deleted: Vec<(Agent, Vec<FeedbackEntry>)> = deleted
        .iter()
        .map(|uaid| (stored[uaid.as_str()].1.clone(), feedback.remove(uaid.as_str()).unwrap_or_default()))
        .collect();
    check_feedback(&agents, &feedback)?;
    let added = greatest(agents.iter().map(|a| contribution(a, feedback.get(a.uaid.as_str()))));

    let mut tally = store::tally(conn)?.context("the warehouse keeps no tally of its agents")?;
    stored.values().for_each(|(_, old)| tally.remove(&catalog, old));
    agents.iter().for_each(|a| tally.add(&catalog, a));
    let records: Vec<String> = agents.iter().map(|a| serde_json::to_string(a).expect("agents serialise")).collect();
    let fingerprint = {
        let mut hasher = Sha256::new();
        hasher.update(store::tables_fingerprint(conn)?.unwrap_or_default());
        hasher.update(delta.seq.to_le_bytes());
        let record: HashMap<&str, &String> = agents.iter().map(|a| a.uaid.as_str()).zip(&records).collect();
        for uaid in &uaids {
            hasher.update(uaid.as_bytes());
            hasher.update(record.get(uaid).map_or(&b"deleted"[..], |r| r.as_bytes()));
        }
        shared::http::hex(&hasher.finalize())
    };
    let deleted_uaids: Vec<&str> = deleted.iter().map(|(a, _)| a.uaid.as_str()).collect();
    let update = store::Update {
        replaced: &uaids,
        agents: &agents,
        records: &records,
        positions: &positions,
        deleted: &deleted_uaids,
    };
    let mut updated = Timestamp::default();
    let _span = tracing::debug_span!("update").entered();
    store::update(conn, &update, |tx| {
        let (last_update, newest) = tracing::debug_span!("dates").in_scope(|| store::dates(tx))?;
        updated = newest.unwrap_or_default();
        tally.dated(last_update, newest);
        Ok(vec![
            ("journal_seq", Some(delta.seq.to_string())),
            ("journal_digest", Some(delta.journal_digest.clone())),
            ("digest", Some(digest.whole.clone())),
            ("sources_digest", Some(digest.sources.clone())),
            // Only a scan knows the fingerprint of the sources as the
            // journal leaves them: no later run takes these files as its own.
            ("sources", None),
            ("fingerprint", Some(fingerprint)),
            ("tally", Some(serde_json::to_string(&tally).expect("the tally serialises"))),
            store::search_entry(search),
        ])
    })?;
    drop(_span);
    Ok(Applied { agents, feedback, deleted, updated, before, tally, catalog, journal_seq: delta.seq, removed, added })
}

/// Ids stay unique: among the changed agents, and against every stored
/// agent that is not one of them (`clashes`).
fn check_ids(agents: &[&Agent], clashes: &[(String, String)]) -> Result<()> {
    let mut seen = HashSet::new();
    for agent in agents {
        if !seen.insert(agent.id.as_str()) {
            bail!("the broker journal: agent {:?}: field \"id\": used twice", agent.id);
        }
    }
    if let Some((id, uaid)) = clashes.first() {
        bail!("the broker journal: agent {id:?}: field \"id\": used twice (also by {uaid})");
    }
    Ok(())
}

/// The feedback about changed agents still names ERC-8004 agents with
/// their token ids (an update may have changed either).
fn check_feedback(agents: &[Agent], feedback: &HashMap<String, Vec<FeedbackEntry>>) -> Result<()> {
    let by_uaid: HashMap<&str, &Agent> = agents.iter().map(|a| (a.uaid.as_str(), a)).collect();
    let mut entries: Vec<FeedbackEntry> = feedback.values().flatten().cloned().collect();
    entries.sort_by(|a, b| (&a.uaid, &a.client, a.feedback_index).cmp(&(&b.uaid, &b.client, b.feedback_index)));
    let subject = |uaid: &str| {
        by_uaid.get(uaid).map(|a| Subject { id: &a.id, registry: &a.registry, original_id: &a.original_id })
    };
    catalog::validate_feedback_by(&entries, subject, &|_| None).context("feedback.json")
}
