//! HCS-20: auditable points on consensus topics.
//!
//! Pure logic, no IO: [`message`] decodes a body, [`chunks`] reassembles
//! messages split over several consensus transactions, [`rules`] applies
//! operations in global consensus order to a [`rules::Ledger`]. The
//! decisions taken where the standard is silent are listed in `docs/hcs20.md`'s
//! rules section; each has a test in `rules`.

pub mod analytics;
pub mod chunks;
pub mod message;
pub mod routes;
pub mod rules;
pub mod tables;
pub mod verdict;

pub use message::{OpKind, Operation, Reason, Rejection};
pub use rules::{Changes, Event, EventKind, Holding, Ledger, Token, TokenId, TopicInfo, Topics};
pub use verdict::OperationRow;

use message::{decode, Decoded};

use std::collections::BTreeSet;

use shared::entity::EntityId;
use shared::timestamp::Timestamp;

/// One consensus message as the mirror node reports it, body decoded from
/// base64. This is what sources produce and what the warehouse stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub topic: EntityId,
    pub sequence: u64,
    pub consensus: Timestamp,
    pub payer: EntityId,
    pub body: Vec<u8>,
    pub chunk: Option<Chunk>,
}

/// Where a message sits in a chunked submission. `group` identifies the
/// submission (the mirror node's `initial_transaction_id`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Chunk {
    pub group: String,
    pub number: u32,
    pub total: u32,
}

impl Message {
    /// Global consensus order. Hedera consensus timestamps are unique across
    /// the network; topic and sequence only break ties in synthetic data.
    pub fn order_key(&self) -> (Timestamp, EntityId, u64) {
        (self.consensus, self.topic, self.sequence)
    }
}

/// Replays every message from the start: the one way state is computed, so
/// a full build and the tests agree by construction. Returns the ledger and
/// one row per message in consensus order.
pub fn replay(messages: &[Message], topics: Topics) -> (Ledger, Vec<OperationRow>) {
    let mut ledger = Ledger::new(topics);
    let rows = ledger.apply_messages(messages);
    (ledger, rows)
}

/// Messages in consensus order, chunked submissions reassembled, every
/// body decoded once: an incremental run needs the bodies twice (which
/// accounts they touch, then the rules), a full replay only once and
/// decodes as it applies ([`Ledger::apply_messages`]).
pub struct Batch<'a> {
    envelopes: Vec<chunks::Envelope<'a>>,
    /// Parts of chunked submissions that were refused, not yet in order.
    chunk_rows: Vec<OperationRow>,
    decoded: Vec<Decoded>,
}

/// Sorts `messages` into consensus order and reassembles chunks.
fn assemble(messages: &[Message]) -> (Vec<chunks::Envelope<'_>>, Vec<OperationRow>) {
    let mut order: Vec<&Message> = messages.iter().collect();
    order.sort_unstable_by_key(|m| m.order_key());
    chunks::assemble(order.into_iter())
}

impl<'a> Batch<'a> {
    pub fn new(messages: &'a [Message]) -> Batch<'a> {
        use rayon::prelude::*;
        let (envelopes, chunk_rows) = assemble(messages);
        let decoded = envelopes.par_iter().with_min_len(1_024).map(|e| decode(&e.body)).collect();
        Batch { envelopes, chunk_rows, decoded }
    }

    /// Accounts whose balances the batch may touch.
    pub fn accounts(&self) -> BTreeSet<EntityId> {
        let mut accounts = BTreeSet::new();
        for (_, operation) in &self.decoded {
            match operation {
                Ok(Operation::Mint { to, .. }) => {
                    accounts.insert(*to);
                }
                Ok(Operation::Burn { from, .. }) => {
                    accounts.insert(*from);
                }
                Ok(Operation::Transfer { from, to, .. }) => {
                    accounts.extend([*from, *to]);
                }
                _ => {}
            }
        }
        accounts
    }
}

impl Ledger {
    /// Applies messages in consensus order (whatever order they are given
    /// in) and returns one row per message, in that order. Every message
    /// must be newer than those already applied.
    ///
    /// Decoding bodies is independent per message and runs on the thread
    /// pool, a window ahead; applying them is sequential.
    pub fn apply_messages(&mut self, messages: &[Message]) -> Vec<OperationRow> {
        let (envelopes, chunk_rows) = assemble(messages);
        // Registrations first: a topic's privacy governs all its messages.
        let registry = self.well_known.registry;
        let registrations: Vec<(&chunks::Envelope, Decoded)> =
            envelopes.iter().filter(|e| e.topic == registry).map(|e| (e, decode(&e.body))).collect();
        self.learn_topics(registrations.iter().map(|(e, d)| (*e, d)));
        drop(registrations);
        self.apply_in_order(&envelopes, chunk_rows, |envelopes, apply| decode_pipelined(envelopes, apply))
    }

