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
//! fast field), so hits name agents whatever segments hold them, and are
//! kept in the order of their agents' ids (the index is sorted by a `rank`
//! fast field): the order relevance ties are broken in, so that once a page
//! is full a later document scoring the same cannot enter it and block-max
//! WAND skips it with the blocks that cannot do better. A build's agents
//! are in id order too (`folder`), so there a document is its
//! agent's position and no table is read between them ([`Places`]): such
//! a lookup is a random read in a table of 4 bytes an agent.
//!
//! A relevance page of two words or more, each common, is not read from
//! the postings: tantivy intersects postings by seeking, a random read a
//! candidate agent. The index keeps, made at
//! open, each common word's count in each agent and each agent's length, a
//! byte each ([`Counts`]), and scores the agents having exactly each set of
//! the words from those, as BM25 does, a set whose best cannot enter the
//! page left out ([`CountedWords`]).

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::ColumnValues;
use tantivy::directory::RamDirectory;
use tantivy::postings::BlockSegmentPostings;
use tantivy::query::EnableScoring;
use tantivy::query::{
    Bm25StatisticsProvider, Bm25Weight, BooleanQuery, BoostQuery, Occur, PhrasePrefixQuery, Query, TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST};
use tantivy::tokenizer::{
    Language, LowerCaser, PreTokenizedString, RemoveLongFilter, SimpleTokenizer, Stemmer, TextAnalyzer, Token,
    TokenizerManager,
};
use tantivy::{
    DocId, Index, IndexSettings, IndexSortByField, IndexWriter, Order, Score, Searcher, SegmentOrdinal, SegmentReader,
    TantivyDocument, Term,
};

use crate::bits::Bits;
use broker_model::Agent;

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
/// A set of agents having a query's words is scored agent by agent, not by
/// WAND over the postings, when it holds fewer than one in this many of
/// them.
const SCORE_EACH_BELOW_ONE_IN: usize = 4;
/// The most words a relevance page is scored by in parts, a pass for each
/// set of them ([`TextIndex::wand`]): 2^n − 1 passes.
const PARTS: usize = 4;
/// A last word shorter than this is not taken as a prefix (`a` would match
/// a good part of the vocabulary).
const MIN_PREFIX: usize = 3;
/// The memory an in-memory index is sized by, per agent. tantivy gives a
/// third of it to the word table, 8 bytes a slot: 300 slots an agent to
/// start with (rounded down to a power of two), and the table grows as it
/// fills.
const WORDS_BUDGET: usize = 7_200;

/// A word held by a 64th of the agents or more is kept as a set of them,
/// made when the index is opened: a query unites its `n / 64` words
/// instead of setting a bit per posting (through the position table):
/// O(n / 64) against O(postings) random writes. The sets take at most [`DENSE_BYTES`], the most common words first.
const DENSE: usize = 64;
const DENSE_BYTES: usize = 64 << 20;
/// The common words' counts in each agent ([`Counts`]) take at most this,
/// a byte per agent and word, the most common words first.
const COUNTS_BYTES: usize = 128 << 20;

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
    /// The agent's rank by id: what the index is sorted by.
    rank: Field,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let indexing = TextFieldIndexing::default().set_tokenizer(STEMMED).set_index_option(IndexRecordOption::WithFreqs);
    let text = builder.add_text_field("text", TextOptions::default().set_indexing_options(indexing));
    let position = builder.add_u64_field("position", FAST);
    let rank = builder.add_u64_field("rank", FAST);
    (builder.build(), Fields { text, position, rank })
}

/// Documents kept in the order of their agents' ids.
fn settings() -> IndexSettings {
    IndexSettings {
        sort_by_field: Some(IndexSortByField { field: "rank".to_string(), order: Order::Asc }),
        ..IndexSettings::default()
    }
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

/// Agent `position`'s document (`rank` by id): its words, each as many
/// times as its field weighs.
fn document(analyzer: &mut TextAnalyzer, fields: &Fields, position: u32, rank: u32, agent: &Agent) -> TantivyDocument {
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
    doc.add_u64(fields.position, u64::from(position));
    doc.add_u64(fields.rank, u64::from(rank));
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
    /// Which agent each document is.
    places: Places,
    fields: Fields,
    /// The analyzer queries are read with (cloned per query: reading
    /// needs it mutable).
    analyzer: TextAnalyzer,
    /// The agents of each common word (see [`DENSE`]).
    dense: std::collections::HashMap<String, Bits>,
    /// Each common word's count in each agent, to score them without
    /// reading postings.
    counts: Counts,
}

/// Each agent's text length (as tantivy's one-byte id) and each common
/// word's count in it (its weighted frequency; 0 where it is not held), a
/// byte each, by position: a query of common words is scored agent by agent
/// from these, as tantivy scores them from postings, but without the seeks
/// of intersecting postings ([`CountedWords`]). (A column per word, not a row
/// per agent: a query reads a few columns of a megabyte at a million
/// agents, where rows of every word would be a table of tens of megabytes,
/// missing the caches and the address translation's.)
#[derive(Default)]
struct Counts {
    lengths: Box<[u8]>,
    words: std::collections::HashMap<String, Column>,
}

/// A word's counts ([`Counts`]).
struct Column {
    of: Box<[u8]>,
    /// For each length id, the largest count of an agent of that length:
    /// what bounds the word's score, whatever statistics it is scored by.
    max_count_by_length: Box<[u8; 256]>,
}

/// Which agent each document of an index is (read from the `position`
/// fast field once, at open, not per match).
enum Places {
    /// One segment whose documents are the agents' positions: a build's
    /// index, whose agents are in id order as its documents are
    /// (`folder`). No table is read between them.
    DocumentIsPosition,
    /// Per segment, each document's agent position; and each agent's
    /// document, numbered on across segments (the inverse): to score a few
    /// agents where they are. The live overlay's segments.
    Tables { positions: Vec<Arc<[u32]>>, documents: Vec<u32> },
}

impl Places {
    /// The positions of segment `s`'s documents; `None` when they are the
    /// documents' numbers.
    fn of(&self, s: usize) -> Option<&[u32]> {
        match self {
            Places::DocumentIsPosition => None,
            Places::Tables { positions, .. } => Some(&positions[s]),
        }
    }
}

/// Where the words starting with `prefix` end: the same bytes with the
/// last one raised (a prefix is UTF-8 of letters: no byte is 0xff).
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    *end.last_mut().expect("a prefix has letters") += 1;
    end
}

/// The agent position of document `doc` of a segment whose documents are
/// at `positions` ([`Places::of`]).
#[inline(always)]
fn place(positions: Option<&[u32]>, doc: DocId) -> u32 {
    positions.map_or(doc, |p| p[doc as usize])
}

