//! The few Hedera API (HAPI) protobuf messages the broker needs: an HBAR
//! transfer for a payment intent, unsigned, in the byte form wallets take
//! (`Transaction.fromBytes` of the Hiero SDKs, WalletConnect's
//! `hedera_signAndExecuteTransaction`); a topic created and messages
//! submitted for an inscription, signed by the broker's account and sent
//! to a consensus node ([`node`]).
//!
//! Field numbers are those of the HAPI `.proto` files
//! (`transaction.proto`, `transaction_contents.proto`, `basic_types.proto`,
//! `crypto_transfer.proto`, `consensus_create_topic.proto`,
//! `consensus_submit_message.proto`, `transaction_response.proto`,
//! `timestamp.proto`, `duration.proto`) and the SDKs' `TransactionList`.
//! Only the fields used are declared: protobuf readers skip the rest. Why
//! not the Hiero Rust SDK: it brings gRPC, OpenSSL and a protobuf compiler
//! at build time to make these few messages; `prost` encodes them from
//! their declarations alone.

pub mod node;

use prost::Message;

use shared::entity::EntityId;

use crate::auth::signature::SigningKey;

/// `TransactionList` (the SDKs' `sdk/transaction_list.proto`): one
/// transaction per node the wallet may submit to.
#[derive(Clone, PartialEq, Message)]
pub struct TransactionList {
    #[prost(message, repeated, tag = "1")]
    pub transactions: Vec<Transaction>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Transaction {
    #[prost(bytes = "vec", tag = "5")]
    pub signed_transaction_bytes: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SignedTransaction {
    #[prost(bytes = "vec", tag = "1")]
    pub body_bytes: Vec<u8>,
    #[prost(message, optional, tag = "2")]
    pub sig_map: Option<SignatureMap>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SignatureMap {
    #[prost(message, repeated, tag = "1")]
    pub sig_pair: Vec<SignaturePair>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SignaturePair {
    #[prost(bytes = "vec", tag = "1")]
    pub pub_key_prefix: Vec<u8>,
    #[prost(bytes = "vec", tag = "3")]
    pub ed25519: Vec<u8>,
    #[prost(bytes = "vec", tag = "6")]
    pub ecdsa_secp256k1: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TransactionBody {
    #[prost(message, optional, tag = "1")]
    pub transaction_id: Option<TransactionId>,
    #[prost(message, optional, tag = "2")]
    pub node_account_id: Option<AccountId>,
    /// The most the payer agrees to pay in fees, in tinybars.
    #[prost(uint64, tag = "3")]
    pub transaction_fee: u64,
    #[prost(message, optional, tag = "4")]
    pub transaction_valid_duration: Option<Duration>,
    #[prost(string, tag = "6")]
    pub memo: String,
    #[prost(message, optional, tag = "14")]
    pub crypto_transfer: Option<CryptoTransfer>,
    #[prost(message, optional, tag = "24")]
    pub consensus_create_topic: Option<ConsensusCreateTopic>,
    #[prost(message, optional, tag = "27")]
    pub consensus_submit_message: Option<ConsensusSubmitMessage>,
}

/// A key: one ed25519 or ECDSA secp256k1 public key (raw, compressed).
#[derive(Clone, PartialEq, Message)]
pub struct Key {
    #[prost(bytes = "vec", tag = "2")]
    pub ed25519: Vec<u8>,
    #[prost(bytes = "vec", tag = "7")]
    pub ecdsa_secp256k1: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ConsensusCreateTopic {
    /// At most 100 bytes.
    #[prost(string, tag = "1")]
    pub memo: String,
    #[prost(message, optional, tag = "2")]
    pub admin_key: Option<Key>,
    #[prost(message, optional, tag = "3")]
    pub submit_key: Option<Key>,
    /// Between 6,999,999 and 8,000,001 seconds.
    #[prost(message, optional, tag = "6")]
    pub auto_renew_period: Option<Duration>,
}

#[derive(Clone, Copy, PartialEq, Message)]
pub struct TopicId {
    #[prost(int64, tag = "1")]
    pub shard_num: i64,
    #[prost(int64, tag = "2")]
    pub realm_num: i64,
    #[prost(int64, tag = "3")]
    pub topic_num: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct ConsensusSubmitMessage {
    #[prost(message, optional, tag = "1")]
    pub topic_id: Option<TopicId>,
    /// At most 1,024 bytes.
    #[prost(bytes = "vec", tag = "2")]
    pub message: Vec<u8>,
}

/// A node's answer to a submitted transaction: its precheck.
#[derive(Clone, Copy, PartialEq, Message)]
pub struct TransactionResponse {
    /// A `ResponseCodeEnum` value ([`status_name`]).
    #[prost(int32, tag = "1")]
    pub node_transaction_precheck_code: i32,
    #[prost(uint64, tag = "2")]
    pub cost: u64,
}

/// The `ResponseCodeEnum` values a consensus node's precheck gives that
/// the broker and the local network name (`response_code.proto`).
pub const STATUSES: &[(i32, &str)] = &[
    (0, "OK"),
    (1, "INVALID_TRANSACTION"),
    (2, "PAYER_ACCOUNT_NOT_FOUND"),
    (3, "INVALID_NODE_ACCOUNT"),
    (4, "TRANSACTION_EXPIRED"),
    (5, "INVALID_TRANSACTION_START"),
    (6, "INVALID_TRANSACTION_DURATION"),
    (7, "INVALID_SIGNATURE"),
    (8, "MEMO_TOO_LONG"),
    (9, "INSUFFICIENT_TX_FEE"),
    (10, "INSUFFICIENT_PAYER_BALANCE"),
    (11, "DUPLICATE_TRANSACTION"),
    (12, "BUSY"),
    (13, "NOT_SUPPORTED"),
    (22, "SUCCESS"),
    (27, "BAD_ENCODING"),
    (50, "INVALID_TRANSACTION_BODY"),
    (64, "TRANSACTION_OVERSIZE"),
    (81, "AUTORENEW_DURATION_NOT_IN_RANGE"),
    (150, "INVALID_TOPIC_ID"),
    (158, "INVALID_TOPIC_MESSAGE"),
    (214, "MESSAGE_SIZE_TOO_LARGE"),
];

/// The name of a `ResponseCodeEnum` value (`UNKNOWN_<n>` for others).
pub fn status_name(code: i32) -> String {
    STATUSES.iter().find(|(c, _)| *c == code).map_or_else(|| format!("UNKNOWN_{code}"), |(_, n)| n.to_string())
}

/// The value of a `ResponseCodeEnum` name.
pub fn status_code(name: &str) -> Option<i32> {
    STATUSES.iter().find(|(_, n)| *n == name).map(|(c, _)| *c)
}

impl From<EntityId> for TopicId {
    fn from(id: EntityId) -> TopicId {
        TopicId { shard_num: id.shard as i64, realm_num: id.realm as i64, topic_num: id.num as i64 }
    }
}

impl TopicId {
    pub fn entity(&self) -> Option<EntityId> {
        let part = |n: i64| u64::try_from(n).ok();
        Some(EntityId { shard: part(self.shard_num)?, realm: part(self.realm_num)?, num: part(self.topic_num)? })
    }
}

#[derive(Clone, PartialEq, Message)]
pub struct TransactionId {
    #[prost(message, optional, tag = "1")]
    pub transaction_valid_start: Option<Timestamp>,
    #[prost(message, optional, tag = "2")]
    pub account_id: Option<AccountId>,
}

#[derive(Clone, Copy, PartialEq, Message)]
pub struct AccountId {
    #[prost(int64, tag = "1")]
    pub shard_num: i64,
    #[prost(int64, tag = "2")]
    pub realm_num: i64,
    #[prost(int64, tag = "3")]
    pub account_num: i64,
}

#[derive(Clone, Copy, PartialEq, Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

#[derive(Clone, Copy, PartialEq, Message)]
pub struct Duration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct CryptoTransfer {
    #[prost(message, optional, tag = "1")]
    pub transfers: Option<TransferList>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TransferList {
    #[prost(message, repeated, tag = "1")]
    pub account_amounts: Vec<AccountAmount>,
}

#[derive(Clone, PartialEq, Message)]
pub struct AccountAmount {
    #[prost(message, optional, tag = "1")]
    pub account_id: Option<AccountId>,
    /// Tinybars: negative leaves the account.
    #[prost(sint64, tag = "2")]
    pub amount: i64,
}

impl From<EntityId> for AccountId {
    fn from(id: EntityId) -> AccountId {
        AccountId { shard_num: id.shard as i64, realm_num: id.realm as i64, account_num: id.num as i64 }
    }
}

impl AccountId {
    pub fn entity(&self) -> Option<EntityId> {
        let part = |n: i64| u64::try_from(n).ok();
        Some(EntityId { shard: part(self.shard_num)?, realm: part(self.realm_num)?, num: part(self.account_num)? })
    }
}

/// A transaction id: the payer and the start of the window in which the
/// network accepts the transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxId {
    pub payer: EntityId,
    pub seconds: i64,
    pub nanos: i32,
}

impl TxId {
    /// The SDKs' form, `0.0.1234@1700000000.000000042`.
    pub fn sdk(&self) -> String {
        format!("{}@{}.{:09}", self.payer, self.seconds, self.nanos)
    }

    /// Reads the SDKs' form back.
    pub fn parse_sdk(text: &str) -> Option<TxId> {
        let (payer, start) = text.split_once('@')?;
        let (seconds, nanos) = start.split_once('.')?;
        Some(TxId { payer: payer.parse().ok()?, seconds: seconds.parse().ok()?, nanos: nanos.parse().ok()? })
    }

    /// The mirror node's form, `0.0.1234-1700000000-000000042`.
    pub fn mirror(&self) -> String {
        format!("{}-{}-{:09}", self.payer, self.seconds, self.nanos)
    }
}

/// An HBAR transfer from `id.payer` to `to`, to be signed by the payer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub id: TxId,
    pub to: EntityId,
    pub tinybars: i64,
    pub max_fee: u64,
    pub valid_seconds: i64,
    pub memo: String,
}

impl Transfer {
    /// The body as one node receives it.
    pub fn body(&self, node: EntityId) -> TransactionBody {
        let leg = |account: EntityId, amount| AccountAmount { account_id: Some(account.into()), amount };
        TransactionBody {
            transaction_id: Some(TransactionId {
                transaction_valid_start: Some(Timestamp { seconds: self.id.seconds, nanos: self.id.nanos }),
                account_id: Some(self.id.payer.into()),
            }),
            node_account_id: Some(node.into()),
            transaction_fee: self.max_fee,
            transaction_valid_duration: Some(Duration { seconds: self.valid_seconds }),
            memo: self.memo.clone(),
            consensus_create_topic: None,
            consensus_submit_message: None,
            crypto_transfer: Some(CryptoTransfer {
                transfers: Some(TransferList {
                    account_amounts: vec![leg(self.id.payer, -self.tinybars), leg(self.to, self.tinybars)],
                }),
            }),
        }
    }

    /// The unsigned `TransactionList`, one entry per node, as bytes.
    pub fn to_bytes(&self, nodes: &[EntityId]) -> Vec<u8> {
        let transactions = nodes
            .iter()
            .map(|node| {
                let signed = SignedTransaction { body_bytes: self.body(*node).encode_to_vec(), sig_map: None };
                Transaction { signed_transaction_bytes: signed.encode_to_vec() }
            })
            .collect();
        TransactionList { transactions }.encode_to_vec()
    }
}

/// The key `key` signs with, as HAPI holds it.
pub fn key_of(key: &SigningKey) -> Key {
    let raw = key.public_key().raw();
    match key {
        SigningKey::Ed25519(_) => Key { ed25519: raw, ..Key::default() },
        SigningKey::Secp256k1(_) => Key { ecdsa_secp256k1: raw, ..Key::default() },
    }
}

/// `key`'s signature of `body_bytes`, its whole public key as the prefix.
pub fn signature_pair(key: &SigningKey, body_bytes: &[u8]) -> SignaturePair {
    let signature = key.sign(body_bytes).to_vec();
    let mut pair = SignaturePair { pub_key_prefix: key.public_key().raw(), ..SignaturePair::default() };
    match key {
        SigningKey::Ed25519(_) => pair.ed25519 = signature,
        SigningKey::Secp256k1(_) => pair.ecdsa_secp256k1 = signature,
    }
    pair
}

/// `body` signed by `key`: a transaction as a node takes it.
pub fn sign(body: &TransactionBody, key: &SigningKey) -> Transaction {
    let body_bytes = body.encode_to_vec();
    let pair = signature_pair(key, &body_bytes);
    let signed = SignedTransaction { body_bytes, sig_map: Some(SignatureMap { sig_pair: vec![pair] }) };
    Transaction { signed_transaction_bytes: signed.encode_to_vec() }
}

/// Opens one transaction as a node reads it (`Transaction.signedTransactionBytes`).
pub fn open_one(transaction: &Transaction) -> Result<Opened, prost::DecodeError> {
    let signed = SignedTransaction::decode(transaction.signed_transaction_bytes.as_slice())?;
    let body = TransactionBody::decode(signed.body_bytes.as_slice())?;
    let signatures = signed.sig_map.map(|m| m.sig_pair).unwrap_or_default();
    Ok(Opened { body_bytes: signed.body_bytes, body, signatures })
}

/// One transaction of a (signed) `TransactionList`, opened.
#[derive(Clone, Debug, PartialEq)]
pub struct Opened {
    pub body_bytes: Vec<u8>,
    pub body: TransactionBody,
    pub signatures: Vec<SignaturePair>,
}

/// Opens the transactions of `bytes`, as a network or a wallet reads them.
pub fn open(bytes: &[u8]) -> Result<Vec<Opened>, prost::DecodeError> {
    TransactionList::decode(bytes)?.transactions.iter().map(open_one).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> EntityId {
        text.parse().unwrap()
    }

    #[test]
    fn a_transfer_opens_to_what_was_built_once_per_node() {
        let transfer = Transfer {
            id: TxId { payer: id("0.0.1001"), seconds: 1_700_000_000, nanos: 42 },
            to: id("0.0.98765"),
            tinybars: 250_000_000,
            max_fee: 100_000_000,
            valid_seconds: 120,
            memo: "almanac credits".into(),
        };
        let nodes = [id("0.0.3"), id("0.0.4")];
        let opened = open(&transfer.to_bytes(&nodes)).unwrap();
        assert_eq!(opened.len(), 2);
        for (one, node) in opened.iter().zip(nodes) {
            assert_eq!(one.body, transfer.body(node));
            assert!(one.signatures.is_empty());
            let legs = &one.body.crypto_transfer.as_ref().unwrap().transfers.as_ref().unwrap().account_amounts;
            assert_eq!(legs.iter().map(|l| l.amount).sum::<i64>(), 0, "a transfer list balances");
        }
        assert_eq!(transfer.id.sdk(), "0.0.1001@1700000000.000000042");
        assert_eq!(TxId::parse_sdk(&transfer.id.sdk()), Some(transfer.id));
        assert_eq!(TxId::parse_sdk("0.0.1001-1700000000-000000042"), None);
        assert_eq!(transfer.id.mirror(), "0.0.1001-1700000000-000000042");
    }

    #[test]
    fn known_bytes_of_a_body() {
        // Hand-encoded per the .proto field numbers: memo (6) "m", fee (3) 1.
        let body = TransactionBody { transaction_fee: 1, memo: "m".into(), ..Default::default() };
        assert_eq!(body.encode_to_vec(), vec![0x18, 0x01, 0x32, 0x01, b'm']);
        // sint64 is zigzag: -1 is 1, 1 is 2.
        let leg = AccountAmount { account_id: None, amount: -1 };
        assert_eq!(leg.encode_to_vec(), vec![0x10, 0x01]);
    }
}
