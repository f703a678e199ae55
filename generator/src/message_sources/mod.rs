//! Where HCS-20 messages come from: a mirror node over HTTP ([`mirror`]) or
//! pages captured from one ([`captured`]). Both speak the mirror node's JSON
//! and produce [`Message`]s for one topic after a cursor (the last sequence
//! number already stored).

pub mod captured;
pub mod mirror;

use std::borrow::Cow;

use anyhow::{bail, Context, Result};
use base64::Engine;
use serde::{Deserialize, Serialize};

use hcs20::{Chunk, Message};
use shared::entity::EntityId;

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

/// A page as parsed: records borrow from the response bytes where the JSON
/// has no escapes, and fields the build does not use are skipped.
#[derive(Deserialize)]
struct PageRef<'a> {
    #[serde(borrow)]
    messages: Vec<RecordRef<'a>>,
    #[serde(default)]
    links: Links,
}

#[derive(Deserialize)]
struct RecordRef<'a> {
    #[serde(borrow)]
    consensus_timestamp: Cow<'a, str>,
    /// Base64: read as raw bytes, which skips UTF-8 validation of the
    /// longest field of a page.
    #[serde(borrow)]
    message: Cow<'a, [u8]>,
    #[serde(borrow)]
    payer_account_id: Cow<'a, str>,
    sequence_number: u64,
    #[serde(borrow)]
    topic_id: Cow<'a, str>,
    #[serde(default)]
    chunk_info: Option<ChunkInfo>,
}

/// One parsed page: every record as a [`Message`], and `links.next`.
pub struct Parsed {
    pub messages: Vec<Message>,
    pub next: Option<String>,
}

/// Parses a mirror page, checking every record belongs to `topic`. A record
/// the mirror node could not have produced (bad timestamp, bad base64) is an
/// error in the source, not a message to skip.
pub fn parse_page(bytes: &[u8], topic: EntityId) -> Result<Parsed> {
    let page: PageRef = serde_json::from_slice(bytes).context("not a mirror node page")?;
    let mut messages = Vec::with_capacity(page.messages.len());
    for r in page.messages {
        let message = to_message(
            &r.topic_id,
            r.sequence_number,
            &r.consensus_timestamp,
            &r.payer_account_id,
            &r.message,
            r.chunk_info.as_ref(),
        )?;
        if message.topic != topic {
            bail!("page for topic {topic} holds a message of topic {}", message.topic);
        }
        messages.push(message);
    }
    Ok(Parsed { messages, next: page.links.next })
}

impl MirrorMessage {
    pub fn to_message(&self) -> Result<Message> {
        to_message(
            &self.topic_id,
            self.sequence_number,
            &self.consensus_timestamp,
            &self.payer_account_id,
            self.message.as_bytes(),
            self.chunk_info.as_ref(),
        )
    }
}

fn to_message(
    topic: &str,
    sequence: u64,
    consensus: &str,
    payer: &str,
    body: &[u8],
    chunk: Option<&ChunkInfo>,
) -> Result<Message> {
    let context = || format!("topic {topic} sequence {sequence}");
    Ok(Message {
        topic: topic.parse().with_context(context)?,
        sequence,
        consensus: consensus.parse().with_context(context)?,
        payer: payer.parse().with_context(context)?,
        body: base64::engine::general_purpose::STANDARD
            .decode(body)
            .with_context(|| format!("{}: message is not base64", context()))?,
        chunk: chunk.map(|c| Chunk { group: c.group(), number: c.number, total: c.total }),
    })
}
