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
pub use rules::{Event, EventKind, Holding, Ledger, OperationRow, Token, TokenId, TopicInfo, Topics};

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
/// a full build and the tests agree by construction.
pub fn replay(messages: &[Message], topics: Topics) -> (Ledger, Vec<OperationRow>) {
    let mut order: Vec<&Message> = messages.iter().collect();
    order.sort_unstable_by_key(|m| m.order_key());
    let (envelopes, mut rows) = chunks::assemble(order.iter().copied());
    let mut ledger = Ledger::new(topics);
    ledger.learn_topics(&envelopes);
    rows.reserve(envelopes.len());
    for envelope in &envelopes {
        rows.push(ledger.apply(envelope));
    }
    rows.sort_by_key(|row| (row.consensus, row.topic, row.sequence));
    (ledger, rows)
}
