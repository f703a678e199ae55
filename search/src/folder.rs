//! A build's search index folder (`data/search/<id>/`): the text index
//! (`text`), the columns (`columns`) and the records, keys,
//! feedback and embeddings (`records`) of the same agents in the
//! same order, written together as the agents stream past and opened together
//! by the api.
//!
//! The [`Writer`] feeds the columns and records each [`Batch`] (agents,
//! records, feedback, embeddings). At `finish` the records are written again
//! and the columns moved into id order (no agent in a stream knows its rank
//! by id before the last has passed: `records::reorder`, pages released as it
//! goes; `Columns::in_id_order`), so an agent's position is its rank by id
//! throughout the folder; then the text index is made from the records, a
//! batch at a time over the cores. [`open`] maps text, records, feedback and
//! embeddings, reads the columns, and checks that all hold as many agents.

use std::path::Path;

use anyhow::{Context, Result};

use crate::columns::{self, Columns};
use crate::query::AgentIndex;
use crate::records::{self, Batch, Feedback, Records, Vectors};
use crate::text::{TextIndex, TextWriter};

/// How many agents the text index is given at a time.
const TEXT_BATCH: usize = 4096;

/// Writes a search index folder from agents given in position order: the
/// records and columns as they come, the text index at the end, from the
/// records written, in the order of the agents' ids (which no agent in a
/// stream can know before the last has passed).
pub struct Writer {
    columns: columns::Builder,
    records: records::Writer,
    /// The text index's threads and memory, taken at the end.
    threads: usize,
    memory: usize,
}

impl Writer {
    /// Starts the folder `dir` (made here) for `count` agents, with their
    /// embeddings when they have some (made by `model`); the text index is
    /// made on `threads` within `memory` bytes.
    pub fn create(dir: &Path, count: usize, model: Option<&str>, threads: usize, memory: usize) -> Result<Writer> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Writer {
            columns: columns::Builder::new(count),
            records: records::Writer::create(dir, model)?,
            threads,
            memory,
        })
    }

    /// Adds the next agents.
    pub fn add(&mut self, batch: &Batch) -> Result<()> {
        batch.agents.iter().for_each(|agent| self.columns.add(agent));
        self.records.add(batch)
    }

    /// Ends the folder: the records written and synced, then written again
    /// in the order of the agents' ids (which no agent in a stream can know
    /// before the last has passed), the columns moved to that order and
    /// written, and the text index made from the records (read back a
    /// batch at a time over the cores), merged and committed. An agent's
    /// position is then its rank by id everywhere in the folder.
    pub fn finish(self, dir: &Path) -> Result<()> {
        use rayon::prelude::*;
        self.records.finish()?;
        let columns = self.columns.finish();
        records::reorder(dir, &columns.id_order())?;
        let columns = columns.in_id_order();
        columns::save(&columns, dir)?;
        let records = Records::open(dir)?;
        let mut text = TextWriter::create(dir, self.threads, self.memory)?;
        for start in (0..columns.len).step_by(TEXT_BATCH) {
            let agents = (start..(start + TEXT_BATCH).min(columns.len))
                .into_par_iter()
                .map(|at| Ok((at as u32, at as u32, records.agent(at)?.into_owned())))
                .collect::<Result<Vec<_>>>()?;
            text.add(&agents)?;
            records.release()?;
        }
        text.finish()
    }
}

/// A search index folder, opened.
pub struct Folder {
    pub index: AgentIndex,
    pub feedback: Feedback,
    pub vectors: Option<Vectors>,
}

