//! A build's agents as the api holds them: the search index the generator
//! wrote (text index, records, feedback and embeddings mapped, columns
//! read) and the catalog. Loaded by `published`, read by the handlers in
//! `broker`. No agent record is in the heap: a hit is its record's mapped
//! bytes, a lookup reads the keys, an answer made live reads one agent's
//! feedback.
//!
//! Agents registered, updated or deleted since the build are in front of
//! it, in the live overlay (`super::overlay`).

use std::borrow::Cow;
use std::collections::HashMap;

use broker_model::catalog::{Catalog, FeedbackEntry};
use broker_model::Agent;
use broker_site::store::Stored;
use search::query::{search, AgentIndex, Aggregations, Page, SearchQuery};
use search::records::{self, Vectors};

/// The agents of one build, indexed for the live routes.
pub struct Agents {
    pub index: AgentIndex,
    pub catalog: Catalog,
    /// The agents' embeddings (mapped), when the build has them.
    pub embeddings: Option<Vectors>,
    /// ERC-8004 feedback (for answers made live).
    feedback: Feedback,
    /// The `seq` of the last journal record the build applied.
    pub journal_seq: i64,
    /// When the api loaded this index (RFC 3339).
    pub loaded_at: String,
    /// The snapshot's fingerprint of the broker tables: a build with the
    /// same one shares this index instead of loading its own.
    pub fingerprint: String,
}

impl Agents {
    /// The agents of a snapshot's broker tables (`stored`), searched and
    /// read through `index` (which must hold them all, in order), with their
    /// `feedback` and `embeddings` (checked against `index` as opened).
    pub fn new(
        stored: Stored,
        index: AgentIndex,
        feedback: Feedback,
        embeddings: Option<Vectors>,
    ) -> anyhow::Result<Agents> {
        let Stored { catalog, journal_seq, agents, fingerprint } = stored;
        anyhow::ensure!(index.len() == agents, "the search index holds {} agents, the snapshot {agents}", index.len());
        // Each capability set's best agents, made now rather than on the
        // first `/similar` after a swap.
        let started = std::time::Instant::now();
        let sets = index.similar_sets().len();
        tracing::debug!(sets, took = ?started.elapsed(), "similar agents ranked");
        Ok(Agents {
            feedback,
            journal_seq: journal_seq as i64,
            index,
            catalog,
            embeddings,
            loaded_at: chrono_now(),
            fingerprint,
        })
    }

    /// The position of the agent with this UAID, if indexed.
    pub fn position(&self, uaid: &str) -> Option<usize> {
        self.index.records.find(uaid)
    }

    /// The agent with this UAID, if indexed, read from its record (an
    /// error when the record is damaged).
    pub fn agent(&self, uaid: &str) -> anyhow::Result<Option<Cow<'_, Agent>>> {
        self.position(uaid).map(|i| self.index.records.agent(i)).transpose()
    }

    /// The build's feedback entries about the agent with this UAID (an
    /// error when the build's record of them is damaged).
    pub fn feedback(&self, uaid: &str) -> anyhow::Result<Vec<FeedbackEntry>> {
        match &self.feedback {
            Feedback::Held(by_uaid) => Ok(by_uaid.get(uaid).cloned().unwrap_or_default()),
            Feedback::Mapped(file) => self.position(uaid).map_or(Ok(Vec::new()), |i| file.get(i)),
        }
    }

    /// Agent `i`'s search hit, as JSON.
    pub fn hit(&self, i: usize) -> anyhow::Result<Cow<'_, [u8]>> {
        self.index.records.json(i)
    }

    pub fn search(&self, query: &SearchQuery) -> Page {
        search(&self.index, query)
    }

    /// `{hits, total, page, limit}` (and `aggregations` when asked), the
    /// hits spliced from their serialised form.
    pub fn page_body(&self, page: &Page) -> anyhow::Result<Vec<u8>> {
        let hits = page.hits.iter().map(|i| self.hit(*i)).collect::<anyhow::Result<Vec<_>>>()?;
        page_body(&hits, page.total, page.page, page.limit, page.aggregations.as_ref())
    }
}

/// The build's ERC-8004 feedback: mapped from its search index folder, or
/// held by UAID (a build made in memory).
pub enum Feedback {
    Mapped(records::Feedback),
    Held(HashMap<String, Vec<FeedbackEntry>>),
}

impl Feedback {
    /// `entries` held by UAID.
    pub fn held(entries: Vec<FeedbackEntry>) -> Feedback {
        let mut by_uaid: HashMap<String, Vec<FeedbackEntry>> = HashMap::new();
        for entry in entries {
            by_uaid.entry(entry.uaid.clone()).or_default().push(entry);
        }
        Feedback::Held(by_uaid)
    }
}

/// A search answer from hits already serialised; an error for a hit
/// whose record is empty (what a damaged records file reads as).
pub fn page_body(
    hits: &[Cow<'_, [u8]>],
    total: usize,
    page: usize,
    limit: usize,
    aggregations: Option<&Aggregations>,
) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(64 + hits.iter().map(|h| h.len() + 1).sum::<usize>());
    out.extend_from_slice(b"{\"hits\":[");
    for (n, hit) in hits.iter().enumerate() {
        anyhow::ensure!(!hit.is_empty(), "hit {n} of the page has an empty record");
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(hit);
    }
    out.extend_from_slice(format!("],\"total\":{total},\"page\":{page},\"limit\":{limit}").as_bytes());
    if let Some(aggregations) = aggregations {
        out.extend_from_slice(b",\"aggregations\":");
        serde_json::to_writer(&mut out, aggregations).expect("aggregations serialise");
    }
    out.push(b'}');
    Ok(out)
}

/// The current UTC time, RFC 3339 (a live answer's own time, never a file's).
fn chrono_now() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    shared::timestamp::Timestamp(now.as_nanos() as u64).iso8601()
}
