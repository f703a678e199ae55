//! Relevance for `q`, on tantivy: BM25F over an agent's text fields (each
//! field's words counted as many times as the field weighs, in one indexed
//! field, so that frequencies and lengths are weighted sums before BM25's
//! saturation, and a query word is one posting list, not one per field);
//! words stemmed (English), so `agents` finds `agent`; the query's last
//! word also matched as a prefix, so `translat` finds `translation` while
//! it is being typed.
//!
//! An index is made in memory from agents held whole ([`TextIndex::build`],
//! the live overlay's segments and the tests), or written by the generator
//! into a folder beside the build's snapshot ([`TextWriter`]) and opened
//! from it memory-mapped ([`TextIndex::open`]): the api never builds the
//! build's own. Documents carry their agent's position in the build (a
//! fast field), so hits name agents whatever segments hold them.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::ColumnValues;
use tantivy::query::{Bm25StatisticsProvider, BooleanQuery, BoostQuery, Occur, PhrasePrefixQuery, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST};
use tantivy::tokenizer::{
    Language, LowerCaser, PreTokenizedString, RemoveLongFilter, SimpleTokenizer, Stemmer, TextAnalyzer, Token,
};
use tantivy::{DocId, Index, IndexWriter, Score, Searcher, SegmentOrdinal, SegmentReader, TantivyDocument, Term};

use super::bits::Bits;
use super::Agent;

/// How many times a word counts in each field (twice the weights 3, 2,
/// 1.5, 1 and 0.5: whole numbers).
const NAME: usize = 6;
const CAPABILITIES: usize = 4;
const TAGS: usize = 3;
const DESCRIPTION: usize = 2;
const METADATA: usize = 1;

/// What a prefix match of the last word scores: a constant, well below
/// what the word itself scores by BM25 (a whole word matches as its own
/// prefix too).
const PREFIX: Score = 0.3;
/// A last word shorter than this is not taken as a prefix (`a` would match
/// a good part of the vocabulary).
const MIN_PREFIX: usize = 3;

/// The analyzers' names in an index's tokenizer manager.
const STEMMED: &str = "almanac_en";

/// Lower-cased runs of letters and digits (how text is split, before
/// stemming; also how labels become slugs).
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase)
}

/// Lower-case words joined by hyphens: `Code Generation` is `code-generation`.
pub fn slug(label: &str) -> String {
    tokens(label).collect::<Vec<_>>().join("-")
}

/// Split as [`tokens`], lower-cased, words over 40 bytes dropped, stemmed.
fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(Stemmer::new(Language::English))
        .build()
}

/// The schema's fields.
#[derive(Clone, Copy)]
struct Fields {
    /// The weighted words of every text field.
    text: Field,
    position: Field,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let indexing = TextFieldIndexing::default().set_tokenizer(STEMMED).set_index_option(IndexRecordOption::WithFreqs);
    let text = builder.add_text_field("text", TextOptions::default().set_indexing_options(indexing));
    let position = builder.add_u64_field("position", FAST);
    (builder.build(), Fields { text, position })
}

/// Calls `f` with each text of `agent` that search reads and how many
/// times its words count: what is searched, in one place.
pub fn weighted_text(agent: &Agent, mut f: impl FnMut(&str, usize)) {
    f(&agent.name, NAME);
    for label in &agent.capability_labels {
        f(label, CAPABILITIES);
    }
    f(&agent.registry, TAGS);
    for protocol in &agent.protocols {
        f(protocol, TAGS);
    }
    f(&agent.description, DESCRIPTION);
    for (key, value) in &agent.metadata {
        f(key, METADATA);
        metadata_text(value, &mut |text| f(text, METADATA));
    }
}

/// Agent `position`'s document: its words, each as many times as its
/// field weighs.
fn document(analyzer: &mut TextAnalyzer, fields: &Fields, position: u64, agent: &Agent) -> TantivyDocument {
    let mut words: Vec<Token> = Vec::new();
    weighted_text(agent, |text, weight| {
        let mut stream = analyzer.token_stream(text);
        while let Some(token) = stream.next() {
            for _ in 0..weight {
                words.push(Token { position: words.len(), text: token.text.clone(), ..Token::default() });
            }
        }
    });
    let mut doc = TantivyDocument::new();
    doc.add_pre_tokenized_text(fields.text, PreTokenizedString { text: String::new(), tokens: words });
    doc.add_u64(fields.position, position);
    doc
}