/// The agents of the search index folder `dir`: mapped (the text index,
/// records, feedback and embeddings) and read (the columns), checked to
/// hold as many.
pub fn open(dir: &Path) -> Result<Folder> {
    let context = || format!("the search index in {}", dir.display());
    let text = TextIndex::open(dir)?;
    let columns: Columns = columns::load(dir)?;
    let records = Records::open(dir)?;
    let index = AgentIndex::of_parts(records, text, columns).with_context(context)?;
    let (feedback, vectors) = (Feedback::open(dir)?, Vectors::open(dir)?);
    anyhow::ensure!(
        feedback.len() == index.len() && vectors.as_ref().is_none_or(|v| v.len() == index.len()),
        "{}: {} agents, {} agents' feedback, {} embeddings",
        context(),
        index.len(),
        feedback.len(),
        vectors.as_ref().map_or(0, Vectors::len)
    );
    Ok(Folder { index, feedback, vectors })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::Bits;
    use crate::query::{merge, search, Merged, Part, SearchQuery, SortBy};
    use broker_model::catalog::FeedbackEntry;
    use broker_model::generate::agents;
    use broker_model::Agent;

    /// A folder written from a stream answers every search, alone and
    /// merged with a live index, as the same agents held in memory; its
    /// agents are in id order, each with its own record, feedback and
    /// embedding, found by UAID.
    #[test]
    fn a_written_folder_searches_as_the_agents_held_in_memory() {
        let set = agents(300, 13);
        let (built, live) = set.split_at(260);
        let feedback = broker_model::generate::feedback(built, 5);
        let dir = std::env::temp_dir().join(format!("almanac-search-folder-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut writer = Writer::create(&dir, built.len(), Some("test-model"), 2, 40_000_000).unwrap();
        // An agent's embedding is its place in the stream.
        let embedding = |n: usize| vec![n as f32, 1.0];
        for (b, batch) in built.chunks(50).enumerate() {
            let json: Vec<String> = batch.iter().map(|a| serde_json::to_string(a).unwrap()).collect();
            let entries: Vec<Vec<&FeedbackEntry>> =
                batch.iter().map(|a| feedback.iter().filter(|f| f.uaid == a.uaid.as_str()).collect()).collect();
            let entries: Vec<&[&FeedbackEntry]> = entries.iter().map(Vec::as_slice).collect();
            let vectors: Vec<Vec<f32>> = (0..batch.len()).map(|n| embedding(b * 50 + n)).collect();
            let batch = Batch { agents: batch, json: &json, feedback: &entries, vectors: Some(&vectors) };
            writer.add(&batch).unwrap();
        }
        writer.finish(&dir).unwrap();
        let folder = open(&dir).unwrap();
        let (opened, held) = (&folder.index, AgentIndex::build(built.to_vec()));
        let mut by_id: Vec<&Agent> = built.iter().collect();
        by_id.sort_by(|a, b| a.id.cmp(&b.id));
        assert!(opened.columns.positions_are_ranks());
        // Some agents with feedback moved.
        let has_feedback = |a: &Agent| feedback.iter().any(|f| f.uaid == a.uaid.as_str());
        assert!(by_id.iter().enumerate().any(|(at, a)| built[at].id != a.id && has_feedback(a)));
        let vectors = folder.vectors.as_ref().unwrap();
        for (at, agent) in by_id.iter().enumerate() {
            assert_eq!(opened.records.agent(at).unwrap().as_ref(), *agent);
            assert_eq!(opened.records.find(agent.uaid.as_str()), Some(at));
            let own: Vec<&FeedbackEntry> = feedback.iter().filter(|f| f.uaid == agent.uaid.as_str()).collect();
            assert_eq!(folder.feedback.get(at).unwrap().iter().collect::<Vec<_>>(), own);
            let streamed = built.iter().position(|a| a.id == agent.id).unwrap();
            let bytes: Vec<u8> = embedding(streamed).iter().flat_map(|x| x.to_le_bytes()).collect();
            assert_eq!(vectors.get(at), bytes.as_slice());
        }
        let live = AgentIndex::build(live.to_vec());
        let ids = |index: &AgentIndex, hits: &[usize]| -> Vec<String> {
            hits.iter().map(|h| index.records.keys(*h).id.to_string()).collect()
        };
        let merged_ids = |index: &[&AgentIndex], merged: &Merged| -> Vec<String> {
            merged.hits.iter().map(|h| index[h.part].records.keys(h.at).id.to_string()).collect()
        };
        let (none, some) = (Bits::empty(260), Bits::from_positions(40, [3]));
        let sorted = |sort: SortBy| SearchQuery { sort_by: Some(sort), ..SearchQuery::default() };
        let translator = Some("translator".to_string());
        let queries = [
            SearchQuery::default(),
            SearchQuery { page: 2, limit: 30, ..sorted(SortBy::Name) },
            SearchQuery { ascending: Some(true), ..sorted(SortBy::MostAvailable) },
            SearchQuery { registries: vec!["hashgraph-online".into()], ..sorted(SortBy::Oldest) },
            SearchQuery { limit: 100, include_aggregations: true, ..sorted(SortBy::TrustScore) },
            SearchQuery { q: translator.clone(), ..sorted(SortBy::MostRecent) },
            SearchQuery { q: Some("translator ledger".into()), limit: 50, ..SearchQuery::default() },
            SearchQuery { online: true, min_trust: Some(30.0), ..sorted(SortBy::Name) },
            SearchQuery {
                metadata: [(vec!["isFree".to_string()], vec!["true".to_string()])].into(),
                capabilities: vec!["0".into()],
                ..sorted(SortBy::Oldest)
            },
        ];
        for query in queries {
            let (a, b) = (search(opened, &query), search(&held, &query));
            assert_eq!(ids(opened, &a.hits), ids(&held, &b.hits), "{query:?}");
            assert_eq!((a.total, a.aggregations, a.scores), (b.total, b.aggregations, b.scores), "{query:?}");
            let parts = |base: &AgentIndex| -> Merged {
                let base_part = Part { index: base, excluded: &none, reference: None };
                let live_part = Part { index: &live, excluded: &some, reference: Some(&base.text) };
                merge(&[base_part, live_part], &query)
            };
            let (a, b) = (parts(opened), parts(&held));
            assert_eq!(merged_ids(&[opened, &live], &a), merged_ids(&[&held, &live], &b), "{query:?}");
            assert!(!a.hits.is_empty(), "{query:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
