//! A real EVM node on loopback (anvil, from the npm registry, pinned in
//! `evm/package-lock.json`) with the Programmable Secrets contracts of
//! `evm/contracts/` deployed: what the tests and `make run` publish,
//! purchase and unlock against.
//!
//! The contracts are compiled by `make evm` (solc from the npm registry)
//! into one JSON file of ABIs and bytecode; `ALMANAC_ANVIL` and
//! `ALMANAC_CONTRACTS`, exported by the Makefile, say where the node and
//! that file are. Transactions are sent from anvil's unlocked development
//! accounts (`eth_sendTransaction`), and the buyer's challenge is signed
//! by the node (`personal_sign`): an implementation of EIP-191 other
//! than the broker's.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use alloy_sol_types::{SolCall, SolValue};
use anyhow::{bail, Context, Result};
use programmable_secrets::contracts::{AccessReceipt, OwnerArgument, PaymentModuleArguments, PolicyVault};
use programmable_secrets::deployment::{BuiltIns, Deployment};
use programmable_secrets::{Address, Bytes, B256, U256};
use serde_json::{json, Value};

/// The chain id anvil runs with.
pub const CHAIN_ID: u64 = 31337;

/// Where `make evm` put anvil.
pub fn anvil_binary() -> PathBuf {
    let path = std::env::var_os("ALMANAC_ANVIL")
        .map(PathBuf::from)
        .expect("ALMANAC_ANVIL is not set: run through `make test` (its `evm` step fetches anvil)");
    assert!(path.exists(), "{} is missing: run `make evm`", path.display());
    path
}

/// The contracts `make evm` compiled: name to `{abi, bytecode}`, read
/// once per process.
pub fn compiled() -> &'static Value {
    static COMPILED: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    COMPILED.get_or_init(|| {
        let path = std::env::var_os("ALMANAC_CONTRACTS")
            .map(PathBuf::from)
            .expect("ALMANAC_CONTRACTS is not set: run through `make test` (its `evm` step compiles the contracts)");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}: run `make evm`", path.display()));
        serde_json::from_str::<Value>(&text).expect("the compiled contracts")["contracts"].clone()
    })
}

/// A running anvil, stopped on drop.
pub struct Anvil {
    child: Child,
    pub url: String,
}

/// How an anvil starts.
pub struct AnvilOptions<'a> {
    /// `127.0.0.1:0` for any free port.
    pub bind: &'a str,
    /// A file the chain is kept in between runs (`--state`).
    pub state: Option<&'a Path>,
}

impl Anvil {
    /// Starts anvil on a free loopback port.
    pub fn start() -> Result<Anvil> {
        Anvil::start_with(&anvil_binary(), AnvilOptions { bind: "127.0.0.1:0", state: None })
    }

    pub fn start_with(binary: &Path, options: AnvilOptions<'_>) -> Result<Anvil> {
        let (host, port) = options.bind.rsplit_once(':').context("--bind is host:port")?;
        let mut command = Command::new(binary);
        command.args(["--host", host, "--port", port, "--chain-id", &CHAIN_ID.to_string()]);
        if let Some(state) = options.state {
            command.arg("--state").arg(state).args(["--state-interval", "5"]);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdout = child.stdout.take().expect("piped");
        let mut lines = BufReader::new(stdout).lines();
        let address = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(address) = line.strip_prefix("Listening on ") {
                        break address.trim().to_string();
                    }
                }
                _ => {
                    let _ = child.kill();
                    bail!("anvil ended before it listened");
                }
            }
        };
        // Drain what it prints after, so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.by_ref() {});
        Ok(Anvil { child, url: format!("http://{address}") })
    }
}

impl Anvil {
    /// Stops anvil as an interrupt does, so that it writes its state, and
    /// waits for it to end.
    pub fn stop(mut self) {
        // SAFETY: kill(2) on the pid of a child this value still owns.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A transaction's receipt, as far as the tests read it.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub hash: String,
    pub block_number: u64,
    pub block_hash: String,
    pub logs: Vec<Value>,
}

/// JSON-RPC to a node.
#[derive(Clone)]
pub struct Chain {
    client: reqwest::Client,
    pub url: String,
}

impl Chain {
    pub fn new(url: &str) -> Chain {
        Chain { client: crate::unpooled_client(), url: url.to_string() }
    }

