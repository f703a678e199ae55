//! A message's verdict: one row of the warehouse's `operations` table.
//! Both the chunk assembler (which refuses parts) and the rules (which judge
//! operations) produce them.

use super::message::{OpKind, Reason, Rejection};
use super::Message;
use shared::entity::EntityId;
use shared::timestamp::Timestamp;

/// One row of the warehouse's `operations` table: every message, applied or
/// not, with the reason when not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationRow {
    pub topic: EntityId,
    pub sequence: u64,
    pub consensus: Timestamp,
    pub payer: EntityId,
    pub chunks: u32,
    pub op: Option<OpKind>,
    pub tick: Option<String>,
    pub amount: Option<u64>,
    pub from: Option<EntityId>,
    pub to: Option<EntityId>,
    pub memo: Option<String>,
    pub rejection: Option<Rejection>,
}

impl OperationRow {
    /// The row of a message refused before it could be decoded (a chunk
    /// that does not fit its group).
    pub(crate) fn rejected(message: &Message, reason: Reason) -> OperationRow {
        OperationRow {
            topic: message.topic,
            sequence: message.sequence,
            consensus: message.consensus,
            payer: message.payer,
            chunks: message.chunk.as_ref().map_or(1, |c| c.total),
            op: None,
            tick: None,
            amount: None,
            from: None,
            to: None,
            memo: None,
            rejection: Some(Rejection::new(reason)),
        }
    }
}