impl TextIndex {
    /// An index of `agents` in memory, agent `i` at position `i`, its
    /// rank by id `rank[i]`.
    pub fn build(agents: &[Agent], rank: &[u32]) -> TextIndex {
        let (schema, fields) = schema();
        let tokenizers = TokenizerManager::default();
        tokenizers.register(STEMMED, analyzer());
        // One segment written in this thread: an overlay segment is small
        // and made at every registration. An `IndexWriter` starts a pool
        // of threads and sizes its word table by its budget (15 MB at the
        // least), and clearing and walking that table cost about 10 ms
        // however few the agents: most of a registration's time. Here the
        // table starts at about the agents' words and grows as needed.
        let budget = (agents.len() * WORDS_BUDGET).clamp(100_000, 15_000_000);
        let mut writer = Index::builder()
            .schema(schema)
            .settings(settings())
            .tokenizers(tokenizers)
            .single_segment_index_writer(RamDirectory::create(), budget)
            .expect("an index in memory");
        let mut analyzer = analyzer();
        for (position, agent) in agents.iter().enumerate() {
            let doc = document(&mut analyzer, &fields, position as u32, rank[position], agent);
            writer.add_document(doc).expect("an index in memory");
        }
        let index = writer.finalize().expect("an index in memory");
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
                let agents = u64::from(searcher.num_docs() as u32);
                anyhow::ensure!(
                    (0..max).all(|doc| column.get_val(doc) < agents),
                    "a document's position is out of range"
                );
                Ok((0..max).map(|doc| column.get_val(doc) as u32).collect())
            })
            .collect::<Result<Vec<Arc<[u32]>>>>()?;
        // A build's one segment holds its agents in order: no table kept.
        let same = positions.len() == 1 && positions[0].iter().enumerate().all(|(doc, at)| doc == *at as usize);
        let places = if same {
            Places::DocumentIsPosition
        } else {
            let mut documents = vec![u32::MAX; searcher.num_docs() as usize];
            for (number, at) in positions.iter().flat_map(|segment| segment.iter()).enumerate() {
                anyhow::ensure!(documents[*at as usize] == u32::MAX, "two documents are of agent {at}");
                documents[*at as usize] = number as u32;
            }
            Places::Tables { positions, documents }
        };
        let mut index = TextIndex {
            searcher,
            places,
            fields,
            analyzer: analyzer(),
            dense: Default::default(),
            counts: Counts::default(),
        };
        let common = index.common_words()?;
        index.counts = index.counts(&common)?;
        index.dense = common.into_iter().map(|word| (word.clone(), index.having(&[word], None))).collect();
        Ok(index)
    }

    /// The sets of the words held by a [`DENSE`]th of the agents or more,
    /// the most common first, up to [`DENSE_BYTES`] (made from the
    /// postings: called before there are any). Only those words are kept
    /// while the dictionary is read, not the whole vocabulary.
    fn common_words(&self) -> Result<Vec<String>> {
        let n = self.len();
        let mut common: std::collections::BTreeMap<String, u64> = Default::default();
        for segment in self.searcher.segment_readers() {
            let inverted = segment.inverted_index(self.fields.text)?;
            let mut terms = inverted.terms().stream()?;
            while terms.advance() {
                let frequency = u64::from(terms.value().doc_freq);
                if frequency as usize * DENSE >= n {
                    *common.entry(String::from_utf8_lossy(terms.key()).into_owned()).or_default() += frequency;
                }
            }
        }
        let mut common: Vec<(String, u64)> = common.into_iter().collect();
        common.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        common.truncate(DENSE_BYTES / n.div_ceil(8).max(1));
        Ok(common.into_iter().map(|(word, _)| word).collect())
    }

    /// The lengths, and the counts of the `common` words (most common
    /// first) within [`COUNTS_BYTES`]; a word counted more than a byte
    /// holds in some agent is left to its postings.
    fn counts(&self, common: &[String]) -> Result<Counts> {
        let n = self.len();
        let field = self.fields.text;
        let mut lengths = vec![0u8; n].into_boxed_slice();
        for (s, segment) in self.searcher.segment_readers().iter().enumerate() {
            let positions = self.places.of(s);
            let norms = segment.get_fieldnorms_reader(field)?;
            for doc in 0..segment.max_doc() {
                lengths[place(positions, doc) as usize] = norms.fieldnorm_id(doc);
            }
        }
        let mut words = std::collections::HashMap::new();
        for word in common.iter().take(COUNTS_BYTES / n.max(1)) {
            let mut column = Column { of: vec![0u8; n].into_boxed_slice(), max_count_by_length: Box::new([0u8; 256]) };
            let fits = self.each_count(word, |at, count| {
                column.of[at as usize] = count;
                let most = &mut column.max_count_by_length[usize::from(lengths[at as usize])];
                *most = (*most).max(count);
            })?;
            if fits {
                words.insert(word.clone(), column);
            }
        }
        Ok(Counts { lengths, words })
    }

    /// Gives `each` every agent having `word` with the word's count in it,
    /// segment after segment; stops, saying so (`false`), at a count past
    /// a byte.
    fn each_count(&self, word: &str, mut each: impl FnMut(u32, u8)) -> tantivy::Result<bool> {
        let term = Term::from_field_text(self.fields.text, word);
        for (s, segment) in self.searcher.segment_readers().iter().enumerate() {
            let positions = self.places.of(s);
            let inverted = segment.inverted_index(self.fields.text)?;
            let Some(mut postings) = inverted.read_block_postings(&term, IndexRecordOption::WithFreqs)? else {
                continue;
            };
            while !postings.docs().is_empty() {
                for (doc, count) in postings.docs().iter().zip(postings.freqs()) {
                    let Ok(count) = u8::try_from(*count) else { return Ok(false) };
                    each(place(positions, *doc), count);
                }
                postings.advance();
            }
        }
        Ok(true)
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
        self.scores(query, None)
    }

    /// [`TextIndex::search`]; with a `reference`, scored as if this
    /// index's agents were part of it (term rarity and field lengths are
    /// those of both together): for a small index beside a large one (the
    /// live overlay beside a build), so that their scores compare.
    pub fn scores(&self, query: &str, reference: Option<&TextIndex>) -> Vec<(u32, f32)> {
        let Some(parsed) = self.query(query) else { return Vec::new() };
        let collector = Positions { places: &self.places };
        let found = match reference {
            Some(reference) => {
                let both = Both { own: &self.searcher, reference: &reference.searcher };
                self.searcher.search_with_statistics_provider(&parsed, &collector, &both)
            }
            None => self.searcher.search(&parsed, &collector),
        };
        found.expect("a search over mapped or in-memory segments")
    }

    /// What `query` looks for: each distinct stemmed word, and the last
    /// word as typed (from [`MIN_PREFIX`] letters) as a prefix.
    fn terms(&self, query: &str) -> (Vec<String>, Option<String>) {
        let mut analyzer = self.analyzer.clone();
        let mut words: Vec<String> = Vec::new();
        let mut stream = analyzer.token_stream(query);
        while let Some(token) = stream.next() {
            if !words.contains(&token.text) {
                words.push(token.text.clone());
            }
        }
        (words, tokens(query).last().filter(|w| w.len() >= MIN_PREFIX && w.len() <= 40))
    }

    /// One stemmed word as tantivy's query, scored by BM25.
    fn term_query(&self, word: &str) -> Box<dyn Query> {
        Box::new(TermQuery::new(Term::from_field_text(self.fields.text, word), IndexRecordOption::WithFreqs))
    }

    /// `words` as tantivy's query: one term each, summed.
    fn words_query(&self, words: &[String]) -> Vec<(Occur, Box<dyn Query>)> {
        words.iter().map(|word| (Occur::Should, self.term_query(word))).collect()
    }

    /// `words` scored as one query (their BM25 scores summed): a lone word
    /// as its term query, since tantivy prunes a term query by its blocks'
    /// best scores but scores every posting of a boolean query of one term
    /// (a word held by a fifth of a million agents: 15 µs against 1.5 ms).
    fn scoring_query(&self, words: &[String]) -> Box<dyn Query> {
        let mut clauses = self.words_query(words);
        match clauses.len() {
            1 => clauses.pop().expect("one clause").1,
            _ => Box::new(BooleanQuery::new(clauses)),
        }
    }

    /// `query` as tantivy's: each distinct stemmed word, and the last word
    /// also as a prefix (a constant score); `None` without words.
    fn query(&self, query: &str) -> Option<BooleanQuery> {
        let (words, prefix) = self.terms(query);
        let mut clauses = self.words_query(&words);
        if let Some(prefix) = prefix {
            let term = PhrasePrefixQuery::new(vec![Term::from_field_text(self.fields.text, &prefix)]);
            clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(term), PREFIX))));
        }
        (!clauses.is_empty()).then(|| BooleanQuery::new(clauses))
    }

    /// What `query` matches, read from the postings alone (nothing
    /// scored): each posting list once, for the search's set and for its
    /// relevance page ([`TextIndex::top`]).
    pub fn matching(&self, query: &str) -> Matched {
        let (words, prefix) = self.terms(query);
        let having_a_word = self.having(&words, None);
        // A prefix no word starts with matches nothing; one only a word of
        // the query starts with matches that word's agents (a whole word
        // typed, most often): both are left out of the sets scored.
        let starting = prefix.as_deref().map_or(Vec::new(), |p| self.starting(p, 2));
        let prefix_word = match starting.as_slice() {
            [only] => words.iter().position(|word| word == only),
            _ => None,
        };
        let having_prefix = match (starting.is_empty(), prefix_word) {
            (true, _) => None,
            // That word's agents: its set when common, not a union made again.
            (false, Some(i)) => {
                Some(self.dense.get(&words[i]).cloned().unwrap_or_else(|| self.having(&words[i..=i], None)))
            }
            (false, None) => prefix.as_deref().map(|p| self.having(&[], Some(p))),
        };
        Matched { words, having_a_word, having_prefix, prefix_word }
    }

    /// Up to `most` distinct words of the index starting with `prefix`.
    fn starting(&self, prefix: &str, most: usize) -> Vec<String> {
        let mut found: Vec<String> = Vec::new();
        for segment in self.searcher.segment_readers() {
            let inverted = segment.inverted_index(self.fields.text).expect("a mapped or in-memory segment");
            let mut terms =
                inverted.terms().range().ge(prefix).lt(prefix_end(prefix)).into_stream().expect("a term range");
            while found.len() < most && terms.advance() {
                let word = String::from_utf8_lossy(terms.key());
                if !found.iter().any(|f| *f == word) {
                    found.push(word.into_owned());
                }
            }
        }
        found
    }

    /// The agents having any of `words`, or a word starting with `prefix`:
    /// a common word's set ([`DENSE`]), another's postings. (A common
    /// word's set is of every segment, so it is united again in each: a
    /// built or written index has one.)
    fn having(&self, words: &[String], prefix: Option<&str>) -> Bits {
        let mut out = Bits::empty(self.len());
        let field = self.fields.text;
        for (s, segment) in self.searcher.segment_readers().iter().enumerate() {
            let positions = self.places.of(s);
            let inverted = segment.inverted_index(field).expect("a mapped or in-memory segment");
            let add = |out: &mut Bits, mut postings: BlockSegmentPostings| {
                while !postings.docs().is_empty() {
                    postings.docs().iter().for_each(|doc| out.insert(place(positions, *doc) as usize));
                    postings.advance();
                }
            };
            for word in words {
                if let Some(set) = self.dense.get(word) {
                    out.unite(set);
                    continue;
                }
                let term = Term::from_field_text(field, word);
                let postings = inverted.read_block_postings(&term, IndexRecordOption::Basic);
                postings.expect("a mapped or in-memory segment").into_iter().for_each(|p| add(&mut out, p));
            }
            if let Some(prefix) = prefix {
                let mut terms =
                    inverted.terms().range().ge(prefix).lt(prefix_end(prefix)).into_stream().expect("a term range");
                while terms.advance() {
                    if let Some(set) = std::str::from_utf8(terms.key()).ok().and_then(|w| self.dense.get(w)) {
                        out.unite(set);
                        continue;
                    }
                    let postings = inverted.read_block_postings_from_terminfo(terms.value(), IndexRecordOption::Basic);
                    add(&mut out, postings.expect("a mapped or in-memory segment"));
                }
            }
        }
        out
    }

    /// Whether the documents, segment after segment, are in the order of
    /// `rank` (each agent's rank by id, indexed by position): then
    /// [`TextIndex::top`] prunes ties.
    pub fn in_order(&self, rank: &[u32]) -> bool {
        match &self.places {
            Places::DocumentIsPosition => rank.windows(2).all(|w| w[0] < w[1]),
            Places::Tables { positions, .. } => {
                let mut last = None;
                positions.iter().flat_map(|segment| segment.iter()).all(|at| {
                    let next = Some(rank[*at as usize]);
                    std::mem::replace(&mut last, next) < next
                })
            }
        }
    }

    /// The `k` best agents of `within` for the query `matched` is of,
    /// best first, with their scores: as [`TextIndex::scores`] ranks them
    /// (beside `reference`'s statistics when given), ties by `rank`
    /// (ascending, indexed by position). The agents having a word are
    /// found by the [`Plan`] that costs least for the query and the set;
    /// then those having only the prefix fill what room is left
    /// ([`TextIndex::offer_prefix_only`]). No plan scores every match.
    pub fn top(
        &self,
        matched: &Matched,
        reference: Option<&TextIndex>,
        within: &Bits,
        k: usize,
        rank: &Ranks,
    ) -> Vec<(u32, f32)> {
        if k == 0 {
            return Vec::new();
        }
        let both = reference.map(|reference| Both { own: &self.searcher, reference: &reference.searcher });
        let statistics: &dyn Bm25StatisticsProvider = match &both {
            Some(both) => both,
            None => &self.searcher,
        };
        let word_matches = matched.having_a_word.count();
        let candidates = Bits::both(within, &matched.having_a_word);
        let candidate_count = candidates.count();
        let found = match self.plan(matched, statistics, candidate_count, word_matches) {
            Plan::NoWordMatches => Vec::new(),
            Plan::EachFromCounts(counted) => {
                debug_assert!(candidate_count > 0 && candidate_count * SCORE_EACH_BELOW_ONE_IN < word_matches);
                counted.each_of(&candidates, k, rank)
            }
            Plan::PassesFromCounts(counted) => {
                debug_assert!(candidate_count > 0 && candidate_count * SCORE_EACH_BELOW_ONE_IN >= word_matches);
                counted.passes(&candidates, k, rank)
            }
            Plan::Postings => {
                debug_assert!(candidate_count > 0 && !matched.words.is_empty());
                self.scored_from_postings(matched, statistics, candidates, word_matches, k, rank)
            }
        };
        let mut best = Top::new(k, rank.of);
        found.into_iter().for_each(|(at, score)| best.offer(at, score));
        self.offer_prefix_only(matched, within, &mut best, rank);
        best.into_sorted()
    }

    /// How [`TextIndex::top`] scores the `candidates` (the agents of its
    /// set having a word, of the query's `word_matches`).
    fn plan<'a>(
        &'a self,
        matched: &'a Matched,
        statistics: &dyn Bm25StatisticsProvider,
        candidates: usize,
        word_matches: usize,
    ) -> Plan<'a> {
        if matched.words.is_empty() || candidates == 0 {
            return Plan::NoWordMatches;
        }
        // A lone word over half its agents or more is left to tantivy,
        // which prunes its postings by their blocks' best scores (faster
        // than a pass over them). Over fewer (a filter), its pruning
        // fails: the best blocks' agents are filtered out, the page's bar
        // stays low, and most postings are scored.
        let lone_word_over_half = matched.words.len() == 1 && candidates.saturating_mul(2) >= word_matches;
        match (!lone_word_over_half).then(|| self.counted_words(matched, statistics)).flatten() {
            Some(counted) if candidates.saturating_mul(SCORE_EACH_BELOW_ONE_IN) < word_matches => {
                Plan::EachFromCounts(counted)
            }
            Some(counted) => Plan::PassesFromCounts(counted),
            None => Plan::Postings,
        }
    }

    /// [`Plan::Postings`]: the `k` best `candidates` scored from tantivy's
    /// postings. A word match that also has the prefix scores [`PREFIX`]
    /// more: those are ranked first, among themselves, then the rest need
    /// at least what the last of them scores.
    fn scored_from_postings(
        &self,
        matched: &Matched,
        statistics: &dyn Bm25StatisticsProvider,
        mut candidates: Bits,
        word_matches: usize,
        k: usize,
        rank: &Ranks,
    ) -> Vec<(u32, f32)> {
        let scoring = EnableScoring::enabled_from_statistics_provider(statistics, &self.searcher);
        let query = self.scoring_query(&matched.words);
        let union = query.weight(scoring).expect("a query over mapped or in-memory segments");
        let parts = self.parts(&matched.words, scoring);
        let weights = (union.as_ref(), parts.as_ref());
        let with_prefix = matched.having_prefix.as_ref().map(|having_prefix| {
            let with_prefix = Bits::both(&candidates, having_prefix);
            candidates.subtract(having_prefix);
            with_prefix
        });
        let mut found = match with_prefix {
            Some(with_prefix) => self.best_of(weights, &with_prefix, word_matches, k, rank, Score::MIN),
            None => Vec::new(),
        };
        found.iter_mut().for_each(|(_, score)| *score += PREFIX);
        let floor = if found.len() == k { found[k - 1].1.next_down() } else { Score::MIN };
        found.extend(self.best_of(weights, &candidates, word_matches, k, rank, floor));
        found
    }

    /// Offers `best` the agents of `within` having the prefix and no word:
    /// they score [`PREFIX`], so they enter only while the page is not
    /// full of better.
    fn offer_prefix_only(&self, matched: &Matched, within: &Bits, best: &mut Top, rank: &Ranks) {
        let Some(having_prefix) = &matched.having_prefix else { return };
        if best.threshold().is_some_and(|worst| worst > PREFIX) {
            return;
        }
        for at in having_prefix.iter().filter(|at| within.contains(*at) && !matched.having_a_word.contains(*at)) {
            best.offer(at as u32, PREFIX);
            // In rank order, once the page is full at this score no later
            // agent enters: the rest are not read.
            if rank.of.is_none() && best.threshold().is_some_and(|worst| worst >= PREFIX) {
                break;
            }
        }
    }

    /// The `k` best of `set` (agents having one of the words, of `word_matches`)
    /// by `weight`'s scores, above `floor`, best first, ties by rank: by
    /// block-max WAND over the postings when the set is a good part of
    /// them, else by scoring each of its agents (a narrow filter leaves
    /// WAND's threshold low for long, so it would score most postings).
    fn best_of(
        &self,
        (union, parts): (&dyn tantivy::query::Weight, Option<&Parts>),
        set: &Bits,
        word_matches: usize,
        k: usize,
        rank: &Ranks,
        floor: Score,
    ) -> Vec<(u32, f32)> {
        match set.count() {
            0 => Vec::new(),
            members if members.saturating_mul(SCORE_EACH_BELOW_ONE_IN) < word_matches => {
                self.each_of(union, set, k, rank, floor)
            }
            _ => self.wand(union, parts, set, k, rank, floor),
        }
    }

    /// [`TextIndex::best_of`] by scoring each agent of `set` (each having
    /// a word) where its document is.
    fn each_of(
        &self,
        weight: &dyn tantivy::query::Weight,
        set: &Bits,
        k: usize,
        rank: &Ranks,
        floor: Score,
    ) -> Vec<(u32, f32)> {
        // The set in document order: a set of documents (a pass over
        // n / 64 words, not a sort), unless the documents are the agents.
        let numbers = match &self.places {
            Places::DocumentIsPosition => Cow::Borrowed(set),
            Places::Tables { documents, .. } => {
                let mut numbers = Bits::empty(documents.len());
                set.iter().for_each(|at| numbers.insert(documents[at] as usize));
                Cow::Owned(numbers)
            }
        };
        let mut top = Top::new(k, rank.of);
        let mut docs = numbers.iter().map(|number| number as u32).peekable();
        let mut base = 0u32;
        for (s, segment) in self.searcher.segment_readers().iter().enumerate() {
            let positions = self.places.of(s);
            let end = base + segment.max_doc();
            let mut scorer = weight.scorer(segment, 1.0).expect("a mapped or in-memory segment");
            while let Some(number) = docs.next_if(|number| *number < end) {
                let doc = number - base;
                if scorer.doc() <= doc && scorer.seek(doc) == doc {
                    let score = scorer.score();
                    if score > floor {
                        top.offer(place(positions, doc), score);
                    }
                }
            }
            base = end;
        }
        top.into_sorted()
    }

    /// [`TextIndex::best_of`] by block-max WAND. Two to [`PARTS`] words are
    /// scored in parts, one pass per set of them, into one page ([`Parts`]):
    /// each pass is pruned far better by tantivy than their union, and
    /// starts from the threshold the passes before left. The union's
    /// block-max WAND scores most postings wherever one word's best is near
    /// the page's worst, even with the page's final threshold from the
    /// start.
    fn wand(
        &self,
        union: &dyn tantivy::query::Weight,
        parts: Option<&Parts>,
        within: &Bits,
        k: usize,
        rank: &Ranks,
        floor: Score,
    ) -> Vec<(u32, f32)> {
        let mut top = Top::new(k, rank.of);
        match parts {
            None => self.prune(union, |at| within.contains(at), &mut top, rank, floor),
            Some(parts) => {
                for (weight, without) in &parts.passes {
                    let keep = |at: usize| within.contains(at) && parts.lacks(*without, at);
                    self.prune(weight.as_ref(), keep, &mut top, rank, floor);
                }
            }
        }
        top.into_sorted()
    }

    /// Offers `top` each agent `keep` accepts that `weight` scores above
    /// `floor` and what `top` already holds, by tantivy's pruning over each
    /// segment.
    fn prune(
        &self,
        weight: &dyn tantivy::query::Weight,
        keep: impl Fn(usize) -> bool,
        top: &mut Top,
        rank: &Ranks,
        floor: Score,
    ) {
        for (s, segment) in self.searcher.segment_readers().iter().enumerate() {
            let positions = self.places.of(s);
            let start = top.bar(None).max(floor);
            let mut offer = |doc: DocId, score: Score| {
                let at = place(positions, doc);
                if keep(at as usize) {
                    top.offer(at, score);
                }
                top.bar(rank.ordered.then(|| top.rank_of(at))).max(floor)
            };
            weight.for_each_pruning(start, segment, &mut offer).expect("a mapped or in-memory segment");
        }
    }

    /// The query's `words` scored from their counts, by `statistics`, when
    /// each is counted (and they fit a subset's bits).
    fn counted_words<'a>(
        &'a self,
        matched: &'a Matched,
        statistics: &dyn Bm25StatisticsProvider,
    ) -> Option<CountedWords<'a>> {
        if !(1..31).contains(&matched.words.len()) {
            return None;
        }
        // The prefix as a set of its own, or as a bonus of the one word
        // whose agents are its agents.
        let having_prefix = matched.own_prefix();
        let words = matched
            .words
            .iter()
            .enumerate()
            .map(|(i, word)| {
                let (set, counts, max_count_by_length) = match (self.dense.get(word), self.counts.words.get(word)) {
                    (Some(set), Some(column)) => {
                        (Cow::Borrowed(set), Tally::Column(&column.of), *column.max_count_by_length)
                    }
                    _ => self.listed(word)?,
                };
                let term = Term::from_field_text(self.fields.text, word);
                let weight =
                    Bm25Weight::for_terms(statistics, &[term]).expect("statistics of mapped or in-memory segments");
                let bonus = if matched.prefix_word == Some(i) { PREFIX } else { 0.0 };
                let max_score_by_length = std::array::from_fn(|length| {
                    weight.score(length as u8, u32::from(max_count_by_length[length])) + bonus
                });
                let max_score = max_score_by_length.iter().copied().fold(0.0, Score::max);
                Some(Word { set, counts, weight, bonus, max_score_by_length, max_score })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(CountedWords { lengths: &self.counts.lengths, words, having_prefix })
    }

    /// A word that is not common, as [`CountedWords`] reads one: its agents,
    /// their counts listed in position order (from its postings, a few
    /// thousand at most), and the largest count for each length. `None`
    /// for a common word (its postings are long) or one counted past a
    /// byte.
    fn listed(&self, word: &str) -> Option<(Cow<'_, Bits>, Tally<'_>, [u8; 256])> {
        let term = Term::from_field_text(self.fields.text, word);
        let held = self.searcher.doc_freq(&term).expect("a mapped or in-memory segment") as usize;
        if held.saturating_mul(DENSE) >= self.len() {
            return None;
        }
        let mut listed: Vec<(u32, u8)> = Vec::with_capacity(held);
        let fits = self.each_count(word, |at, count| listed.push((at, count)));
        if !fits.expect("a mapped or in-memory segment") {
            return None;
        }
        if matches!(self.places, Places::Tables { .. }) {
            listed.sort_unstable_by_key(|(at, _)| *at);
        }
        debug_assert!(listed.windows(2).all(|w| w[0].0 < w[1].0), "listed once each, in position order");
        let mut set = Bits::empty(self.len());
        let mut max_count_by_length = [0u8; 256];
        for (at, count) in &listed {
            set.insert(*at as usize);
            let length = usize::from(self.counts.lengths[*at as usize]);
            max_count_by_length[length] = max_count_by_length[length].max(*count);
        }
        let before = set.ranks();
        let of = listed.into_iter().map(|(_, count)| count).collect();
        Some((Cow::Owned(set), Tally::Listed { before, of }, max_count_by_length))
    }

    /// For two to [`PARTS`] words, what [`TextIndex::wand`] scores them by
    /// apart: for each set of them, the agents having all of it (their
    /// scores summed, as the union sums them) and none of the others.
    /// Sets of more words come first, then those of rarer words: what can
    /// score most, so that the page's bar rises soonest.
    fn parts(&self, words: &[String], scoring: EnableScoring) -> Option<Parts<'_>> {
        if !(2..=PARTS).contains(&words.len()) {
            return None;
        }
        let weight = |query: &dyn Query| query.weight(scoring).expect("a query over mapped or in-memory segments");
        // A common word's set as it is; another's made from its postings.
        let sets = words
            .iter()
            .map(|word| match self.dense.get(word) {
                Some(set) => Cow::Borrowed(set),
                None => Cow::Owned(self.having(std::slice::from_ref(word), None)),
            })
            .collect();
        let commonness: Vec<f64> = words
            .iter()
            .map(|word| {
                let held = self.searcher.doc_freq(&Term::from_field_text(self.fields.text, word));
                (held.expect("a mapped or in-memory segment") as f64 + 1.0).ln()
            })
            .collect();
        let all = (1u32 << words.len()) - 1;
        let of = |subset: u32| (0..words.len()).filter(move |i| subset >> i & 1 == 1);
        let mut subsets: Vec<u32> = (1..=all).collect();
        subsets.sort_by(|a, b| {
            let common = |s: u32| of(s).map(|i| commonness[i]).sum::<f64>();
            b.count_ones().cmp(&a.count_ones()).then(common(*a).total_cmp(&common(*b)))
        });
        let passes = subsets
            .into_iter()
            .map(|subset| {
                let query: Box<dyn Query> = match of(subset).collect::<Vec<_>>()[..] {
                    [one] => self.term_query(&words[one]),
                    ref many => Box::new(BooleanQuery::new(
                        many.iter().map(|i| (Occur::Must, self.term_query(&words[*i]))).collect(),
                    )),
                };
                (weight(query.as_ref()), all & !subset)
            })
            .collect();
        Some(Parts { sets, passes })
    }
}

