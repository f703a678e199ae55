//! Deterministic HCS-20 corpora written as captured mirror pages.
//!
//! [`rules_corpus`] is the small checked-in corpus (`datasets/ledger/`): a
//! scripted story touching every rule and every decision of `docs/hcs20.md`,
//! followed by random traffic. [`random_corpus`] writes corpora of any size
//! for benchmarks: hundreds of ticks with skewed popularity, tens of
//! thousands of accounts, a few percent invalid messages, some chunked.
//! The same arguments always give the same bytes.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use base64::Engine;
use sha2::{Digest, Sha384};

use broker_model::generate::Rng;
use generator::message_sources::captured::page_file_name;
use generator::message_sources::mirror::PAGE_LIMIT;
use generator::message_sources::{ChunkInfo, Links, MirrorMessage, Page};
use hcs20::Topics;
use shared::entity::EntityId;
use shared::timestamp::Timestamp;

/// First consensus time of every corpus: 2024-01-01T00:00:00Z.
const START: u64 = 1_704_067_200_000_000_000;

/// Messages being laid out in consensus order, then split into pages.
pub struct Corpus {
    clock: u64,
    rng: Rng,
    topics: HashMap<EntityId, Vec<MirrorMessage>>,
    running: HashMap<EntityId, Vec<u8>>,
}

impl Corpus {
    pub fn new(seed: u64) -> Corpus {
        Corpus { clock: START, rng: Rng::new(seed ^ 0xA1A2_A3A4), topics: HashMap::new(), running: HashMap::new() }
    }

    /// Appends one message (or, with `chunks > 1`, its parts) to `topic`.
    pub fn push(&mut self, topic: EntityId, payer: EntityId, body: &str, chunks: u32) {
        let bytes = body.as_bytes();
        let size = bytes.len().div_ceil(chunks as usize).max(1);
        let parts: Vec<&[u8]> = if chunks > 1 { bytes.chunks(size).collect() } else { vec![bytes] };
        let total = parts.len() as u32;
        let valid_start = Timestamp(self.clock);
        for (i, part) in parts.into_iter().enumerate() {
            self.clock += 1_000_000 + self.rng.below(2_000_000_000);
            let chunk_info = (total > 1).then(|| ChunkInfo {
                initial_transaction_id: serde_json::json!({
                    "account_id": payer.to_string(),
                    "nonce": 0,
                    "scheduled": false,
                    "transaction_valid_start": valid_start.to_string(),
                }),
                number: i as u32 + 1,
                total,
            });
            self.push_raw(topic, payer, part, chunk_info);
        }
    }

    /// Appends one record as given (for chunk edge cases).
    pub fn push_raw(&mut self, topic: EntityId, payer: EntityId, body: &[u8], chunk_info: Option<ChunkInfo>) {
        self.clock += 1_000_000 + self.rng.below(2_000_000_000);
        let running = self.running.entry(topic).or_default();
        let mut hasher = Sha384::new();
        hasher.update(&running[..]);
        hasher.update(body);
        *running = hasher.finalize().to_vec();
        let b64 = base64::engine::general_purpose::STANDARD;
        let list = self.topics.entry(topic).or_default();
        list.push(MirrorMessage {
            consensus_timestamp: Timestamp(self.clock).to_string(),
            message: b64.encode(body),
            payer_account_id: payer.to_string(),
            running_hash: b64.encode(&running[..]),
            running_hash_version: 3,
            sequence_number: list.len() as u64 + 1,
            topic_id: topic.to_string(),
            chunk_info,
        });
    }

