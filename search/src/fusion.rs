//! Hybrid ranking: reciprocal rank fusion of the agents' embeddings'
//! cosine to the query's and their text relevance. The caller gathers the
//! [`Candidate`]s (the build's agents with their mapped embeddings, the
//! live ones with theirs) and [`fuse`] orders them.

use std::collections::HashMap;

use crate::query::{AgentIndex, Hit};
use crate::records::dot_bytes;

/// Reciprocal rank fusion's constant: how much the top ranks dominate.
pub const FUSION_K: f64 = 60.0;

/// An agent hybrid search may return: where it is (the build is part 0,
/// as in a merge's parts), its id (for ties), its embedding and its text
/// relevance (`None`: the text does not match).
pub struct Candidate<'a> {
    pub hit: Hit,
    pub id: &'a str,
    pub vector: Vector<'a>,
    pub text: Option<f32>,
}

/// An embedding: a live agent's, or a build's as its mapped bytes.
pub enum Vector<'a> {
    Held(&'a [f32]),
    Mapped(&'a [u8]),
}

impl Vector<'_> {
    /// The dot product with `query`, the cosine of unit vectors.
    pub fn dot(&self, query: &[f32]) -> f32 {
        match self {
            Vector::Held(v) => dot(query, v),
            Vector::Mapped(bytes) => dot_bytes(query, bytes),
        }
    }
}

/// Dot product (the cosine of unit vectors).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// BM25F relevance of `query` by agent position; a live index is scored
/// beside the build's (so the two compare).
pub fn text_scores(index: &AgentIndex, query: &str, build: Option<&AgentIndex>) -> HashMap<usize, f32> {
    index.text.scores(query, build.map(|b| &b.text)).into_iter().map(|(i, score)| (i as usize, score)).collect()
}

/// Reciprocal rank fusion of the cosine ranking and the text ranking of
/// `candidates`: positions in `candidates` with their fused score, best
/// first, ties (in each ranking and in the fusion) by agent id.
/// O(n log n) in the candidates.
pub fn fuse(query: &[f32], candidates: &[Candidate]) -> Vec<(usize, f64)> {
    let mut score = vec![0f64; candidates.len()];
    let mut add = |ranked: Vec<(usize, f32)>| {
        let mut ranked = ranked;
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| candidates[a.0].id.cmp(candidates[b.0].id)));
        for (rank, (n, _)) in ranked.into_iter().enumerate() {
            score[n] += 1.0 / (FUSION_K + rank as f64 + 1.0);
        }
    };
    add(candidates.iter().enumerate().map(|(n, c)| (n, c.vector.dot(query))).collect());
    add(candidates.iter().enumerate().filter_map(|(n, c)| c.text.map(|t| (n, t))).collect());
    let mut out: Vec<(usize, f64)> = score.into_iter().enumerate().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| candidates[a.0].id.cmp(candidates[b.0].id)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case: candidates as (id, embedding, text score), and the ids in
    /// the fused order.
    #[test]
    fn fusion_orders_by_the_sum_of_reciprocal_ranks() {
        let query = [1.0, 0.0];
        type Case = (&'static [(&'static str, [f32; 2], Option<f32>)], &'static [&'static str]);
        let cases: &[Case] = &[
            // First in both rankings first; last in both last.
            (&[("b", [0.5, 0.5], Some(1.0)), ("a", [1.0, 0.0], Some(3.0)), ("c", [0.0, 1.0], None)], &["a", "b", "c"]),
            // First by cosine and by text apart: a tie, broken by id.
            (&[("y", [1.0, 0.0], None), ("x", [0.0, 1.0], Some(2.0))], &["x", "y"]),
            // No text match at all: the cosine order.
            (&[("p", [0.2, 0.9], None), ("q", [0.9, 0.2], None), ("r", [0.5, 0.5], None)], &["q", "r", "p"]),
            // Equal cosines ranked by id (k, m, n); n's text match lifts it
            // above both (1/63 + 1/61 against 1/61).
            (&[("m", [0.6, 0.0], None), ("k", [0.6, 0.0], None), ("n", [0.6, 0.0], Some(0.1))], &["n", "k", "m"]),
        ];
        for (candidates, expected) in cases {
            let held: Vec<Candidate> = candidates
                .iter()
                .enumerate()
                .map(|(at, (id, vector, text))| Candidate {
                    hit: Hit { part: 0, at },
                    id,
                    vector: Vector::Held(vector),
                    text: *text,
                })
                .collect();
            let fused = fuse(&query, &held);
            let order: Vec<&str> = fused.iter().map(|(n, _)| held[*n].id).collect();
            assert_eq!(&order, expected, "{candidates:?}");
            assert!(fused.windows(2).all(|w| w[0].1 >= w[1].1), "{candidates:?}: best first");
        }
    }

    /// A mapped embedding (little-endian bytes, as `vectors.bin` holds
    /// them) has the dot product of the same vector held.
    #[test]
    fn a_mapped_vector_is_the_held_one() {
        let vector = [0.25f32, -0.5, 0.75];
        let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
        let query = [1.0f32, 2.0, 3.0];
        assert_eq!(Vector::Mapped(&bytes).dot(&query), Vector::Held(&vector).dot(&query));
        assert_eq!(dot(&query, &vector), 0.25 - 1.0 + 2.25);
    }
}