/// How [`TextIndex::top`] scores the agents of its set having a word,
/// chosen by [`TextIndex::plan`]: the cheapest way for the query and the
/// set, each run by a function of its own.
enum Plan<'a> {
    /// No word of the query, or no agent of the set has one: only the
    /// prefix's agents can be on the page.
    NoWordMatches,
    /// Every word counted, and the set holds under one in
    /// [`SCORE_EACH_BELOW_ONE_IN`] of the word matches: each of its agents
    /// scored from the counts ([`CountedWords::each_of`]).
    EachFromCounts(CountedWords<'a>),
    /// Every word counted, the set larger: a pass over the agents having
    /// exactly each set of the words, the passes that cannot reach the
    /// page's bar left out whole ([`CountedWords::passes`]).
    PassesFromCounts(CountedWords<'a>),
    /// A lone word over half its agents or more, or words not all counted:
    /// tantivy's postings, by block-max WAND over the words' parts or agent
    /// by agent for a narrow set ([`TextIndex::scored_from_postings`]).
    Postings,
}

/// A word of [`CountedWords`]: its agents, counts and BM25 weight, and what an
/// agent of each length scores at most by it (the best count of that
/// length scored), and of any length.
struct Word<'a> {
    set: Cow<'a, Bits>,
    counts: Tally<'a>,
    weight: Bm25Weight,
    /// [`PREFIX`] when the word's agents are the prefix's, else 0.
    bonus: Score,
    max_score_by_length: [Score; 256],
    max_score: Score,
}

