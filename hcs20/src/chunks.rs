//! Reassembly of messages split into chunks (`chunk_info`).
//!
//! A submission larger than one consensus transaction arrives as parts
//! numbered 1..=total sharing one initial transaction id. The parts are
//! joined in number order and the whole is applied at the consensus time of
//! the part that completed it. All parts must come from one payer: otherwise
//! anyone could finish someone else's message.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use super::message::Reason;
use super::verdict::OperationRow;
use super::Message;
use shared::entity::EntityId;
use shared::timestamp::Timestamp;

/// A complete message ready for the rules: either one unchunked message
/// (body borrowed) or the join of its parts.
#[derive(Clone, Debug)]
pub struct Envelope<'a> {
    pub topic: EntityId,
    pub sequence: u64,
    pub consensus: Timestamp,
    pub payer: EntityId,
    pub body: Cow<'a, [u8]>,
    pub chunks: u32,
}

struct Group<'a> {
    total: u32,
    parts: BTreeMap<u32, &'a Message>,
}

/// Takes messages in consensus order; returns the complete envelopes in the
/// order they completed, and a rejected row for every part that cannot be
/// used (bad numbering, duplicates, mixed payers, never completed).
pub fn assemble<'a>(messages: impl Iterator<Item = &'a Message>) -> (Vec<Envelope<'a>>, Vec<OperationRow>) {
    let mut envelopes = Vec::new();
    let mut rejected = Vec::new();
    let mut pending: HashMap<(EntityId, &'a str), Group<'a>> = HashMap::new();

    for message in messages {
        let chunk = match &message.chunk {
            Some(chunk) if chunk.total > 1 || chunk.number != 1 => chunk,
            _ => {
                envelopes.push(Envelope {
                    topic: message.topic,
                    sequence: message.sequence,
                    consensus: message.consensus,
                    payer: message.payer,
                    body: Cow::Borrowed(&message.body),
                    chunks: 1,
                });
                continue;
            }
        };
        if chunk.number == 0 || chunk.number > chunk.total {
            rejected.push(OperationRow::rejected(message, Reason::InvalidChunk));
            continue;
        }
        let key = (message.topic, chunk.group.as_str());
        let group = pending.entry(key).or_insert_with(|| Group { total: chunk.total, parts: BTreeMap::new() });
        if group.total != chunk.total || group.parts.contains_key(&chunk.number) {
            rejected.push(OperationRow::rejected(message, Reason::DuplicateChunk));
            continue;
        }
        group.parts.insert(chunk.number, message);
        if group.parts.len() as u32 != group.total {
            continue;
        }
        let group = pending.remove(&key).expect("group present");
        let first_payer = group.parts.values().next().expect("non-empty").payer;
        if group.parts.values().any(|part| part.payer != first_payer) {
            for part in group.parts.values() {
                rejected.push(OperationRow::rejected(part, Reason::ChunkPayerMismatch));
            }
            continue;
        }
        let body: Vec<u8> = group.parts.values().flat_map(|p| p.body.iter().copied()).collect();
        envelopes.push(Envelope {
            topic: message.topic,
            sequence: message.sequence,
            consensus: message.consensus,
            payer: first_payer,
            body: Cow::Owned(body),
            chunks: group.total,
        });
    }

    for group in pending.into_values() {
        for part in group.parts.values() {
            rejected.push(OperationRow::rejected(part, Reason::IncompleteChunks));
        }
    }
    (envelopes, rejected)
}