    /// One call; a JSON-RPC error is an `Err` with its message (a revert
    /// included).
    pub async fn rpc(&self, method: &str, params: Value) -> Result<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let answer: Value = self.client.post(&self.url).json(&body).send().await?.json().await?;
        if let Some(error) = answer.get("error") {
            bail!("{method}: {error}");
        }
        Ok(answer["result"].clone())
    }

    pub async fn accounts(&self) -> Result<Vec<Address>> {
        let accounts = self.rpc("eth_accounts", json!([])).await?;
        Ok(serde_json::from_value(accounts)?)
    }

    pub async fn block_number(&self) -> Result<u64> {
        hex_u64(&self.rpc("eth_blockNumber", json!([])).await?)
    }

    /// Sends a transaction from an unlocked account and waits for its
    /// receipt (anvil mines each at once); a reverted one is an `Err`.
    pub async fn send(&self, from: Address, to: Option<Address>, data: Vec<u8>, value: U256) -> Result<Receipt> {
        let mut transaction = json!({"from": from, "data": Bytes::from(data), "value": value});
        if let Some(to) = to {
            transaction["to"] = json!(to);
        }
        let hash = self.rpc("eth_sendTransaction", json!([transaction.clone()])).await?;
        let receipt = self.receipt(&hash).await?;
        if receipt["status"] != json!("0x1") {
            // The same call again, for the revert's reason.
            let number = receipt["blockNumber"].as_str().map(|n| n.to_string()).unwrap_or_default();
            let block = format!("{:#x}", hex_u64(&json!(number)).unwrap_or(1).saturating_sub(1));
            let reason = self.rpc("eth_call", json!([transaction, block])).await.err().map(|e| e.to_string());
            bail!("transaction {hash} reverted: {}", reason.unwrap_or_default());
        }
        Ok(Receipt {
            hash: hash.as_str().unwrap_or_default().to_string(),
            block_number: hex_u64(&receipt["blockNumber"])?,
            block_hash: receipt["blockHash"].as_str().unwrap_or_default().to_string(),
            logs: receipt["logs"].as_array().cloned().unwrap_or_default(),
        })
    }

