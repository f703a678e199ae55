//! A build's search index folder (`data/search/<id>/`): the text index
//! (`broker::text`), the columns (`broker::columns`) and the records, keys,
//! feedback and embeddings (`broker::records`) of the same agents in the
//! same order, written together as the agents stream past and opened together
//! by the api.

use std::path::Path;

use anyhow::{Context, Result};

use super::columns::{self, Columns};
use super::query::AgentIndex;
use super::records::{self, Batch, Feedback, Records, Vectors};
use super::text::{TextIndex, TextWriter};

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

    /// Ends the folder: the records and columns written and synced, then
    /// the text index made from the records (read back in id order, a
    /// batch at a time over the cores), merged and committed.
    pub fn finish(self, dir: &Path) -> Result<()> {
        use rayon::prelude::*;
        self.records.finish()?;
        let columns = self.columns.finish();
        columns::save(&columns, dir)?;
        let records = Records::open(dir)?;
        let mut text = TextWriter::create(dir, self.threads, self.memory)?;
        let mut by_id = vec![0u32; columns.len];
        columns.id_rank.iter().enumerate().for_each(|(position, rank)| by_id[*rank as usize] = position as u32);
        for (batch, positions) in by_id.chunks(TEXT_BATCH).enumerate() {
            let agents = positions
                .par_iter()
                .enumerate()
                .map(|(n, at)| {
                    let agent = records.agent(*at as usize)?.into_owned();
                    Ok((*at, (batch * TEXT_BATCH + n) as u32, agent))
                })
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
    use crate::broker::bits::Bits;
    use crate::broker::generate::agents;
    use crate::broker::query::{merge, search, Merged, Part, SearchQuery};

    /// A folder written from a stream answers every search, alone and
    /// merged with a live index, as the same agents held in memory.
    #[test]
    fn a_written_folder_searches_as_the_agents_held_in_memory() {
        let set = agents(300, 13);
        let (built, live) = set.split_at(260);
        let dir = std::env::temp_dir().join(format!("almanac-search-folder-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut writer = Writer::create(&dir, built.len(), None, 2, 40_000_000).unwrap();
        for batch in built.chunks(50) {
            let json: Vec<String> = batch.iter().map(|a| serde_json::to_string(a).unwrap()).collect();
            let feedback = vec![&[][..]; batch.len()];
            writer.add(&Batch { agents: batch, json: &json, feedback: &feedback, vectors: None }).unwrap();
        }
        writer.finish(&dir).unwrap();
        let (opened, held) = (open(&dir).unwrap().index, AgentIndex::build(built.to_vec()));
        let live = AgentIndex::build(live.to_vec());
        let ids = |index: &[&AgentIndex], merged: &Merged| -> Vec<String> {
            merged.hits.iter().map(|h| index[h.part].records.keys(h.at).id.to_string()).collect()
        };
        let (none, some) = (Bits::empty(260), Bits::from_positions(40, [3]));
        for raw in [
            "",
            "sortBy=name&page=2&limit=30",
            "sortBy=most-available&sortOrder=asc",
            "sortBy=oldest&registries=hashgraph-online",
            "sortBy=trust-score&limit=100&includeAggregations=true",
            "q=translator&sortBy=most-recent",
            "online=true&minTrust=30&sortBy=name",
        ] {
            let query = SearchQuery::parse(raw).unwrap();
            let (a, b) = (search(&opened, &query), search(&held, &query));
            assert_eq!((a.hits, a.total, a.aggregations), (b.hits, b.total, b.aggregations), "{raw}");
            let parts = |base: &AgentIndex| -> Merged {
                let base_part = Part { index: base, excluded: &none, reference: None };
                let live_part = Part { index: &live, excluded: &some, reference: Some(&base.text) };
                merge(&[base_part, live_part], &query)
            };
            let (a, b) = (parts(&opened), parts(&held));
            assert_eq!(ids(&[&opened, &live], &a), ids(&[&held, &live], &b), "{raw}");
            assert!(!a.hits.is_empty(), "{raw}");
        }
        // Relevance: the same agents, in the same order where scores differ.
        let query = SearchQuery::parse("q=data+analytics&limit=300").unwrap();
        let (a, b) = (search(&opened, &query), search(&held, &query));
        let (mut x, mut y) = (a.hits.clone(), b.hits.clone());
        x.sort();
        y.sort();
        assert_eq!(x, y);
        assert!(!x.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