/// A word's count in each agent: a common word's column ([`Counts`]), or
/// the counts of another's agents in position order ([`TextIndex::listed`]),
/// an agent's found by its rank in the word's set ([`Bits::ranks`]).
enum Tally<'a> {
    Column(&'a [u8]),
    Listed { before: Vec<u32>, of: Vec<u8> },
}

impl Word<'_> {
    /// The word's count in the agent at `at` (0 where it is not held).
    #[inline]
    fn count(&self, at: usize) -> u8 {
        match &self.counts {
            Tally::Column(of) => of[at],
            Tally::Listed { before, of } => self.set.rank(before, at).map_or(0, |i| of[i]),
        }
    }
}

/// A query's words scored from their counts ([`Counts`]): each word's
/// agents, counts, BM25 weight and best score, in the query's order (the
/// order scores are summed in); and the agents having the prefix, which
/// score [`PREFIX`] more (added last), as if it were one more word.
struct CountedWords<'a> {
    lengths: &'a [u8],
    words: Vec<Word<'a>>,
    having_prefix: Option<&'a Bits>,
}

impl CountedWords<'_> {
    /// `of` each word of `subset` (bits of their indexes), and [`PREFIX`]
    /// when it has the prefix's bit, summed in the words' order: how every
    /// score and bound of a subset is summed, so that a bound is never
    /// under a score by rounding.
    #[inline]
    fn sum(&self, subset: u32, of: impl Fn(&Word) -> Score) -> Score {
        let mut sum = 0.0;
        for (i, word) in self.words.iter().enumerate() {
            if subset >> i & 1 == 1 {
                sum += of(word);
            }
        }
        if subset >> self.words.len() & 1 == 1 {
            sum += PREFIX;
        }
        sum
    }

    /// The score of the agent at `at`, which has the words of `subset`.
    #[inline]
    fn score(&self, at: usize, subset: u32) -> Score {
        let length = self.lengths[at];
        self.sum(subset, |word| word.weight.score(length, u32::from(word.count(at))) + word.bonus)
    }

    /// Offers `top` the agent at `at` of `subset` when it scores above
    /// `bar`, and then raises `bar` to what `top` asks (the agents come in
    /// position order, the ranks' when no table is given).
    #[inline]
    fn offer(&self, top: &mut Top, bar: &mut Score, at: usize, subset: u32, rank: &Ranks) {
        let score = self.score(at, subset);
        if score > *bar {
            top.offer(at as u32, score);
            *bar = top.bar(rank.of.is_none().then_some(at as u32));
        }
    }

    /// The sets a subset's bits name: the words', then the prefix's.
    fn sets(&self) -> impl Iterator<Item = &Bits> {
        self.words.iter().map(|word| &*word.set).chain(self.having_prefix)
    }

    /// What an agent of each length having the words of `subset` scores
    /// at most (summed in the order [`CountedWords::score`] sums), a step up:
    /// an agent whose ceiling is not above a bar cannot beat it, whatever
    /// the rounding (once a subset, not once an agent).
    fn max_score_by_length(&self, subset: u32) -> [Score; 256] {
        std::array::from_fn(|length| self.sum(subset, |word| word.max_score_by_length[length]).next_up())
    }

    /// What an agent having the words of `subset` scores at most (summed
    /// in the order [`CountedWords::score`] sums).
    fn max_score(&self, subset: u32) -> Score {
        self.sum(subset, |word| word.max_score)
    }

    /// The `k` best of `set` (agents having a word) by scoring each.
    fn each_of(&self, set: &Bits, k: usize, rank: &Ranks) -> Vec<(u32, f32)> {
        let mut top = Top::new(k, rank.of);
        let mut bar = Score::MIN;
        // Each subset's ceilings, made when an agent of it first comes:
        // once the page is full, most agents are out by their length.
        let sets: Vec<&[u64]> = self.sets().map(Bits::words).collect();
        let mut ceilings: Vec<Option<[Score; 256]>> = vec![None; 1 << sets.len()];
        // A word of the set at a time, each word set's word of it read
        // once for its 64 agents.
        let mut held = [0u64; 32];
        debug_assert!(sets.len() <= held.len(), "a subset's bits fit a u32: at most 30 words and the prefix");
        for (w, word) in set.words().iter().enumerate().filter(|(_, word)| **word != 0) {
            sets.iter().zip(&mut held).for_each(|(set, held)| *held = set[w]);
            let mut rest = *word;
            while rest != 0 {
                let bit = rest.trailing_zeros();
                rest &= rest - 1;
                let at = w * 64 + bit as usize;
                let subset = held[..sets.len()]
                    .iter()
                    .enumerate()
                    .fold(0, |subset, (i, held)| subset | ((held >> bit & 1) as u32) << i);
                let ceiling = ceilings[subset as usize].get_or_insert_with(|| self.max_score_by_length(subset));
                if ceiling[usize::from(self.lengths[at])] > bar {
                    self.offer(&mut top, &mut bar, at, subset, rank);
                }
            }
        }
        top.into_sorted()
    }

    /// The `k` best of `set` above `floor`: a pass over the agents having
    /// exactly each set of the words, the sets that can score most first,
    /// so that the page's bar rises soonest and the passes that cannot
    /// reach it are left out whole (the agents having all of a few common
    /// words are most of a page, and few).
    fn passes(&self, set: &Bits, k: usize, rank: &Ranks) -> Vec<(u32, f32)> {
        // Sets of the prefix alone are left out: the agents of `set` have a word.
        let words = (1u32 << self.words.len()) - 1;
        let all = (1u32 << self.sets().count()) - 1;
        let mut subsets: Vec<(u32, Score)> =
            (1..=all).filter(|subset| subset & words != 0).map(|subset| (subset, self.max_score(subset))).collect();
        subsets.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.count_ones().cmp(&a.0.count_ones())));
        let mut top = Top::new(k, rank.of);
        let mut agents = Bits::empty(0);
        for (subset, bound) in subsets {
            let mut bar = top.bar(None);
            if bound <= bar {
                continue;
            }
            let ceilings = self.max_score_by_length(subset);
            if ceilings.iter().all(|ceiling| *ceiling <= bar) {
                continue;
            }
            // The agents having exactly the subset's words: whole sets
            // intersected and subtracted, a few passes the compiler makes
            // wide, not a test per word and agent.
            agents.clone_from(set);
            for (i, other) in self.sets().enumerate() {
                match subset >> i & 1 {
                    1 => agents.intersect(other),
                    _ => agents.subtract(other),
                }
            }
            for at in agents.iter() {
                // Most agents are out by their length alone, their counts
                // not read.
                if ceilings[usize::from(self.lengths[at])] > bar {
                    self.offer(&mut top, &mut bar, at, subset, rank);
                }
            }
        }
        top.into_sorted()
    }
}