    pub fn len(&self) -> usize {
        self.topics.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All messages of a topic, as the mirror node would list them.
    pub fn topic_messages(&self) -> &HashMap<EntityId, Vec<MirrorMessage>> {
        &self.topics
    }

    /// Writes `<out>/<topic>/<first>-<last>.json`, 100 messages a page,
    /// with `links.next` as the mirror node sets it; `pretty` for pages
    /// meant to be read by people, compact like the mirror node's otherwise.
    pub fn write_pages(&self, out: &Path, pretty: bool) -> Result<usize> {
        let mut files = 0;
        let mut topics: Vec<_> = self.topics.iter().collect();
        topics.sort_by_key(|(id, _)| **id);
        for (topic, messages) in topics {
            let dir = out.join(topic.to_string());
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for page in messages.chunks(PAGE_LIMIT as usize) {
                let first = page[0].sequence_number;
                let last = page[page.len() - 1].sequence_number;
                let next = (page.len() as u64 == PAGE_LIMIT).then(|| {
                    format!("/api/v1/topics/{topic}/messages?limit={PAGE_LIMIT}&order=asc&sequencenumber=gt:{last}")
                });
                let body = Page { messages: page.to_vec(), links: Links { next } };
                let mut bytes = if pretty { serde_json::to_vec_pretty(&body)? } else { serde_json::to_vec(&body)? };
                bytes.push(b'\n');
                fs::write(dir.join(page_file_name(first, last)), bytes)?;
                files += 1;
            }
        }
        Ok(files)
    }
}

fn id(num: u64) -> EntityId {
    EntityId::new(0, 0, num)
}

/// Random traffic over a set of topics: deploys first, then mints,
/// transfers and burns chosen to be mostly valid, with a few percent of
/// invalid messages of every kind and some chunked ones.
struct Traffic {
    rng: Rng,
    topics: Vec<(EntityId, bool)>,
    ticks: Vec<(EntityId, String, u64)>, // topic, tick, lim
    accounts: u64,
    balances: HashMap<(usize, u64), u64>,
    holders: Vec<Vec<u64>>,
    weights: Vec<u64>,
}

impl Traffic {
    fn new(seed: u64, topics: Vec<(EntityId, bool)>, tick_count: usize, accounts: u64) -> Traffic {
        let mut rng = Rng::new(seed);
        let mut ticks = Vec::new();
        for i in 0..tick_count {
            // Four in five tokens live on the first (public) topic.
            let topic =
                if rng.chance(80) { topics[0].0 } else { topics[1 + rng.below(topics.len() as u64 - 1) as usize].0 };
            let lim = [1_000, 10_000, 1_000_000][rng.below(3) as usize];
            ticks.push((topic, format!("{}{}", SYLLABLES[i % SYLLABLES.len()], i / SYLLABLES.len()), lim));
        }
        // Zipf-like popularity: weight of rank r is 1e6 / (r + 1).
        let weights = (0..tick_count).map(|r| 1_000_000 / (r as u64 + 1)).collect();
        Traffic {
            rng,
            topics,
            holders: vec![Vec::new(); tick_count],
            ticks,
            accounts,
            balances: HashMap::new(),
            weights,
        }
    }

    fn private(&self, topic: EntityId) -> bool {
        self.topics.iter().any(|(t, p)| *t == topic && *p)
    }

    fn pick_tick(&mut self) -> usize {
        let total: u64 = self.weights.iter().sum();
        let mut x = self.rng.below(total);
        for (i, w) in self.weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        self.weights.len() - 1
    }

    fn account(&mut self) -> u64 {
        // Skewed too: half the traffic goes to a tenth of the accounts.
        if self.rng.chance(50) {
            1000 + self.rng.below(self.accounts / 10 + 1)
        } else {
            1000 + self.rng.below(self.accounts)
        }
    }

    fn deploys(&mut self, corpus: &mut Corpus) {
        for i in 0..self.ticks.len() {
            let (topic, tick, lim) = self.ticks[i].clone();
            let deployer = id(self.account());
            let body = format!(
                r#"{{"p":"hcs-20","op":"deploy","name":"{} points","tick":"{tick}","max":"1000000000000","lim":"{lim}","m":"deploy {tick}"}}"#,
                tick.to_uppercase()
            );
            corpus.push(topic, deployer, &body, 1);
        }
    }

