//! JSON-RPC to a chain's node: the operator's endpoint from the
//! deployments file, called through the egress gate as a configured
//! destination (`Trust::Configured`: its origin as configured, a redirect
//! elsewhere judged), each answer read within `--secrets-rpc-max-bytes`
//! and the gate's deadlines. Calls are encoded and decoded with the
//! contracts' interface (`programmable_secrets::contracts`); the few
//! answer shapes read here (a receipt, a log, a block header) are typed
//! below with alloy's primitive types.

use std::sync::Arc;

use alloy_sol_types::SolCall;
use programmable_secrets::{Address, Bytes, B256, U256};
use serde::Deserialize;
use serde_json::{json, Value};
use warp::http::Method;

use crate::egress::{Gate, Trust};

/// Why a call to the node did not answer what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// Not reached, or not in time: worth trying again later.
    #[error("the chain's node cannot be reached: {0}")]
    Unreachable(String),
    /// It answered a JSON-RPC error (a call that reverted among them).
    #[error("the chain's node refused {method}: {message}")]
    Refused { method: &'static str, message: String },
    /// It answered something that is not JSON-RPC, or not the shape asked.
    #[error("the chain's node answered {method} with something unreadable: {problem}")]
    Garbage { method: &'static str, problem: String },
}

/// A chain's JSON-RPC endpoint.
#[derive(Clone)]
pub struct Rpc {
    gate: Arc<Gate>,
    url: String,
    max_bytes: usize,
}

/// A transaction's receipt.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransactionReceipt {
    pub transaction_hash: B256,
    pub block_number: U256,
    pub block_hash: B256,
    pub status: Option<U256>,
    pub logs: Vec<Log>,
}

/// A log, as `eth_getLogs` and receipts carry it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Log {
    pub address: Address,
    pub topics: Vec<B256>,
    pub data: Bytes,
    pub block_number: U256,
    pub block_hash: B256,
    pub transaction_hash: B256,
    pub log_index: U256,
    #[serde(default)]
    pub removed: bool,
}

/// A block's header, as far as the indexer reads it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    pub number: U256,
    pub hash: B256,
    pub timestamp: U256,
}

impl Rpc {
    pub fn new(gate: Arc<Gate>, url: &str, max_bytes: usize) -> Rpc {
        Rpc { gate, url: url.to_string(), max_bytes }
    }

    async fn call(&self, method: &'static str, params: Value) -> Result<Value, RpcError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let response = self
            .gate
            .call(Method::POST, &self.url, Trust::Configured)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| RpcError::Unreachable(e.to_string()))?;
        let garbage = |problem: String| RpcError::Garbage { method, problem };
        let bytes = crate::chat::turn::read_bounded(response, self.max_bytes)
            .await
            .map_err(|failure| RpcError::Unreachable(failure.message().to_string()))?;
        let mut answer: Value = serde_json::from_slice(&bytes).map_err(|_| garbage("not JSON".into()))?;
        if let Some(error) = answer.get("error") {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("an error").to_string();
            return Err(RpcError::Refused { method, message: crate::reply::excerpt(&message).into_owned() });
        }
        match answer.get_mut("result") {
            Some(result) => Ok(result.take()),
            None => Err(garbage("no result".into())),
        }
    }

    fn read<T: for<'de> Deserialize<'de>>(method: &'static str, value: Value) -> Result<T, RpcError> {
        serde_json::from_value(value).map_err(|e| RpcError::Garbage { method, problem: e.to_string() })
    }

    /// A view call's decoded answer at the latest block.
    pub async fn view<C: SolCall>(&self, to: Address, call: &C) -> Result<C::Return, RpcError> {
        let data = Bytes::from(call.abi_encode());
        let answer = self.call("eth_call", json!([{"to": to, "data": data}, "latest"])).await?;
        let bytes: Bytes = Rpc::read("eth_call", answer)?;
        C::abi_decode_returns(&bytes).map_err(|e| RpcError::Garbage { method: "eth_call", problem: e.to_string() })
    }

    pub async fn receipt(&self, hash: &B256) -> Result<Option<TransactionReceipt>, RpcError> {
        let answer = self.call("eth_getTransactionReceipt", json!([hash])).await?;
        Rpc::read("eth_getTransactionReceipt", answer)
    }

    pub async fn block_number(&self) -> Result<u64, RpcError> {
        let number: U256 = Rpc::read("eth_blockNumber", self.call("eth_blockNumber", json!([])).await?)?;
        Ok(number.saturating_to())
    }

    pub async fn header(&self, number: u64) -> Result<Option<Header>, RpcError> {
        let answer = self.call("eth_getBlockByNumber", json!([format!("{number:#x}"), false])).await?;
        Rpc::read("eth_getBlockByNumber", answer)
    }

    /// The logs of `addresses` in blocks `from..=to`.
    pub async fn logs(&self, addresses: &[Address], from: u64, to: u64) -> Result<Vec<Log>, RpcError> {
        let filter = json!({"address": addresses, "fromBlock": format!("{from:#x}"), "toBlock": format!("{to:#x}")});
        Rpc::read("eth_getLogs", self.call("eth_getLogs", json!([filter])).await?)
    }
}