/// A few words scored in passes: each pass's weight (its words' scores
/// summed), and the words (bits of their indexes) its agents must not have.
struct Parts<'a> {
    /// The agents having each word.
    sets: Vec<std::borrow::Cow<'a, Bits>>,
    passes: Vec<(Box<dyn tantivy::query::Weight>, u32)>,
}

impl Parts<'_> {
    /// Whether the agent at `at` has none of the words in `without`.
    fn lacks(&self, without: u32, at: usize) -> bool {
        self.sets.iter().enumerate().all(|(i, set)| without >> i & 1 == 0 || !set.contains(at))
    }
}

/// Each agent's rank by id (indexed by position; `None` when it is the
/// position, as in a build's index), and whether a text index's documents
/// are in that order ([`TextIndex::in_order`]).
pub struct Ranks<'a> {
    pub of: Option<&'a [u32]>,
    pub ordered: bool,
}

/// Writes the build's text index into a folder, agents added in batches
/// (tantivy's writer threads index them, sorted by rank; its memory is held
/// to a budget), then merged into one segment.
pub struct TextWriter {
    index: Index,
    writer: IndexWriter,
    fields: Fields,
}

impl TextWriter {
    /// A new index in `dir` (which must hold none), indexing on
    /// `threads` threads within `memory` bytes.
    pub fn create(dir: &Path, threads: usize, memory: usize) -> Result<TextWriter> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let (schema, fields) = schema();
        let index = Index::builder()
            .schema(schema)
            .settings(settings())
            .create_in_dir(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        register(&index);
        // tantivy asks at least 15 MB per thread.
        let threads = threads.clamp(1, 8).min(memory / 15_000_000).max(1);
        let writer = index.writer_with_num_threads(threads, memory.max(15_000_000 * threads))?;
        Ok(TextWriter { index, writer, fields })
    }