    fn step(&mut self, corpus: &mut Corpus) {
        let t = self.pick_tick();
        let (topic, tick, lim) = self.ticks[t].clone();
        let roll = self.rng.below(1000);
        let chunks = if self.rng.below(1000) < 5 { 2 } else { 1 };
        if roll < 40 {
            return self.invalid(corpus, t);
        }
        let holder = (!self.holders[t].is_empty())
            .then(|| self.holders[t][self.rng.below(self.holders[t].len() as u64) as usize]);
        match (roll, holder) {
            (40..=539, _) | (_, None) => {
                let to = self.account();
                let amt = 1 + self.rng.below(lim);
                let body = format!(r#"{{"p":"hcs-20","op":"mint","tick":"{tick}","amt":"{amt}","to":"0.0.{to}"}}"#);
                corpus.push(topic, id(self.account()), &body, chunks);
                self.credit(t, to, amt);
            }
            (540..=919, Some(from)) => {
                let balance = self.balances[&(t, from)];
                let amt = 1 + self.rng.below(balance.div_ceil(2));
                let to = self.account();
                let payer = if self.private(topic) { self.account() } else { from };
                let memo = if self.rng.chance(20) { r#","m":"gm""# } else { "" };
                let body = format!(
                    r#"{{"p":"hcs-20","op":"transfer","tick":"{tick}","amt":"{amt}","from":"0.0.{from}","to":"0.0.{to}"{memo}}}"#
                );
                corpus.push(topic, id(payer), &body, chunks);
                self.debit(t, from, amt);
                self.credit(t, to, amt);
            }
            (_, Some(from)) => {
                let balance = self.balances[&(t, from)];
                let amt = 1 + self.rng.below(balance);
                let body = format!(r#"{{"p":"hcs-20","op":"burn","tick":"{tick}","amt":"{amt}","from":"0.0.{from}"}}"#);
                let payer = if self.private(topic) { self.account() } else { from };
                corpus.push(topic, id(payer), &body, chunks);
                self.debit(t, from, amt);
            }
        }
    }

    /// One of several kinds of invalid message; none changes state.
    fn invalid(&mut self, corpus: &mut Corpus, t: usize) {
        let (topic, tick, lim) = self.ticks[t].clone();
        let to = self.account();
        let body = match self.rng.below(7) {
            0 => "gm frens".to_string(),
            1 => format!(r#"{{"p":"hcs-20","op":"mint","tick":"{tick}","amt":{lim},"to":"0.0.{to}"}}"#),
            2 => format!(r#"{{"p":"hcs-20","op":"mint","tick":"{tick}","amt":"{}","to":"0.0.{to}"}}"#, lim + 1),
            3 => format!(r#"{{"p":"hcs-20","op":"mint","tick":"nope{t}","amt":"1","to":"0.0.{to}"}}"#),
            4 => format!(
                r#"{{"p":"hcs-20","op":"transfer","tick":"{tick}","amt":"999999999999999","from":"0.0.{to}","to":"0.0.1"}}"#
            ),
            5 => format!(r#"{{"p":"hcs-20","op":"burn","tick":"{tick}","amt":"0","from":"0.0.{to}"}}"#),
            _ => format!(r#"{{"p":"hcs-20","op":"deploy","name":"again","tick":"{tick}","max":"1"}}"#),
        };
        corpus.push(topic, id(to), &body, 1);
    }

    fn credit(&mut self, t: usize, account: u64, amt: u64) {
        let b = self.balances.entry((t, account)).or_default();
        if *b == 0 {
            self.holders[t].push(account);
        }
        *b += amt;
    }

    fn debit(&mut self, t: usize, account: u64, amt: u64) {
        let b = self.balances.get_mut(&(t, account)).expect("debit of a holder");
        *b -= amt;
        if *b == 0 {
            self.holders[t].retain(|a| *a != account);
        }
    }
}

const SYLLABLES: [&str; 16] = [
    "ape", "bolt", "cat", "dao", "echo", "fox", "gem", "hbar", "ion", "jet", "koi", "luna", "moon", "neo", "orb", "pix",
];

/// Registered topics of random corpora: (id, private).
fn registered_topics(count: u64) -> Vec<(EntityId, bool)> {
    (0..count).map(|i| (id(5_000_000 + i), i % 2 == 0)).collect()
}

fn register_all(corpus: &mut Corpus, registry: EntityId, topics: &[(EntityId, bool)]) {
    for (i, (topic, private)) in topics.iter().enumerate() {
        // An announced topic exists even before its first message.
        corpus.topics.entry(*topic).or_default();
        let body = format!(
            r#"{{"p":"hcs-20","op":"register","name":"Community {i}","private":{private},"t_id":"{topic}","m":"topic {i}"}}"#
        );
        corpus.push(registry, id(900 + i as u64), &body, 1);
    }
}

/// A corpus of about `messages` messages for benchmarks and tests, with
/// ticks and accounts in proportion to its size.
pub fn random_corpus(messages: usize, seed: u64, topics: Topics) -> Corpus {
    random_corpus_scaled(messages, messages, seed, topics)
}

/// A corpus of `messages` messages whose ticks and accounts are sized for
/// `scale` messages. Of two corpora with the same scale and seed, the larger
/// continues the smaller: its first messages are the same, which is how
/// incremental runs are tested.
pub fn random_corpus_scaled(messages: usize, scale: usize, seed: u64, topics: Topics) -> Corpus {
    let mut corpus = Corpus::new(seed);
    let registered = registered_topics(8);
    register_all(&mut corpus, topics.registry, &registered);
    let mut all = vec![(topics.public, false)];
    all.extend(registered.iter().copied());
    let tick_count = (scale / 3000).clamp(20, 1000);
    let accounts = (scale as u64 / 25).max(200);
    let mut traffic = Traffic::new(seed, all, tick_count, accounts);
    traffic.deploys(&mut corpus);
    while corpus.len() < messages {
        traffic.step(&mut corpus);
    }
    corpus
}

/// The checked-in corpus: every rule and decision, then random traffic.
pub fn rules_corpus(topics: Topics) -> Corpus {
    let mut c = Corpus::new(20);
    let (public, registry) = (topics.public, topics.registry);
    let (private, community) = (id(5_000_001), id(5_000_002));
    let a = |n: u64| id(n);
    let script: &[(EntityId, EntityId, &str)] = &[
        // Tokens deployed before their topic is announced still count.
        (
            community,
            a(2001),
            r#"{"p":"hcs-20","op":"deploy","name":"Early Bird","tick":"early","max":"1000","m":"deployed before registration"}"#,
        ),
        (
            registry,
            a(2000),
            r#"{"p":"hcs-20","op":"register","name":"Guild Points","private":true,"t_id":"0.0.5000001","m":"guild topic with a submit key"}"#,
        ),
        (
            registry,
            a(2001),
            r#"{"p":"hcs-20","op":"register","name":"Community","private":false,"t_id":"0.0.5000002"}"#,
        ),
        (registry, a(2002), r#"{"p":"hcs-20","op":"register","name":"Dup","private":false,"t_id":"0.0.5000001"}"#),
        (registry, a(2002), r#"{"p":"hcs-20","op":"register","name":"Pub","private":true,"t_id":"0.0.4350190"}"#),
        (registry, a(2002), r#"{"p":"hcs-20","op":"register","name":"Bad","private":"yes","t_id":"0.0.5000003"}"#),
        (registry, a(2002), r#"{"p":"hcs-20","op":"deploy","name":"Wrong","tick":"wrong","max":"5"}"#),
        (
            public,
            a(1001),
            r#"{"p":"hcs-20","op":"deploy","name":"Almanac Points","tick":"alm","max":"21000000","lim":"1000","metadata":"ipfs://almanac","m":"the first token"}"#,
        ),
        (public, a(1002), r#"{"p":"HCS-20","op":"DEPLOY","name":"Loud","tick":"  LOUD ","max":"500"}"#),
        (public, a(1003), r#"{"p":"hcs-20","op":"deploy","name":"Again","tick":"ALM","max":"5"}"#),
        (public, a(1003), r#"{"p":"hcs-20","op":"deploy","name":"No limit","tick":"nolim","max":"100","lim":"0"}"#),
        (public, a(1003), r#"{"p":"hcs-20","op":"deploy","name":"Numbers","tick":"num","max":100}"#),
        (public, a(1003), r#"{"p":"hcs-20","op":"deploy","name":"Tiny","tick":"tiny","max":"10","lim":"10"}"#),
        (public, a(1004), r#"{"p":"hcs-20","op":"mint","tick":"alm","amt":"1000","to":"0.0.1001"}"#),
        (public, a(1004), r#"{"p":"hcs-20","op":"mint","tick":"alm","amt":"0500","to":"0.0.1002-abcde"}"#),
        (public, a(1004), r#"{"p":"hcs-20","op":"mint","tick":"alm","amt":"1001","to":"0.0.1003"}"#),
        (public, a(1004), r#"{"p":"hcs-20","op":"mint","tick":"alm","amt":"0","to":"0.0.1003"}"#),
        (public, a(1004), r#"{"p":"hcs-20","op":"mint","tick":"alm","amt":"-5","to":"0.0.1003"}"#),
        (public, a(1004), r#"{"p":"hcs-20","op":"mint","tick":"alm","amt":"1000000000000000000","to":"0.0.1003"}"#),
        (public, a(1004), r#"{"p":"hcs-20","op":"mint","tick":"ghost","amt":"1","to":"0.0.1003"}"#),
        (public, a(1004), r#"{"p":"hcs-20","op":"mint","tick":"alm","amt":"1","to":"alice"}"#),
        (public, a(1005), r#"{"p":"hcs-20","op":"mint","tick":"Loud","amt":"500","to":"0.0.1005"}"#),
        (public, a(1005), r#"{"p":"hcs-20","op":"mint","tick":"loud","amt":"1","to":"0.0.1005"}"#),
        (public, a(1006), r#"{"p":"hcs-20","op":"mint","tick":"tiny","amt":"10","to":"0.0.1006"}"#),
        (public, a(1006), r#"{"p":"hcs-20","op":"burn","tick":"tiny","amt":"4","from":"0.0.1006"}"#),
        (public, a(1006), r#"{"p":"hcs-20","op":"mint","tick":"tiny","amt":"1","to":"0.0.1006"}"#),
        (
            public,
            a(1001),
            r#"{"p":"hcs-20","op":"transfer","tick":"alm","amt":"250","from":"0.0.1001","to":"0.0.1007"}"#,
        ),
        (
            public,
            a(1007),
            r#"{"p":"hcs-20","op":"transfer","tick":"alm","amt":"100","from":"0.0.1001","to":"0.0.1007"}"#,
        ),
        (
            public,
            a(1007),
            r#"{"p":"hcs-20","op":"transfer","tick":"alm","amt":"100","from":"0.0.1001","to":"0.0.1007","payer_account_id":"0.0.1001"}"#,
        ),
        (
            public,
            a(1007),
            r#"{"p":"hcs-20","op":"transfer","tick":"alm","amt":"251","from":"0.0.1007","to":"0.0.1001"}"#,
        ),
        (
            public,
            a(1007),
            r#"{"p":"hcs-20","op":"transfer","tick":"alm","amt":"250","from":"0.0.1007","to":"0.0.1008"}"#,
        ),
        (public, a(1002), r#"{"p":"hcs-20","op":"burn","tick":"alm","amt":"100","from":"0.0.1002"}"#),
        (public, a(1009), r#"{"p":"hcs-20","op":"burn","tick":"alm","amt":"100","from":"0.0.1002"}"#),
        (public, a(1001), r#"{"p":"hcs-20","op":"transfer","tick":"alm","amt":"5","from":"0.0.1001","to":"0.0.1001"}"#),
        (public, a(1001), r#"{"p":"hcs-20","op":"airdrop","tick":"alm","amt":"5"}"#),
        (public, a(1001), r#"{"p":"brc-20","op":"mint","tick":"alm","amt":"5","to":"0.0.1001"}"#),
        (public, a(1001), "gm"),
        (public, a(1001), r#"["hcs-20","mint"]"#),
        (public, a(1001), r#"{"p":"hcs-20","op":"mint","tick":"alm","amt":"5","amt":"6","to":"0.0.1001"}"#),
        (private, a(3001), r#"{"p":"hcs-20","op":"deploy","name":"Guild","tick":"guild","max":"1000000"}"#),
        (private, a(3001), r#"{"p":"hcs-20","op":"mint","tick":"guild","amt":"5000","to":"0.0.3100"}"#),
        (
            private,
            a(3001),
            r#"{"p":"hcs-20","op":"transfer","tick":"guild","amt":"1200","from":"0.0.3100","to":"0.0.3101"}"#,
        ),
        (private, a(3001), r#"{"p":"hcs-20","op":"burn","tick":"guild","amt":"200","from":"0.0.3101"}"#),
        (community, a(2001), r#"{"p":"hcs-20","op":"deploy","name":"Almanac on Community","tick":"alm","max":"1000"}"#),
        (community, a(2001), r#"{"p":"hcs-20","op":"mint","tick":"alm","amt":"1000","to":"0.0.2001"}"#),
        (community, a(2001), r#"{"p":"hcs-20","op":"mint","tick":"early","amt":"10","to":"0.0.2001"}"#),
        (
            community,
            a(2009),
            r#"{"p":"hcs-20","op":"transfer","tick":"early","amt":"5","from":"0.0.2001","to":"0.0.2009"}"#,
        ),
        (id(7_777_777), a(1001), r#"{"p":"hcs-20","op":"deploy","name":"Stray","tick":"stray","max":"5"}"#),
    ];
    for (topic, payer, body) in script {
        c.push(*topic, *payer, body, 1);
    }
    // Chunked: a transfer in three parts, and broken submissions.
    c.push(public, a(1008), r#"{"p":"hcs-20","op":"transfer","tick":"alm","amt":"50","from":"0.0.1008","to":"0.0.1009","m":"sent in three chunks"}"#, 3);
    let chunk = |tx: &str, number, total| {
        Some(ChunkInfo { initial_transaction_id: serde_json::Value::String(tx.into()), number, total })
    };
    c.push_raw(public, a(1008), br#"{"p":"hcs-20","op":"mint","#, chunk("0.0.1008@1704067300.000000000", 1, 2));
    c.push_raw(
        public,
        a(1009),
        br#""tick":"alm","amt":"1","to":"0.0.1009"}"#,
        chunk("0.0.1008@1704067300.000000000", 2, 2),
    );
    c.push_raw(public, a(1008), br#"{"p":"hcs-20","op":"mint","#, chunk("0.0.1008@1704067400.000000000", 1, 2));

    // Random traffic on the same topics.
    let mut traffic = Traffic::new(7, vec![(public, false), (private, true), (community, false)], 12, 120);
    traffic.deploys(&mut c);
    while c.len() < 420 {
        traffic.step(&mut c);
    }
    c
}