/// Calls `f` with every string value (and key) in metadata, nested or not.
pub fn metadata_text(value: &serde_json::Value, f: &mut impl FnMut(&str)) {
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

fn register(index: &Index) {
    index.tokenizers().register(STEMMED, analyzer());
}

/// The text of a set of agents, searchable.
pub struct TextIndex {
    searcher: Searcher,
    /// Per segment, each document's agent position (read from the
    /// `position` fast field once, not per match).
    positions: Vec<Arc<[u32]>>,
    fields: Fields,
    /// The analyzer queries are read with (cloned per query: reading
    /// needs it mutable).
    analyzer: TextAnalyzer,
}

impl TextIndex {
    /// An index of `agents` in memory, agent `i` at position `i`.
    pub fn build(agents: &[Agent]) -> TextIndex {
        let (schema, fields) = schema();
        let index = Index::create_in_ram(schema);
        register(&index);
        // One indexing thread: an overlay segment is small and made often.
        let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000).expect("an index in memory");
        let mut analyzer = analyzer();
        for (position, agent) in agents.iter().enumerate() {
            writer.add_document(document(&mut analyzer, &fields, position as u64, agent)).expect("an index in memory");
        }
        writer.commit().expect("an index in memory");
        writer.wait_merging_threads().expect("an index in memory");
        TextIndex::of(index, fields).expect("an index in memory")
    }

    /// The index the generator wrote into `dir`, memory-mapped.
    pub fn open(dir: &Path) -> Result<TextIndex> {
        let index = Index::open_in_dir(dir).with_context(|| format!("opening the search index {}", dir.display()))?;
        let (schema, fields) = schema();
        if index.schema() != schema {
            anyhow::bail!("the search index {} was written with other fields", dir.display());
        }
        TextIndex::of(index, fields)
    }

    fn of(index: Index, fields: Fields) -> Result<TextIndex> {
        register(&index);
        let reader = index.reader_builder().reload_policy(tantivy::ReloadPolicy::Manual).try_into()?;
        let searcher = reader.searcher();
        let positions = searcher
            .segment_readers()
            .iter()
            .map(|segment| {
                let column = segment.fast_fields().u64("position")?.first_or_default_col(0);
                let max = segment.max_doc();
                anyhow::ensure!(
                    (0..max).all(|doc| column.get_val(doc) <= u64::from(u32::MAX)),
                    "a document's position is out of range"
                );
                Ok((0..max).map(|doc| column.get_val(doc) as u32).collect())
            })
            .collect::<Result<_>>()?;
        Ok(TextIndex { searcher, positions, fields, analyzer: analyzer() })
    }

    /// How many agents the index holds.
    pub fn len(&self) -> usize {
        self.searcher.num_docs() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every agent matching any word of `query`, by position, with its
    /// score (any order). A word repeated in the query counts once.
    pub fn search(&self, query: &str) -> Vec<(u32, f32)> {
        self.scores(query, None, None)
    }

    /// [`TextIndex::search`]; with a `reference`, scored as if this
    /// index's agents were part of it (term rarity and field lengths are
    /// those of both together): for a small index beside a large one (the
    /// live overlay beside a build), so that their scores compare. With
    /// `within`, only the agents in it.
    pub fn scores(&self, query: &str, reference: Option<&TextIndex>, within: Option<&Arc<Bits>>) -> Vec<(u32, f32)> {
        let Some(parsed) = self.query(query) else { return Vec::new() };
        let collector = Positions { positions: &self.positions, within };
        let found = match reference {
            Some(reference) => {
                let both = Both { own: &self.searcher, reference: &reference.searcher };
                self.searcher.search_with_statistics_provider(&parsed, &collector, &both)
            }
            None => self.searcher.search(&parsed, &collector),
        };
        found.expect("a search over mapped or in-memory segments")
    }

    /// `query` as tantivy's: each distinct stemmed word, and the last word
    /// also as a prefix; `None` without words.
    fn query(&self, query: &str) -> Option<BooleanQuery> {
        let mut analyzer = self.analyzer.clone();
        let mut words: Vec<String> = Vec::new();
        let mut stream = analyzer.token_stream(query);
        while let Some(token) = stream.next() {
            if !words.contains(&token.text) {
                words.push(token.text.clone());
            }
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let field = self.fields.text;
        for word in &words {
            let term = TermQuery::new(Term::from_field_text(field, word), IndexRecordOption::WithFreqs);
            clauses.push((Occur::Should, Box::new(term)));
        }
        let last = tokens(query).last().filter(|w| w.len() >= MIN_PREFIX && w.len() <= 40);
        if let Some(prefix) = last {
            let term = PhrasePrefixQuery::new(vec![Term::from_field_text(field, &prefix)]);
            clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(term), PREFIX))));
        }
        (!clauses.is_empty()).then(|| BooleanQuery::new(clauses))
    }
}