    /// Adds agents, each with its position and its rank by id (in any
    /// order: the index is sorted by rank); their words are read over the
    /// cores.
    pub fn add(&mut self, agents: &[(u32, u32, Agent)]) -> Result<()> {
        use rayon::prelude::*;
        let fields = self.fields;
        let documents: Vec<TantivyDocument> = agents
            .par_iter()
            .map_init(analyzer, |analyzer, (position, rank, agent)| {
                document(analyzer, &fields, *position, *rank, agent)
            })
            .collect();
        for document in documents {
            self.writer.add_document(document)?;
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

/// What a query matches ([`TextIndex::matching`]).
pub struct Matched {
    /// Its distinct stemmed words.
    words: Vec<String>,
    /// The agents having one of them.
    having_a_word: Bits,
    /// The agents having a word that starts with its last word as typed,
    /// when that is long enough and some word does.
    having_prefix: Option<Bits>,
    /// Which of `words` is the only word starting with the prefix (then
    /// its agents are the prefix's).
    prefix_word: Option<usize>,
}

impl Matched {
    /// Every agent the query matches.
    #[cfg(test)]
    pub fn agents(&self) -> Bits {
        let mut all = self.having_a_word.clone();
        if let Some(having_prefix) = &self.having_prefix {
            all.unite(having_prefix);
        }
        all
    }

    /// Keeps in `set` only the agents the query matches.
    pub fn restrict(&self, set: &mut Bits) {
        set.intersect_either(&self.having_a_word, self.own_prefix());
    }

    /// The prefix's agents when they are not one word's of the query (a
    /// prefix that is one of the words adds no agent to them).
    fn own_prefix(&self) -> Option<&Bits> {
        self.having_prefix.as_ref().filter(|_| self.prefix_word.is_none())
    }
}

/// The best `k` (position, score) offered: a heap whose top is the worst
/// kept (lowest score, then highest rank).
struct Top<'a> {
    k: usize,
    /// Each agent's rank, by position; `None` when it is the position.
    rank: Option<&'a [u32]>,
    heap: std::collections::BinaryHeap<Kept>,
}

/// One kept match; greater is worse.
#[derive(PartialEq)]
struct Kept {
    score: Score,
    rank: u32,
    at: u32,
}

impl Eq for Kept {}

impl Ord for Kept {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.score.total_cmp(&self.score).then(self.rank.cmp(&other.rank))
    }
}

impl PartialOrd for Kept {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Top<'_> {
    fn new(k: usize, rank: Option<&[u32]>) -> Top<'_> {
        Top { k, rank, heap: std::collections::BinaryHeap::with_capacity(k.min(1 << 16) + 1) }
    }

