//! Relevance for `q`: BM25 over an agent's fields, with field weights
//! (BM25F: term frequencies and lengths are summed with each field's
//! weight before the usual saturation and length normalisation).
//!
//! The index is built once per build, in memory, from the agents; a query
//! walks only the postings of its terms. Pure: no IO.

use std::collections::HashMap;

use super::Agent;

/// Saturation and length normalisation (the usual BM25 defaults).
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// How much a term counts in each field.
const NAME: f32 = 3.0;
const CAPABILITIES: f32 = 2.0;
const TAGS: f32 = 1.5;
const DESCRIPTION: f32 = 1.0;
const METADATA: f32 = 0.5;

/// Lower-cased runs of letters and digits.
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase)
}

pub struct TextIndex {
    /// Term to (document, impact), documents ascending. The impact is the
    /// query-independent part of BM25, `tf (k1 + 1) / (tf + k1 (1 - b + b
    /// len / avg))`, computed once here; a query multiplies it by the
    /// term's idf.
    postings: HashMap<String, Vec<(u32, f32)>>,
    documents: usize,
    /// Each document's weighted length, and their average: what
    /// [`TextIndex::search_beside`] needs to score against another index.
    lengths: Vec<f32>,
    average: f32,
}

impl TextIndex {
    pub fn build(agents: &[Agent]) -> TextIndex {
        let mut postings: HashMap<String, Vec<(u32, f32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(agents.len());
        for (doc, agent) in agents.iter().enumerate() {
            let mut counts: HashMap<String, f32> = HashMap::new();
            let mut length = 0.0;
            let mut add = |text: &str, weight: f32| {
                for token in tokens(text) {
                    *counts.entry(token).or_default() += weight;
                    length += weight;
                }
            };
            add(&agent.name, NAME);
            for label in &agent.capability_labels {
                add(label, CAPABILITIES);
            }
            add(&agent.registry, TAGS);
            for protocol in &agent.protocols {
                add(protocol, TAGS);
            }
            add(&agent.description, DESCRIPTION);
            for (key, value) in &agent.metadata {
                add(key, METADATA);
                metadata_text(value, &mut |text| add(text, METADATA));
            }
            lengths.push(length);
            for (term, tf) in counts {
                postings.entry(term).or_default().push((doc as u32, tf));
            }
        }
        let average = if lengths.is_empty() { 1.0 } else { lengths.iter().sum::<f32>() / lengths.len() as f32 };
        let average = average.max(f32::EPSILON);
        for list in postings.values_mut() {
            for (doc, tf) in list.iter_mut() {
                let norm = K1 * (1.0 - B + B * lengths[*doc as usize] / average);
                *tf = *tf * (K1 + 1.0) / (*tf + norm);
            }
        }
        TextIndex { postings, documents: lengths.len(), lengths, average }
    }

    /// Every document matching any term of `query`, with its score (any
    /// order). A term repeated in the query counts once.
    pub fn search(&self, query: &str) -> Vec<(u32, f32)> {
        let mut terms: Vec<String> = tokens(query).collect();
        terms.sort();
        terms.dedup();
        let n = self.documents as f32;
        let lists: Vec<&Vec<(u32, f32)>> = terms.iter().filter_map(|t| self.postings.get(t)).collect();
        // Scores accumulate in a dense array, far cheaper than a map when a
        // common term matches most of the index. The array is kept per
        // thread and only its touched slots are cleared after.
        thread_local! {
            static SCORES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        SCORES.with_borrow_mut(|scores| {
            scores.resize(self.documents.max(scores.len()), 0.0);
            let mut touched: Vec<u32> = Vec::new();
            for list in lists {
                let df = list.len() as f32;
                let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                for &(doc, impact) in list {
                    let slot = &mut scores[doc as usize];
                    if *slot == 0.0 {
                        touched.push(doc);
                    }
                    *slot += idf * impact;
                }
            }
            touched.into_iter().map(|doc| (doc, std::mem::take(&mut scores[doc as usize]))).collect()
        })
    }
}

impl TextIndex {
    /// [`TextIndex::search`], or with a `reference`
    /// [`TextIndex::search_beside`] it.
    pub fn scores(&self, query: &str, reference: Option<&TextIndex>) -> Vec<(u32, f32)> {
        match reference {
            Some(reference) => self.search_beside(query, reference),
            None => self.search(query),
        }
    }

    /// [`TextIndex::search`] of this index as if its documents were part
    /// of `reference`: term rarity and the average length are those of both
    /// together. For a small index beside a large one (the live overlay
    /// beside a build), so that their scores compare; it walks its own
    /// postings only, recovering each term frequency from its impact.
    pub fn search_beside(&self, query: &str, reference: &TextIndex) -> Vec<(u32, f32)> {
        let mut terms: Vec<String> = tokens(query).collect();
        terms.sort();
        terms.dedup();
        let n = (self.documents + reference.documents) as f32;
        let average = ((self.average * self.documents as f32 + reference.average * reference.documents as f32)
            / n.max(1.0))
        .max(f32::EPSILON);
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for term in terms {
            let Some(list) = self.postings.get(&term) else { continue };
            let df = (list.len() + reference.postings.get(&term).map_or(0, Vec::len)) as f32;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(doc, impact) in list {
                let length = self.lengths[doc as usize];
                let own = K1 * (1.0 - B + B * length / self.average.max(f32::EPSILON));
                let tf = impact * own / (K1 + 1.0 - impact);
                let norm = K1 * (1.0 - B + B * length / average);
                *scores.entry(doc).or_default() += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        scores.into_iter().collect()
    }
}

/// Calls `f` with every string value (and key) in metadata, nested or not.
fn metadata_text(value: &serde_json::Value, f: &mut impl FnMut(&str)) {
    match value {
        serde_json::Value::String(s) => f(s),
        serde_json::Value::Array(items) => items.iter().for_each(|v| metadata_text(v, f)),
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                f(k);
                metadata_text(v, f);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::generate::agents;

    fn ranked(index: &TextIndex, query: &str) -> Vec<u32> {
        let mut hits = index.search(query);
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.into_iter().map(|(doc, _)| doc).collect()
    }

    #[test]
    fn tokens_are_lowercase_alphanumeric_runs() {
        let t: Vec<String> = tokens("Smart-Contract AUDIT, v2 (ü)").collect();
        assert_eq!(t, ["smart", "contract", "audit", "v2", "ü"]);
    }

    #[test]
    fn relevance_follows_fields_and_rarity() {
        let mut set = agents(6, 3);
        let blank = |a: &mut Agent, name: &str, description: &str, labels: &[&str]| {
            a.name = name.into();
            a.description = description.into();
            a.capability_labels = labels.iter().map(|s| s.to_string()).collect();
            a.metadata.clear();
            a.registry = "r".into();
            a.protocols = vec!["p".into()];
        };
        blank(&mut set[0], "Harbor Auditor", "reviews solidity", &["Smart Contract Audit"]);
        blank(&mut set[1], "Quiet Writer", "drafts posts; can also audit prose", &["Text Generation"]);
        blank(&mut set[2], "Tidal Tracker", "follows wallets", &["Transaction Analytics"]);
        blank(&mut set[3], "Audit Audit", "audit audit audit audit", &["Smart Contract Audit"]);
        blank(&mut set[4], "Signal Translator", "translates text", &["Language Translation"]);
        blank(&mut set[5], "Lumen Digest", "summaries of long text", &["Summarization and Extraction"]);
        set[5].metadata.insert("category".into(), serde_json::json!({"focus": "governance"}));
        let index = TextIndex::build(&set);

        // Each case: query, the documents expected first (in order).
        let check = |query: &str, expected: &[u32]| {
            let got = ranked(&index, query);
            assert_eq!(&got[..expected.len().min(got.len())], expected, "{query}: {got:?}");
        };
        check("audit", &[3, 0, 1]); // name and capability outweigh description
        check("AUDIT audit", &[3, 0, 1]); // case and repeats do not matter
        check("solidity audit", &[0, 3, 1]); // a rare term lifts the agent that has it
        check("translation", &[4]);
        check("governance", &[5]); // nested metadata values are searched
        check("nothing-like-this", &[]);
        assert!(index.search("").is_empty());
    }

    /// A small index scored beside a large one gives the scores one index
    /// holding both would give.
    #[test]
    fn scores_beside_a_reference_are_those_of_one_index() {
        let set = agents(400, 11);
        let whole = TextIndex::build(&set);
        let (large, small) = set.split_at(392);
        let (large, small) = (TextIndex::build(large), TextIndex::build(small));
        for query in ["text generation", "audit solidity contracts", "translation", "agents data", "nothing-like-this"]
        {
            let mut expected: Vec<(u32, f32)> =
                whole.search(query).into_iter().filter(|(doc, _)| *doc >= 392).map(|(d, s)| (d - 392, s)).collect();
            let mut got = small.search_beside(query, &large);
            expected.sort_by_key(|(doc, _)| *doc);
            got.sort_by_key(|(doc, _)| *doc);
            assert_eq!(got.len(), expected.len(), "{query}");
            for ((d, s), (e, t)) in got.iter().zip(&expected) {
                assert_eq!(d, e, "{query}");
                assert!((s - t).abs() <= 1e-4 * t.abs().max(1.0), "{query}: doc {d} scores {s}, one index {t}");
            }
        }
    }
}
