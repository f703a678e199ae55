//! HCS-20: auditable points on consensus topics.
//!
//! Pure logic, no IO: [`message`] decodes a body, [`chunks`] reassembles
//! messages split over several consensus transactions, [`rules`] applies
//! operations in global consensus order to a [`rules::Ledger`]. The
//! decisions taken where the standard is silent are listed in the README's
//! rules section; each has a test in `rules`.

pub mod chunks;
pub mod message;
pub mod rules;

pub use message::{OpKind, Operation, Reason, Rejection};
pub use rules::{Changes, Event, EventKind, Holding, Ledger, OperationRow, Token, TokenId, TopicInfo, Topics};

use message::{decode, Decoded};

use crate::entity::EntityId;
use crate::timestamp::Timestamp;

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

impl Ledger {
    /// Applies messages in consensus order (whatever order they are given
    /// in) and returns one row per message, in that order. Every message
    /// must be newer than those already applied.
    ///
    /// Decoding bodies is independent per message and runs on every core;
    /// applying them is sequential.
    pub fn apply_messages(&mut self, messages: &[Message]) -> Vec<OperationRow> {
        let mut order: Vec<&Message> = messages.iter().collect();
        order.sort_unstable_by_key(|m| m.order_key());
        let (envelopes, mut chunk_rows) = chunks::assemble(order.iter().copied());
        drop(order);
        let decoded = decode_all(&envelopes);
        self.events.reserve(envelopes.len());
        self.learn_topics(envelopes.iter().zip(&decoded));
        let mut rows = Vec::with_capacity(envelopes.len() + chunk_rows.len());
        chunk_rows.sort_unstable_by_key(|row| (row.consensus, row.topic, row.sequence));
        let mut pending = chunk_rows.into_iter().peekable();
        for (envelope, decoded) in envelopes.iter().zip(decoded) {
            // Envelopes come in consensus order; slot the rejected chunk
            // parts in between.
            while pending.peek().is_some_and(|row| row.consensus < envelope.consensus) {
                rows.extend(pending.next());
            }
            rows.push(self.apply_decoded(envelope, decoded));
        }
        rows.extend(pending);
        rows
    }
}

/// Decodes every body, in parallel over the cores, keeping the order.
fn decode_all(envelopes: &[chunks::Envelope]) -> Vec<Decoded> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = envelopes.len().div_ceil(workers).max(1024);
    std::thread::scope(|scope| {
        let handles: Vec<_> = envelopes
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(|e| decode(&e.body)).collect::<Vec<_>>()))
            .collect();
        let mut all = Vec::with_capacity(envelopes.len());
        for handle in handles {
            all.extend(handle.join().expect("decoder panicked"));
        }
        all
    })
}