/// Writes the build's text index into a folder, agents added in batches as
/// they stream (tantivy's writer threads index them; its memory is held to
/// a budget), then merged into one segment.
pub struct TextWriter {
    index: Index,
    writer: IndexWriter,
    fields: Fields,
    analyzer: TextAnalyzer,
    added: u64,
}

impl TextWriter {
    /// A new index in `dir` (which must be empty or absent), indexing on
    /// `threads` threads within `memory` bytes.
    pub fn create(dir: &Path, threads: usize, memory: usize) -> Result<TextWriter> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let (schema, fields) = schema();
        let index = Index::create_in_dir(dir, schema).with_context(|| format!("creating {}", dir.display()))?;
        register(&index);
        // tantivy asks at least 15 MB per thread.
        let threads = threads.clamp(1, 8).min(memory / 15_000_000).max(1);
        let writer = index.writer_with_num_threads(threads, memory.max(15_000_000 * threads))?;
        Ok(TextWriter { index, writer, fields, analyzer: analyzer(), added: 0 })
    }

    /// Adds the next agents, at the positions that follow.
    pub fn add(&mut self, agents: &[Agent]) -> Result<()> {
        for agent in agents {
            self.writer.add_document(document(&mut self.analyzer, &self.fields, self.added, agent))?;
            self.added += 1;
        }
        Ok(())
    }

    /// Commits, merges what was written into one segment and removes the
    /// files that merge left behind.
    pub fn finish(mut self) -> Result<()> {
        self.writer.commit().context("committing the search index")?;
        let segments = self.index.searchable_segment_ids()?;
        if segments.len() > 1 {
            self.writer.merge(&segments).wait().context("merging the search index")?;
        }
        self.writer.garbage_collect_files().wait().context("cleaning the search index")?;
        self.writer.wait_merging_threads().context("merging the search index")
    }
}

/// BM25's statistics of two indexes taken as one.
struct Both<'a> {
    own: &'a Searcher,
    reference: &'a Searcher,
}

impl Bm25StatisticsProvider for Both<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        Ok(self.own.total_num_tokens(field)? + self.reference.total_num_tokens(field)?)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(Bm25StatisticsProvider::total_num_docs(self.own)? + Bm25StatisticsProvider::total_num_docs(self.reference)?)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        Ok(self.own.doc_freq(term)? + self.reference.doc_freq(term)?)
    }
}

/// Collects every match (in `within`, when given) as (position, score).
struct Positions<'a> {
    positions: &'a [Arc<[u32]>],
    within: Option<&'a Arc<Bits>>,
}

struct SegmentPositions {
    positions: Arc<[u32]>,
    within: Option<Arc<Bits>>,
    found: Vec<(u32, f32)>,
}