    /// [`Ledger::apply_messages`] for a batch already decoded.
    pub fn apply_batch(&mut self, batch: Batch) -> Vec<OperationRow> {
        let Batch { envelopes, chunk_rows, decoded } = batch;
        self.learn_topics(envelopes.iter().zip(&decoded));
        let mut decoded = decoded.into_iter();
        self.apply_in_order(&envelopes, chunk_rows, |envelopes, apply| {
            for envelope in envelopes {
                apply(envelope, decoded.next().expect("one decoded body per envelope"));
            }
        })
    }

    /// Applies `envelopes` with the bodies `feed` decodes, slotting the
    /// refused chunk parts in between by consensus time.
    fn apply_in_order<'e>(
        &mut self,
        envelopes: &'e [chunks::Envelope<'e>],
        mut chunk_rows: Vec<OperationRow>,
        feed: impl FnOnce(&'e [chunks::Envelope<'e>], &mut (dyn FnMut(&'e chunks::Envelope<'e>, Decoded) + Send)),
    ) -> Vec<OperationRow> {
        self.events.reserve(envelopes.len());
        let mut rows = Vec::with_capacity(envelopes.len() + chunk_rows.len());
        chunk_rows.sort_unstable_by_key(|row| (row.consensus, row.topic, row.sequence));
        let mut pending = chunk_rows.into_iter().peekable();
        feed(envelopes, &mut |envelope, decoded| {
            while pending.peek().is_some_and(|row| row.consensus < envelope.consensus) {
                rows.extend(pending.next());
            }
            rows.push(self.apply_decoded(envelope, decoded));
        });
        rows.extend(pending);
        rows
    }
}

/// Envelopes decoded per worker thread in one window: the applier applies
/// one window while the pool decodes the next.
const DECODE_BATCH: usize = 16_384;

/// Calls `apply` on every envelope with its decoded body, in order, while
/// the thread pool decodes the next window of envelopes.
fn decode_pipelined<'a>(
    envelopes: &'a [chunks::Envelope<'a>],
    mut apply: impl FnMut(&'a chunks::Envelope<'a>, Decoded) + Send,
) {
    use rayon::prelude::*;
    let window = DECODE_BATCH * rayon::current_num_threads().max(1);
    let decode_all = |part: &'a [chunks::Envelope<'a>]| -> Vec<Decoded> {
        part.par_iter().with_min_len(1_024).map(|e| decode(&e.body)).collect()
    };
    let mut windows = envelopes.chunks(window);
    let Some(first) = windows.next() else { return };
    let mut current = (first, decode_all(first));
    for next in windows {
        let (part, decoded) = current;
        let apply = &mut apply;
        let (decoded_next, ()) = rayon::join(
            || decode_all(next),
            move || part.iter().zip(decoded).for_each(|(envelope, d)| apply(envelope, d)),
        );
        current = (next, decoded_next);
    }
    let (part, decoded) = current;
    part.iter().zip(decoded).for_each(|(envelope, d)| apply(envelope, d));
}