    /// The receipt of a sent transaction, once the node has mined it (anvil
    /// mines as it receives, but answers the receipt a moment later).
    async fn receipt(&self, hash: &Value) -> Result<Value> {
        for _ in 0..400 {
            let receipt = self.rpc("eth_getTransactionReceipt", json!([hash])).await?;
            if !receipt.is_null() {
                return Ok(receipt);
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        bail!("transaction {hash} was not mined")
    }

    /// Calls `call` on `to` from `from`.
    pub async fn transact<C: SolCall>(&self, from: Address, to: Address, call: C, value: U256) -> Result<Receipt> {
        self.send(from, Some(to), call.abi_encode(), value).await
    }

    /// A view call's decoded answer.
    pub async fn view<C: SolCall>(&self, to: Address, call: C) -> Result<C::Return> {
        let data = Bytes::from(call.abi_encode());
        let answer = self.rpc("eth_call", json!([{"to": to, "data": data}, "latest"])).await?;
        let bytes: Bytes = serde_json::from_value(answer)?;
        Ok(C::abi_decode_returns(&bytes)?)
    }

    /// Deploys the compiled contract `name` with ABI-encoded constructor
    /// arguments.
    pub async fn deploy(&self, from: Address, name: &str, arguments: Vec<u8>) -> Result<(Address, Receipt)> {
        let compiled = compiled();
        let bytecode: Bytes = serde_json::from_value(compiled[name]["bytecode"].clone())
            .with_context(|| format!("{name} is not compiled"))?;
        let mut code = bytecode.to_vec();
        code.extend(arguments);
        let receipt = self.send(from, None, code, U256::ZERO).await?;
        let answer = self.receipt(&json!(receipt.hash)).await?;
        let address: Address = serde_json::from_value(answer["contractAddress"].clone())?;
        Ok((address, receipt))
    }

    /// `personal_sign` by an unlocked account: the node's EIP-191 signature.
    pub async fn personal_sign(&self, signer: Address, message: &str) -> Result<String> {
        let data = Bytes::copy_from_slice(message.as_bytes());
        let signature = self.rpc("personal_sign", json!([data, signer])).await?;
        Ok(signature.as_str().context("a signature")?.to_string())
    }

    /// The node's state now, to go back to with [`Chain::revert`].
    pub async fn snapshot(&self) -> Result<String> {
        Ok(self.rpc("evm_snapshot", json!([])).await?.as_str().context("a snapshot id")?.to_string())
    }

    pub async fn revert(&self, snapshot: &str) -> Result<()> {
        let reverted = self.rpc("evm_revert", json!([snapshot])).await?;
        if reverted != json!(true) {
            bail!("evm_revert {snapshot} answered {reverted}");
        }
        Ok(())
    }

    /// Mines `blocks` empty blocks.
    pub async fn mine(&self, blocks: u64) -> Result<()> {
        self.rpc("anvil_mine", json!([format!("{blocks:#x}")])).await.map(|_| ())
    }

    /// Sets the next block's timestamp (seconds).
    pub async fn set_next_timestamp(&self, unix: u64) -> Result<()> {
        self.rpc("evm_setNextBlockTimestamp", json!([unix])).await.map(|_| ())
    }

    /// The `topic[1]` of the first log of `receipt` with `topic0`: how a
    /// wallet reads the id an event announces.
    pub fn first_topic(receipt: &Receipt, topic0: B256) -> Option<U256> {
        receipt
            .logs
            .iter()
            .find(|log| log["topics"][0] == json!(topic0))
            .and_then(|log| serde_json::from_value::<B256>(log["topics"][1].clone()).ok())
            .map(|t| U256::from_be_bytes(t.0))
    }
}

fn hex_u64(value: &Value) -> Result<u64> {
    let text = value.as_str().context("a hex quantity")?;
    Ok(u64::from_str_radix(text.trim_start_matches("0x"), 16)?)
}

/// Deploys the protocol from `owner` (anvil's first account): the vault,
/// the receipt, the payment module, the three built-in evaluators
/// (registered by the owner with the protocol's metadata hashes) and an
/// ERC-8004 identity registry. Returns the deployment as a manifest reads
/// it, its JSON-RPC URL `chain.url`.
pub async fn deploy_protocol(chain: &Chain, network: &str) -> Result<Deployment> {
    let owner = chain.accounts().await?[0];
    let first_block = chain.block_number().await? + 1;
    let as_owner = OwnerArgument { initialOwner: owner }.abi_encode_params();
    let (vault, _) = chain.deploy(owner, "PolicyVault", as_owner.clone()).await?;
    let (receipt, _) = chain.deploy(owner, "AccessReceipt", as_owner).await?;
    let arguments = PaymentModuleArguments { initialOwner: owner, policyVault: vault, accessReceipt: receipt };
    let (payment, _) = chain.deploy(owner, "PaymentModule", arguments.abi_encode_params()).await?;
    chain
        .transact(owner, receipt, AccessReceipt::setPaymentModuleCall { newPaymentModule: payment }, U256::ZERO)
        .await?;
    let mut builtins = Vec::new();
    for (name, label) in [
        ("TimeRangeCondition", "builtin:time-range"),
        ("UaidOwnershipCondition", "builtin:uaid-ownership"),
        ("AddressAllowlistCondition", "builtin:address-allowlist"),
    ] {
        let (evaluator, _) = chain.deploy(owner, name, Vec::new()).await?;
        let metadata = programmable_secrets::hashes::keccak(label.as_bytes());
        let register = PolicyVault::registerBuiltInEvaluatorCall { evaluator, metadataHash: metadata };
        chain.transact(owner, vault, register, U256::ZERO).await?;
        builtins.push(evaluator);
    }
    let (registry, _) = chain.deploy(owner, "AgentIdentityRegistry", Vec::new()).await?;
    Ok(Deployment {
        chain_id: CHAIN_ID,
        network: network.to_string(),
        rpc_url: chain.url.clone(),
        deployed_at_block: first_block,
        policy_vault: vault,
        payment_module: payment,
        access_receipt: receipt,
        builtins: BuiltIns { time_range: builtins[0], uaid_ownership: builtins[1], address_allowlist: builtins[2] },
        identity_registry: Some(registry),
    })
}