    fn offer(&mut self, at: u32, score: Score) {
        debug_assert!(self.k > 0, "a page of no agents takes none");
        debug_assert!(self.rank.is_none_or(|rank| (at as usize) < rank.len()), "an agent of the index");
        let full = self.heap.len() == self.k;
        // Below the worst kept: out, without reading its rank.
        if full && self.heap.peek().is_some_and(|worst| score < worst.score) {
            return;
        }
        let kept = Kept { score, rank: self.rank_of(at), at };
        if !full {
            self.heap.push(kept);
        } else if self.heap.peek().is_some_and(|worst| kept < *worst) {
            self.heap.pop();
            self.heap.push(kept);
        }
    }

    /// The rank an agent is ordered by among equal scores.
    fn rank_of(&self, at: u32) -> u32 {
        self.rank.map_or(at, |rank| rank[at as usize])
    }

    /// The score an agent must beat to enter (`Score::MIN` until `k` are
    /// kept): the worst kept, or just under it (a tie enters by a lower
    /// rank) but when the agents still to come rank after the one of
    /// rank `after` and so after the worst kept, in rank order.
    fn bar(&self, after: Option<u32>) -> Score {
        match (self.heap.len() == self.k).then(|| self.heap.peek()).flatten() {
            None => Score::MIN,
            Some(worst) if after.is_some_and(|after| after >= worst.rank) => worst.score,
            Some(worst) => worst.score.next_down(),
        }
    }

    /// The worst score kept, once `k` are.
    fn threshold(&self) -> Option<Score> {
        (self.heap.len() == self.k).then(|| self.heap.peek().map_or(Score::MIN, |worst| worst.score))
    }

    fn into_sorted(self) -> Vec<(u32, f32)> {
        self.heap.into_sorted_vec().into_iter().map(|kept| (kept.at, kept.score)).collect()
    }
}

/// Collects every match as (position, score).
struct Positions<'a> {
    places: &'a Places,
}

struct SegmentPositions {
    positions: Option<Arc<[u32]>>,
    found: Vec<(u32, f32)>,
}

