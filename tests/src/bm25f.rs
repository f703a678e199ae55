//! The baseline of `bench text`: the hand-written relevance engine the
//! api used before tantivy (BM25F over lower-cased words, no stemming, no
//! prefixes, built in memory), kept so the benchmark can set the two side
//! by side on one corpus and one query mix.
//!
//! BM25F: term frequencies and lengths are summed with each field's weight
//! before the usual saturation and length normalisation.

use std::collections::HashMap;

use broker_model::Agent;
use search::text::{tokens, weighted_text};

/// Saturation and length normalisation (the usual BM25 defaults).
const K1: f32 = 1.2;
const B: f32 = 0.75;

pub struct TextIndex {
    /// Term to (document, impact), documents ascending. The impact is the
    /// query-independent part of BM25, `tf (k1 + 1) / (tf + k1 (1 - b + b
    /// len / avg))`, computed once here; a query multiplies it by the
    /// term's idf.
    postings: HashMap<String, Vec<(u32, f32)>>,
    documents: usize,
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
            // The same texts as the new engine, at half its whole-number
            // weights: name 3, capability labels 2, registry and protocols
            // 1.5, description 1, metadata 0.5.
            weighted_text(agent, |text, weight| add(text, weight as f32 / 2.0));
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
        TextIndex { postings, documents: lengths.len() }
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
