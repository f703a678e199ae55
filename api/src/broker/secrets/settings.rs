//! The group's settings: its chains, the master key, the bounds, the
//! indexer's pace and the clock (what `App` holds; the handlers are in
//! the modules beside).

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use programmable_secrets::deployment::Deployment;
use programmable_secrets::envelope::MasterKeys;
use warp::http::StatusCode;

use super::rpc;
use crate::reply::Error;
use crate::store::secrets::Policy;

/// One chain the broker serves: its contracts, and its node.
pub struct Chain {
    pub deployment: Deployment,
    pub rpc: rpc::Rpc,
}

/// The time the group reads: the system's, moved by a test that needs a
/// nonce to expire (the production binary never moves it).
#[derive(Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    pub fn now_ms(&self) -> i64 {
        crate::store::now_ms() + self.offset_ms.load(Ordering::Acquire)
    }

    /// Moves the clock `by` forward.
    pub fn advance(&self, by: Duration) {
        self.offset_ms.fetch_add(by.as_millis() as i64, Ordering::AcqRel);
    }
}

/// The indexer's settings.
#[derive(Clone, Debug)]
pub struct IndexSettings {
    /// How often it looks for new blocks.
    pub every: Duration,
    /// The most blocks one `eth_getLogs` asks for.
    pub block_range: u64,
    /// Checkpoints kept per chain: the deepest reorganisation it can undo.
    pub depth: usize,
    /// The longest wait between tries while a node is unreachable.
    pub backoff_max: Duration,
}

/// The group's settings.
pub struct Settings {
    /// At least one; the first is the default when a request names none.
    pub chains: Vec<Chain>,
    /// None: key release is off (`krsConfigured: false`).
    pub master: Option<MasterKeys>,
    /// Where ciphertexts are kept, content-addressed.
    pub ciphertexts: PathBuf,
    pub max_ciphertext_bytes: usize,
    pub nonce_ttl: Duration,
    /// How long a request whose nonce expired unused is kept (a later
    /// request for it is then 404, not 410).
    pub request_retention: Duration,
    pub index: IndexSettings,
    pub clock: Clock,
}

impl Settings {
    /// The chain `chain_id` names, or the default.
    pub fn chain(&self, chain_id: Option<u64>) -> Result<&Chain, Error> {
        match chain_id {
            None => Ok(&self.chains[0]),
            Some(id) => self.chains.iter().find(|c| c.deployment.chain_id == id).ok_or_else(|| {
                Error::new(
                    StatusCode::BAD_REQUEST,
                    "unknown_chain",
                    format!("chainId {id} is not a chain this broker serves"),
                )
                .naming("chainId")
            }),
        }
    }

    pub fn chain_of(&self, policy: &Policy) -> Option<&Chain> {
        self.chains.iter().find(|c| c.deployment.chain_id == policy.chain_id)
    }
}