impl Collector for Positions<'_> {
    type Fruit = Vec<(u32, f32)>;
    type Child = SegmentPositions;

    fn for_segment(&self, ordinal: SegmentOrdinal, _: &SegmentReader) -> tantivy::Result<SegmentPositions> {
        let positions = match self.places {
            Places::DocumentIsPosition => None,
            Places::Tables { positions, .. } => Some(positions[ordinal as usize].clone()),
        };
        Ok(SegmentPositions { positions, found: Vec::new() })
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
        self.found.push((place(self.positions.as_deref(), doc), score));
    }

    fn harvest(self) -> Vec<(u32, f32)> {
        self.found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker_model::generate::agents;

    /// Each agent's rank by id.
    fn by_id(set: &[Agent]) -> Vec<u32> {
        let mut order: Vec<usize> = (0..set.len()).collect();
        order.sort_by(|a, b| set[*a].id.cmp(&set[*b].id));
        let mut rank = vec![0; set.len()];
        order.iter().enumerate().for_each(|(r, at)| rank[*at] = r as u32);
        rank
    }

    fn built(set: &[Agent]) -> TextIndex {
        TextIndex::build(set, &by_id(set))
    }

    fn ranked(index: &TextIndex, query: &str) -> Vec<u32> {
        let mut hits = index.search(query);
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.into_iter().map(|(doc, _)| doc).collect()
    }

    /// A common word's set, and a prefix spanning common words, match
    /// what their postings do; rarer words are still read from postings.
    #[test]
    fn common_words_match_as_their_postings() {
        let mut set = broker_model::generate::agents(400, 3);
        set[3].description.push_str(" Quixotic quill.");
        set[9].description.push_str(" Quixotic zebra.");
        let mut index = built(&set);
        let mut words = std::collections::BTreeSet::new();
        for segment in index.searcher.segment_readers() {
            let inverted = segment.inverted_index(index.fields.text).unwrap();
            let mut terms = inverted.terms().stream().unwrap();
            while terms.advance() {
                words.insert(String::from_utf8(terms.key().to_vec()).unwrap());
            }
        }
        let rare: Vec<&String> = words.iter().filter(|w| !index.dense.contains_key(*w)).collect();
        assert!(!index.dense.is_empty() && !rare.is_empty(), "both kinds of word");
        let mut queries: Vec<String> = words.iter().cloned().collect();
        queries.extend(["trans", "led", "writer ledger", "zzz", "summar", "qui", "quixotic zebra"].map(String::from));
        queries.push(format!("{} {}", rare[0], index.dense.keys().next().unwrap()));
        let with: Vec<Bits> = queries.iter().map(|q| index.matching(q).agents()).collect();
        std::mem::take(&mut index.dense);
        for (q, expected) in queries.iter().zip(with) {
            assert_eq!(index.matching(q).agents(), expected, "{q}");
        }
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
        let index = built(&six());
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
        let whole = built(&set);
        let (large, small) = set.split_at(392);
        let (large, small) = (built(large), built(small));
        for query in ["text generation", "audit solidity contracts", "translation", "agents data", "nothing-like-this"]
        {
            let mut expected: Vec<(u32, f32)> =
                whole.search(query).into_iter().filter(|(doc, _)| *doc >= 392).map(|(d, s)| (d - 392, s)).collect();
            let mut got = small.scores(query, Some(&large));
            expected.sort_by_key(|(doc, _)| *doc);
            got.sort_by_key(|(doc, _)| *doc);
            assert_eq!(got.len(), expected.len(), "{query}");
            for ((d, s), (e, t)) in got.iter().zip(&expected) {
                assert_eq!(d, e, "{query}");
                assert!((s - t).abs() <= 1e-4 * t.abs().max(1.0), "{query}: doc {d} scores {s}, one index {t}");
            }
        }
    }

    /// What a query matches, read from the postings, is what scoring
    /// every match finds; its top `k` within a set of agents, found by
    /// block-max WAND (or agent by agent, within few), is the best `k` of
    /// every match scored (ties by rank;
    /// scores equal to a few ulps may trade places), whether the documents
    /// are in rank order or not; in rank order, with ties pruned, it is
    /// exactly what offering every tie finds.
    #[test]
    fn the_top_of_a_query_is_the_best_of_every_match_scored() {
        let mut set = agents(600, 17);
        // Rare words, listed from their postings beside counted ones.
        for (at, more) in [(3, " Quixotic quill."), (9, " Quixotic quixotic zebra."), (400, " Quill translator.")] {
            set[at].description.push_str(more);
        }
        let counted = built(&set);
        // The same scored from postings alone.
        let mut uncounted = built(&set);
        std::mem::take(&mut uncounted.counts.words);
        assert!(!counted.counts.words.is_empty());
        assert!(counted.listed("quixot").is_some() && counted.listed("agent").is_none());
        let large = built(&agents(900, 3));
        // The documents' own order, and a permutation of the positions
        // (7919 is prime to 600).
        let ids = by_id(&set);
        let shuffled: Vec<u32> = (0..600).map(|i| ((i * 7919) % 600) as u32).collect();
        let identity: Vec<u32> = (0..600).collect();
        assert!(counted.in_order(&ids) && !counted.in_order(&shuffled));
        let all = Bits::full(600);
        let some = Bits::from_positions(600, (0..600).filter(|i| i % 3 != 0));
        // A third: a lone word's agents scored in passes, not by WAND.
        let third = Bits::from_positions(600, (0..600).filter(|i| i % 3 == 0));
        // Narrow: scored agent by agent, not by WAND.
        let few = Bits::from_positions(600, (0..600).filter(|i| i % 9 == 4));
        let queries = [
            "translator",
            "text generation",
            "data analytics agent",
            "text data generation analytics",
            "audit data text agent translator",
            "transl",
            "analy",
            "zzz",
            "agent",
            "a",
            "quixotic translator",
            "data quill agent",
            "quill zebra analy",
        ];
        // The prefix as its own set, as a word's bonus, and left out (no
        // word starts with it).
        let mut prefixes = std::collections::BTreeSet::new();
        for (query, index) in queries.iter().flat_map(|q| [(q, &counted), (q, &uncounted)]) {
            let scored = index.search(query);
            let matched = index.matching(query);
            prefixes.insert((matched.having_prefix.is_some(), matched.prefix_word.is_some()));
            let found: Vec<usize> = matched.agents().iter().collect();
            let mut expected_found: Vec<usize> = scored.iter().map(|(at, _)| *at as usize).collect();
            expected_found.sort();
            assert_eq!(found, expected_found, "{query}");
            for (within, reference, k) in [
                (&all, None, 1),
                (&all, None, 20),
                (&all, None, 60),
                (&all, None, 150),
                (&some, None, 5),
                (&some, None, 90),
                (&some, Some(&large), 20),
                (&all, Some(&large), 1000),
                (&some, None, 0),
                (&third, None, 10),
                (&third, Some(&large), 40),
                (&few, None, 5),
                (&few, Some(&large), 30),
            ] {
                let truth: std::collections::HashMap<u32, f32> = index
                    .scores(query, reference)
                    .into_iter()
                    .filter(|(at, _)| within.contains(*at as usize))
                    .collect();
                // Ranked by id, shuffled, and by position (no table).
                for (rank, of) in [(&ids, Some(&ids[..])), (&shuffled, Some(&shuffled[..])), (&identity, None)] {
                    let mut expected: Vec<(u32, f32)> = truth.iter().map(|(at, s)| (*at, *s)).collect();
                    expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(rank[a.0 as usize].cmp(&rank[b.0 as usize])));
                    expected.truncate(k);
                    let ordered = index.in_order(rank);
                    let got = index.top(&matched, reference, within, k, &Ranks { of, ordered });
                    assert_eq!(got.len(), expected.len(), "{query} k={k}");
                    for ((at, score), (want, want_score)) in got.iter().zip(&expected) {
                        let close = |x: f32, y: f32| (x - y).abs() <= 1e-4 * y.abs().max(1.0);
                        assert!(
                            close(*score, *want_score),
                            "{query} k={k}: {at} scores {score}, expected {want_score}"
                        );
                        assert!(at == want || close(truth[at], *want_score), "{query} k={k}: {at} in place of {want}");
                    }
                    if ordered {
                        let every_tie = index.top(&matched, reference, within, k, &Ranks { of, ordered: false });
                        assert_eq!(got, every_tie, "{query} k={k}");
                    }
                }
            }
        }
        assert_eq!(prefixes.into_iter().collect::<Vec<_>>(), [(false, false), (true, false), (true, true)]);
    }

    #[test]
    fn a_written_index_opens_mapped_and_answers_as_one_built_in_memory() {
        let set = agents(700, 5);
        let dir = std::env::temp_dir().join(format!("almanac-text-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut writer = TextWriter::create(&dir, 2, 40_000_000).unwrap();
        // Given in position order; kept in the order of the ids.
        let ids = by_id(&set);
        let numbered: Vec<(u32, u32, Agent)> =
            set.iter().enumerate().map(|(at, agent)| (at as u32, ids[at], agent.clone())).collect();
        for batch in numbered.chunks(64) {
            writer.add(batch).unwrap();
        }
        writer.finish().unwrap();
        let (opened, built) = (TextIndex::open(&dir).unwrap(), built(&set));
        assert_eq!(opened.len(), 700);
        assert!(opened.in_order(&ids) && built.in_order(&ids));
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
