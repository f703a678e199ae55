//! What the broker reads of a mirror node's REST API about its own
//! business: the transactions of an id (`GET /api/v1/transactions/{id}`),
//! which the payments watcher judges a transfer by and an inscription
//! waits on.

use anyhow::Context as _;
use serde::Deserialize;

/// The transactions of one id, as the mirror node lists them.
#[derive(Debug, Deserialize)]
pub struct Listed {
    pub transactions: Vec<Transaction>,
}

/// One of them: the fields the broker reads.
#[derive(Debug, Deserialize)]
pub struct Transaction {
    /// Its kind (`CRYPTOTRANSFER`, `CONSENSUSSUBMITMESSAGE`).
    pub name: String,
    pub result: String,
    #[serde(default)]
    pub scheduled: bool,
    #[serde(default)]
    pub nonce: i64,
    #[serde(default)]
    pub transfers: Vec<Transfer>,
    /// The entity it created (a topic), if any.
    #[serde(default)]
    pub entity_id: Option<String>,
    /// When it reached consensus (`seconds.nanoseconds`): a message's key
    /// on its topic's list.
    #[serde(default)]
    pub consensus_timestamp: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Transfer {
    pub account: String,
    pub amount: i64,
}

impl Listed {
    /// The transaction its payer sent: not a scheduled one, nor a child
    /// of it.
    pub fn own(&self) -> Option<&Transaction> {
        self.transactions.iter().find(|t| t.nonce == 0 && !t.scheduled)
    }
}

/// The transactions of `id` (the mirror node's form,
/// `0.0.1234-1700000000-000000042`) at the mirror node at `base`, once
/// they reached consensus (`None`: not shown yet).
pub async fn transactions(client: &reqwest::Client, base: &str, id: &str) -> anyhow::Result<Option<Listed>> {
    let url = format!("{base}/api/v1/transactions/{id}");
    let response = client.get(&url).send().await.context("the mirror node")?;
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !response.status().is_success() {
        anyhow::bail!("the mirror node answered {} for {url}", response.status());
    }
    Ok(Some(response.json().await.context("the mirror node's transaction")?))
}
