//! A build's agents as the api holds them: the search index, the catalog,
//! UAID lookups and each agent's search hit serialised once. Loaded from
//! the build's snapshot by `published`, read by the handlers in
//! `broker`.
//!
//! Agents registered, updated or deleted since the build are in front of
//! it, in the live overlay (`super::overlay`).

use std::collections::HashMap;

use almanac::broker::catalog::{Catalog, FeedbackEntry};
use almanac::broker::columns::Columns;
use almanac::broker::query::{search, AgentIndex, Aggregations, Page, SearchQuery};
use almanac::broker::store::{Embeddings, Stored};
use almanac::broker::text::TextIndex;
use almanac::broker::Agent;

/// The agents of one build, indexed for the live routes.
pub struct Agents {
    pub index: AgentIndex,
    pub catalog: Catalog,
    by_uaid: HashMap<String, u32>,
    /// Each agent's search hit, serialised once.
    hits: Vec<Box<str>>,
    pub embeddings: Option<Embeddings>,
    /// ERC-8004 feedback by UAID (for answers made live).
    pub feedback: HashMap<String, Vec<FeedbackEntry>>,
    /// The `seq` of the last journal record the build applied.
    pub journal_seq: i64,
    /// When the api loaded this index (RFC 3339).
    pub loaded_at: String,
    /// The snapshot's fingerprint of the broker tables: a build with the
    /// same one shares this index instead of loading its own.
    pub fingerprint: String,
}

impl Agents {
    /// The agents of `stored`, searched with the `text` index and the
    /// `columns` the generator wrote for them (which must hold them all, in
    /// order).
    pub fn new(stored: Stored, text: TextIndex, columns: Columns) -> anyhow::Result<Agents> {
        let Stored { sources, embeddings, fingerprint } = stored;
        let hits = sources.agents.iter().map(|a| serde_json::to_string(a).expect("agents serialise").into()).collect();
        let by_uaid = sources.agents.iter().enumerate().map(|(i, a)| (a.uaid.to_string(), i as u32)).collect();
        let mut feedback: HashMap<String, Vec<FeedbackEntry>> = HashMap::new();
        for entry in sources.feedback {
            feedback.entry(entry.uaid.clone()).or_default().push(entry);
        }
        Ok(Agents {
            feedback,
            journal_seq: sources.journal_seq as i64,
            index: AgentIndex::of_parts(sources.agents, text, columns)?,
            catalog: sources.catalog,
            by_uaid,
            hits,
            embeddings,
            loaded_at: chrono_now(),
            fingerprint,
        })
    }

    /// The agent with this UAID, if indexed.
    pub fn agent(&self, uaid: &str) -> Option<(usize, &Agent)> {
        let i = *self.by_uaid.get(uaid)? as usize;
        Some((i, &self.index.agents[i]))
    }

    /// Agent `i`'s search hit, as JSON.
    pub fn hit(&self, i: usize) -> &str {
        &self.hits[i]
    }

    pub fn search(&self, query: &SearchQuery) -> Page {
        search(&self.index, query)
    }

    /// `{hits, total, page, limit}` (and `aggregations` when asked), the
    /// hits spliced from their serialised form.
    pub fn page_body(&self, page: &Page) -> Vec<u8> {
        let hits = page.hits.iter().map(|i| self.hit(*i));
        page_body(hits, page.total, page.page, page.limit, page.aggregations.as_ref())
    }
}

/// A search answer from hits already serialised.
pub fn page_body<'a>(
    hits: impl Iterator<Item = &'a str> + Clone,
    total: usize,
    page: usize,
    limit: usize,
    aggregations: Option<&Aggregations>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + hits.clone().map(|h| h.len() + 1).sum::<usize>());
    out.extend_from_slice(b"{\"hits\":[");
    for (n, hit) in hits.enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(hit.as_bytes());
    }
    out.extend_from_slice(format!("],\"total\":{total},\"page\":{page},\"limit\":{limit}").as_bytes());
    if let Some(aggregations) = aggregations {
        out.extend_from_slice(b",\"aggregations\":");
        serde_json::to_writer(&mut out, aggregations).expect("aggregations serialise");
    }
    out.push(b'}');
    out
}

/// The current UTC time, RFC 3339 (a live answer's own time, never a file's).
fn chrono_now() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    almanac::timestamp::Timestamp(now.as_nanos() as u64).iso8601()
}
