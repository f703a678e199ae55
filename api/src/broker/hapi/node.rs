//! Consensus nodes, as a Hiero SDK reaches them: HAPI over gRPC, one
//! unary call per transaction (`POST /proto.ConsensusService/createTopic`
//! with the `Transaction` in a gRPC frame: a zero byte, its length as four
//! big-endian bytes, the message), answered by a `TransactionResponse`
//! holding the node's precheck. Plain HTTP/2 (h2c) to the addresses the
//! operator configures, as the SDKs use a node's plaintext port.
//!
//! A precheck of `OK` means the node took the transaction for consensus,
//! not that it reached it: the mirror node says that
//! ([`crate::broker::inscription`] waits for it there).

use std::time::Duration;

use prost::Message;
use shared::entity::EntityId;

use super::{Transaction, TransactionResponse};

/// One node: its account (what a transaction names as `nodeAccountID`)
/// and where it listens (`http://127.0.0.1:50211`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub account: EntityId,
    pub url: String,
}

impl Node {
    /// `0.0.3=127.0.0.1:50211` (the SDKs' network map, account first).
    pub fn parse(text: &str) -> Result<Node, String> {
        let (account, address) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?}: expected ACCOUNT=HOST:PORT (0.0.3=127.0.0.1:50211)"))?;
        let account = account.trim().parse().map_err(|_| format!("{text:?}: {account:?} is not an account id"))?;
        let address = address.trim();
        if address.is_empty() || address.contains('/') {
            return Err(format!("{text:?}: {address:?} is not HOST:PORT"));
        }
        Ok(Node { account, url: format!("http://{address}") })
    }
}

/// Why a call to a node gave no precheck.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("the node at {0} cannot be reached or did not answer in time")]
    Unreachable(String),
    #[error("the node at {url} answered gRPC status {status}: {message}")]
    Grpc { url: String, status: String, message: String },
    #[error("the node at {0} answered something that is not a TransactionResponse")]
    Garbled(String),
}

/// The client nodes are called with: HTTP/2 without TLS, each call
/// bounded by `timeout`.
pub fn client(timeout: Duration) -> reqwest::Result<reqwest::Client> {
    http_client::builder().http2_prior_knowledge().timeout(timeout).no_proxy().build()
}

/// A gRPC frame of `message`.
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 5);
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// The message of one gRPC frame (uncompressed), or `None`.
pub fn unframe(body: &[u8]) -> Option<&[u8]> {
    let (&flag, rest) = body.split_first()?;
    let length = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    (flag == 0).then(|| rest.get(4..4 + length)).flatten()
}

/// Sends `transaction` to `node` by `method` (`proto.ConsensusService/submitMessage`):
/// the node's precheck code.
pub async fn submit(
    client: &reqwest::Client,
    node: &Node,
    method: &str,
    transaction: &Transaction,
) -> Result<i32, Failure> {
    let url = format!("{}/{method}", node.url);
    let sent = client
        .post(&url)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(frame(&transaction.encode_to_vec()))
        .send()
        .await;
    let response = sent.map_err(|_| Failure::Unreachable(node.url.clone()))?;
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    // A gRPC error comes as a head without a body ("trailers only").
    if let Some(status) = header("grpc-status").filter(|s| s != "0") {
        let message = header("grpc-message").unwrap_or_default();
        return Err(Failure::Grpc { url: node.url.clone(), status, message });
    }
    if !response.status().is_success() {
        let status = response.status().as_u16().to_string();
        return Err(Failure::Grpc { url: node.url.clone(), status, message: "not a gRPC answer".into() });
    }
    let body = response.bytes().await.map_err(|_| Failure::Unreachable(node.url.clone()))?;
    let message = unframe(&body).ok_or_else(|| Failure::Garbled(node.url.clone()))?;
    let answer = TransactionResponse::decode(message).map_err(|_| Failure::Garbled(node.url.clone()))?;
    Ok(answer.node_transaction_precheck_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_ones_are_none() {
        let framed = frame(b"abc");
        assert_eq!(framed, [0, 0, 0, 0, 3, b'a', b'b', b'c']);
        assert_eq!(unframe(&framed), Some(&b"abc"[..]));
        assert_eq!(unframe(&[1, 0, 0, 0, 0]), None, "compressed");
        assert_eq!(unframe(&[0, 0, 0, 0, 9, 1]), None, "short");
        assert_eq!(unframe(&[]), None);
    }

    #[test]
    fn nodes_are_read_as_the_sdks_network_map() {
        let node = Node::parse("0.0.3=127.0.0.1:50211").unwrap();
        assert_eq!((node.account.to_string(), node.url.as_str()), ("0.0.3".into(), "http://127.0.0.1:50211"));
        for bad in ["127.0.0.1:50211", "x=127.0.0.1:1", "0.0.3=", "0.0.3=http://a/b"] {
            assert!(Node::parse(bad).is_err(), "{bad}");
        }
    }
}