impl Collector for Positions<'_> {
    type Fruit = Vec<(u32, f32)>;
    type Child = SegmentPositions;

    fn for_segment(&self, ordinal: SegmentOrdinal, _: &SegmentReader) -> tantivy::Result<SegmentPositions> {
        let positions = self.positions[ordinal as usize].clone();
        Ok(SegmentPositions { positions, within: self.within.cloned(), found: Vec::new() })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<Vec<(u32, f32)>>) -> tantivy::Result<Vec<(u32, f32)>> {
        Ok(fruits.concat())
    }
}

impl SegmentCollector for SegmentPositions {
    type Fruit = Vec<(u32, f32)>;

    fn collect(&mut self, doc: DocId, score: Score) {
        let position = self.positions[doc as usize];
        if self.within.as_ref().is_none_or(|within| within.contains(position as usize)) {
            self.found.push((position, score));
        }
    }

    fn harvest(self) -> Vec<(u32, f32)> {
        self.found
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

    fn six() -> Vec<Agent> {
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
        blank(&mut set[5], "Lumen Digest", "summaries of long texts", &["Summarization and Extraction"]);
        set[5].metadata.insert("category".into(), serde_json::json!({"focus": "governance"}));
        set
    }

    #[test]
    fn relevance_follows_fields_rarity_stems_and_the_last_prefix() {
        let index = TextIndex::build(&six());
        // Each case: query, the documents expected first (in order).
        let check = |query: &str, expected: &[u32]| {
            let got = ranked(&index, query);
            assert_eq!(&got[..expected.len().min(got.len())], expected, "{query}: {got:?}");
            assert_eq!(got.len().min(expected.len()), expected.len(), "{query}: {got:?}");
        };
        check("audit", &[3, 0, 1]); // name and capability outweigh description
        check("AUDIT audit", &[3, 0, 1]); // case and repeats do not matter
        check("solidity audit", &[0, 3, 1]); // a rare term lifts the agent that has it
        check("translation", &[4]);
        check("translations", &[4]); // stemmed
        check("translat", &[4]); // the last word as a prefix
        check("governance", &[5]); // nested metadata values are searched
        check("summary", &[5]); // `summaries` stems alike
        assert_eq!(ranked(&index, "texts").len(), 3, "`text` and `texts` stem alike");
        check("nothing-like-this", &[]);
        assert!(index.search("").is_empty());
        assert!(index.search("  -- ").is_empty());
        // Only the last word is a prefix, and only from three letters.
        assert!(index.search("transl solidity").iter().all(|(doc, _)| *doc == 0));
        assert!(index.search("tr").is_empty());
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
            let mut got = small.scores(query, Some(&large), None);
            expected.sort_by_key(|(doc, _)| *doc);
            got.sort_by_key(|(doc, _)| *doc);
            assert_eq!(got.len(), expected.len(), "{query}");
            for ((d, s), (e, t)) in got.iter().zip(&expected) {
                assert_eq!(d, e, "{query}");
                assert!((s - t).abs() <= 1e-4 * t.abs().max(1.0), "{query}: doc {d} scores {s}, one index {t}");
            }
        }
    }

    #[test]
    fn a_written_index_opens_mapped_and_answers_as_one_built_in_memory() {
        let set = agents(700, 5);
        let dir = std::env::temp_dir().join(format!("almanac-text-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut writer = TextWriter::create(&dir, 2, 40_000_000).unwrap();
        for batch in set.chunks(64) {
            writer.add(batch).unwrap();
        }
        writer.finish().unwrap();
        let (opened, built) = (TextIndex::open(&dir).unwrap(), TextIndex::build(&set));
        assert_eq!(opened.len(), 700);
        for query in ["text generation", "translator", "audit smart contracts", "analy"] {
            let (mut a, mut b) = (opened.search(query), built.search(query));
            a.sort_by_key(|(doc, _)| *doc);
            b.sort_by_key(|(doc, _)| *doc);
            assert!(!a.is_empty(), "{query}");
            assert_eq!(a.iter().map(|h| h.0).collect::<Vec<_>>(), b.iter().map(|h| h.0).collect::<Vec<_>>(), "{query}");
            for ((_, s), (_, t)) in a.iter().zip(&b) {
                assert!((s - t).abs() <= 1e-4 * t.abs().max(1.0), "{query}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
