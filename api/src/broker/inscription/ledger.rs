//! The network inscriptions are written to: the broker's account signs
//! each transaction, a consensus node takes it ([`crate::broker::hapi::node`]),
//! and the mirror node says when it reached consensus and what the topic
//! holds.
//!
//! Transaction ids are the account's and the time: a transaction retried
//! within its window is sent again under the same id (a node answers
//! `DUPLICATE_TRANSACTION` for one it already took, which is as good as
//! `OK`), so a message is never written twice by a retry.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use shared::entity::EntityId;

use crate::auth::signature::SigningKey;
use crate::broker::hapi::node::{self, Node};
use crate::broker::hapi::{self, TransactionBody, TxId};

/// What the network charges, as the broker estimates it (tinybars).
#[derive(Clone, Copy, Debug)]
pub struct Fees {
    pub topic: u64,
    pub message: u64,
}

/// The network and the broker's account on it.
pub struct Ledger {
    /// Its name as answered (`testnet`, `mainnet`).
    pub network: String,
    pub nodes: Vec<Node>,
    pub account: EntityId,
    pub key: SigningKey,
    pub fees: Fees,
    /// How long a transaction may be submitted after its valid start.
    pub valid_seconds: i64,
    pub nodes_client: reqwest::Client,
    pub mirror: reqwest::Client,
    pub mirror_base: String,
    /// The node tried first next time (calls are spread over the nodes).
    next_node: AtomicUsize,
    /// The last valid start given (nanoseconds since the epoch): ids are
    /// the clock's time, and each after the last, so no two are alike in
    /// this process or (the clock moving on) in the one before it.
    last_start: AtomicI64,
}

/// A transaction's outcome, as the mirror node shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reached {
    pub result: String,
    /// The mirror node's name of its kind (`CONSENSUSSUBMITMESSAGE`).
    pub name: String,
    /// The entity it created (a topic), if any.
    pub entity: Option<EntityId>,
    /// When it reached consensus (`seconds.nanoseconds`).
    pub consensus_timestamp: Option<String>,
}

/// Why a transaction was not taken.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// A precheck status that will not change by trying again (the
    /// transaction is wrong, or the account cannot pay).
    #[error("the network refused the transaction: {0}")]
    Status(String),
    /// No node took it (unreachable, busy): try again later.
    #[error("no node took the transaction: {0}")]
    Unavailable(String),
}

