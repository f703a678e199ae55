//! Where HCS-20 messages come from: a mirror node over HTTP ([`mirror`]) or
//! pages captured from one ([`captured`]). Both speak the mirror node's JSON
//! and produce [`Message`]s for one topic after a cursor (the last sequence
//! number already stored).

pub mod captured;
pub mod mirror;

use anyhow::{bail, Context, Result};
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::entity::EntityId;
use crate::hcs20::{Chunk, Message};

/// One page of `GET /api/v1/topics/{id}/messages`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Page {
    pub messages: Vec<MirrorMessage>,
    pub links: Links,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Links {
    pub next: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MirrorMessage {
    pub consensus_timestamp: String,
    pub message: String,
    pub payer_account_id: String,
    pub running_hash: String,
    pub running_hash_version: u32,
    pub sequence_number: u64,
    pub topic_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_info: Option<ChunkInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChunkInfo {
    /// A string, or the mirror node's object
    /// `{account_id, nonce, scheduled, transaction_valid_start}`.
    pub initial_transaction_id: serde_json::Value,
    pub number: u32,
    pub total: u32,
}

impl ChunkInfo {
    fn group(&self) -> String {
        match &self.initial_transaction_id {
            serde_json::Value::String(id) => id.clone(),
            serde_json::Value::Object(tx) => {
                let field = |name: &str| tx.get(name).map(|v| v.to_string()).unwrap_or_default();
                format!(
                    "{}@{}/{}",
                    field("account_id").trim_matches('"'),
                    field("transaction_valid_start").trim_matches('"'),
                    field("nonce")
                )
            }
            other => other.to_string(),
        }
    }
}

impl MirrorMessage {
    /// The record as the rules need it. A record the mirror node could not
    /// have produced (bad timestamp, bad base64) is an error in the source,
    /// not a message to skip.
    pub fn to_message(&self) -> Result<Message> {
        let context = || format!("topic {} sequence {}", self.topic_id, self.sequence_number);
        let message = Message {
            topic: self.topic_id.parse().with_context(context)?,
            sequence: self.sequence_number,
            consensus: self.consensus_timestamp.parse().with_context(context)?,
            payer: self.payer_account_id.parse().with_context(context)?,
            body: base64::engine::general_purpose::STANDARD
                .decode(&self.message)
                .with_context(|| format!("{}: message is not base64", context()))?,
            chunk: self.chunk_info.as_ref().map(|c| Chunk {
                group: c.group(),
                number: c.number,
                total: c.total,
            }),
        };
        Ok(message)
    }
}

/// Converts a page's records, checking they belong to `topic` and follow
/// `after` in sequence.
pub fn page_messages(page: &Page, topic: EntityId, after: u64) -> Result<Vec<Message>> {
    let mut out = Vec::with_capacity(page.messages.len());
    for record in &page.messages {
        let message = record.to_message()?;
        if message.topic != topic {
            bail!("page for topic {topic} holds a message of topic {}", message.topic);
        }
        if message.sequence > after {
            out.push(message);
        }
    }
    Ok(out)
}