impl Ledger {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        network: String,
        nodes: Vec<Node>,
        account: EntityId,
        key: SigningKey,
        fees: Fees,
        timeout: Duration,
        mirror_base: String,
    ) -> anyhow::Result<Ledger> {
        Ok(Ledger {
            network,
            nodes,
            account,
            key,
            fees,
            valid_seconds: 120,
            nodes_client: node::client(timeout)?,
            mirror: http_client::builder().timeout(timeout).build()?,
            mirror_base: mirror_base.trim_end_matches('/').to_string(),
            next_node: AtomicUsize::new(0),
            last_start: AtomicI64::new(0),
        })
    }

    /// A new transaction id of the broker's account, valid from about a
    /// second ago (a node whose clock is a little behind ours still takes
    /// it), after every one given before.
    pub fn next_id(&self) -> TxId {
        let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX) - 1_000_000_000;
        let start = self
            .last_start
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| Some(now.max(last + 1)))
            .map_or(now, |last| now.max(last + 1));
        TxId {
            payer: self.account,
            seconds: start.div_euclid(1_000_000_000),
            nanos: start.rem_euclid(1_000_000_000) as i32,
        }
    }

    /// Whether `id` may still be submitted at `now` (seconds).
    pub fn in_window(&self, id: &TxId, now: i64) -> bool {
        now < id.seconds + self.valid_seconds
    }

    fn body(&self, id: &TxId, node: &Node, fee: u64) -> TransactionBody {
        TransactionBody {
            transaction_id: Some(hapi::TransactionId {
                transaction_valid_start: Some(hapi::Timestamp { seconds: id.seconds, nanos: id.nanos }),
                account_id: Some(id.payer.into()),
            }),
            node_account_id: Some(node.account.into()),
            // What the payer agrees to pay at most: twice the estimate.
            transaction_fee: fee * 2,
            transaction_valid_duration: Some(hapi::Duration { seconds: self.valid_seconds }),
            ..TransactionBody::default()
        }
    }

    /// Submits the transaction `id` that `fill` completes, by `method`,
    /// to the nodes in turn until one takes it.
    async fn submit(
        &self,
        id: &TxId,
        method: &str,
        fee: u64,
        fill: impl Fn(&mut TransactionBody),
    ) -> Result<(), Refused> {
        let start = self.next_node.fetch_add(1, Ordering::Relaxed);
        let mut last = String::from("no nodes are configured");
        for k in 0..self.nodes.len() {
            let node = &self.nodes[(start + k) % self.nodes.len()];
            let mut body = self.body(id, node, fee);
            fill(&mut body);
            let transaction = hapi::sign(&body, &self.key);
            match node::submit(&self.nodes_client, node, method, &transaction).await {
                Ok(code) => match hapi::status_name(code).as_str() {
                    "OK" | "DUPLICATE_TRANSACTION" => return Ok(()),
                    "BUSY" => last = format!("{} is busy", node.url),
                    status => return Err(Refused::Status(status.to_string())),
                },
                Err(e) => last = e.to_string(),
            }
        }
        Err(Refused::Unavailable(last))
    }

    /// Creates a topic with `memo`, the broker's key as its submit key and
    /// no admin key (an HCS-1 file's topic), as transaction `id`.
    pub async fn create_topic(&self, id: &TxId, memo: &str) -> Result<(), Refused> {
        let submit_key = hapi::key_of(&self.key);
        self.submit(id, "proto.ConsensusService/createTopic", self.fees.topic, |body| {
            body.consensus_create_topic = Some(hapi::ConsensusCreateTopic {
                memo: memo.to_string(),
                admin_key: None,
                submit_key: Some(submit_key.clone()),
                // 90 days, within the network's 6,999,999 to 8,000,001 s.
                auto_renew_period: Some(hapi::Duration { seconds: 7_776_000 }),
            });
        })
        .await
    }

    /// Submits `message` to `topic` as transaction `id`, with the
    /// transaction memo `memo` (HCS-26 names its operations there; empty
    /// for none).
    pub async fn submit_message(&self, id: &TxId, topic: EntityId, message: &[u8], memo: &str) -> Result<(), Refused> {
        self.submit(id, "proto.ConsensusService/submitMessage", self.fees.message, |body| {
            body.memo = memo.to_string();
            body.consensus_submit_message =
                Some(hapi::ConsensusSubmitMessage { topic_id: Some(topic.into()), message: message.to_vec() });
        })
        .await
    }

    /// Transaction `id` as the mirror node shows it (the broker's own, not
    /// a child), once it reached consensus.
    pub async fn reached(&self, id: &TxId) -> Result<Option<Reached>, String> {
        let found = crate::broker::mirror::transactions(&self.mirror, &self.mirror_base, &id.mirror())
            .await
            .map_err(|e| format!("{e:#}"))?;
        Ok(found.as_ref().and_then(|f| f.own()).map(|own| Reached {
            result: own.result.clone(),
            name: own.name.clone(),
            entity: own.entity_id.as_deref().and_then(|t| t.parse().ok()),
            consensus_timestamp: own.consensus_timestamp.clone(),
        }))
    }

    /// `topic`'s memo, as the mirror node shows it (`None`: no such topic
    /// yet).
    pub async fn topic_memo(&self, topic: EntityId) -> Result<Option<String>, String> {
        #[derive(Deserialize)]
        struct Info {
            memo: String,
        }
        let info: Option<Info> = self.mirror_get(&format!("/api/v1/topics/{topic}")).await?;
        Ok(info.map(|i| i.memo))
    }

    /// The sequence number of the message that reached consensus on
    /// `topic` at `timestamp` (`None`: not shown yet).
    pub async fn sequence_at(&self, topic: EntityId, timestamp: &str) -> Result<Option<u64>, String> {
        #[derive(Deserialize)]
        struct Page {
            messages: Vec<Message>,
        }
        #[derive(Deserialize)]
        struct Message {
            sequence_number: u64,
        }
        let page: Option<Page> =
            self.mirror_get(&format!("/api/v1/topics/{topic}/messages?timestamp={timestamp}")).await?;
        Ok(page.and_then(|p| p.messages.first().map(|m| m.sequence_number)))
    }

    /// What the mirror node answers for `path` (`None` for 404), read as
    /// JSON.
    async fn mirror_get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<Option<T>, String> {
        let url = format!("{}{path}", self.mirror_base);
        let response = self.mirror.get(&url).send().await.map_err(|e| format!("the mirror node: {e}"))?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !response.status().is_success() {
            return Err(format!("the mirror node answered {}", response.status().as_u16()));
        }
        response.json().await.map(Some).map_err(|e| format!("the mirror node's answer: {e}"))
    }

    /// The messages of `topic` the mirror node holds, in order, at most
    /// `max` of them.
    pub async fn messages(&self, topic: EntityId, max: usize) -> Result<Vec<Vec<u8>>, String> {
        #[derive(Deserialize)]
        struct Page {
            messages: Vec<Message>,
            links: Links,
        }
        #[derive(Deserialize)]
        struct Message {
            message: String,
        }
        #[derive(Deserialize)]
        struct Links {
            next: Option<String>,
        }
        let mut out = Vec::new();
        let mut next = Some(format!("/api/v1/topics/{topic}/messages?limit=100&order=asc"));
        while let Some(path) = next.take() {
            let Some(page) = self.mirror_get::<Page>(&path).await? else { return Ok(out) };
            for m in page.messages {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(m.message)
                    .map_err(|_| "the mirror node's message is not base64".to_string())?;
                out.push(bytes);
                if out.len() > max {
                    return Err(format!("topic {topic} holds more than the {max} messages written"));
                }
            }
            next = page.links.next;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_one_another_from_about_a_second_ago() {
        let key = crate::auth::login::key_for(crate::auth::login::DEV_KEYS, "0.0.1003").unwrap();
        let fees = Fees { topic: 1, message: 1 };
        let ledger = Ledger::new(
            "testnet".into(),
            Vec::new(),
            "0.0.1003".parse().unwrap(),
            key,
            fees,
            Duration::from_secs(1),
            "http://127.0.0.1:9".into(),
        )
        .unwrap();
        let before = chrono::Utc::now().timestamp();
        let ids: Vec<TxId> = (0..1000).map(|_| ledger.next_id()).collect();
        assert!(ids.windows(2).all(|w| (w[0].seconds, w[0].nanos) < (w[1].seconds, w[1].nanos)), "each after the last");
        assert!((before - 2..=before).contains(&ids[0].seconds), "about a second ago");
        assert!(ids.iter().all(|id| (0..1_000_000_000).contains(&id.nanos)));
        assert!(ledger.in_window(&ids[0], before) && !ledger.in_window(&ids[0], ids[0].seconds + 120));
    }
}
