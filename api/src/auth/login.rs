//! `api login`: signs in as a client would (challenge, sign, verify) with
//! a key from a keys file, the checked-in dev keys by default, and prints
//! the issued API key. It shows the flow with no network and no wallet.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

use super::signature::SigningKey;

/// The dev accounts' private keys, published on purpose.
pub const DEV_KEYS: &str = include_str!("../../../datasets/live/dev-keys.json");

#[derive(clap::Args, Debug, Clone)]
pub struct LoginArgs {
    /// The api's base URL.
    #[arg(long, default_value = "http://127.0.0.1:4000")]
    pub base: String,
    /// The account to sign in as.
    #[arg(long, default_value = "0.0.1001")]
    pub account: String,
    /// Its network.
    #[arg(long, default_value = "testnet")]
    pub network: String,
    /// A keys file (as datasets/live/dev-keys.json, the default).
    #[arg(long)]
    pub keys: Option<std::path::PathBuf>,
}

#[derive(Deserialize)]
struct KeysFile {
    keys: BTreeMap<String, KeyEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeyEntry {
    private_key: String,
}

/// The signing key of `account` in a keys file's text.
pub fn key_for(text: &str, account: &str) -> Result<SigningKey> {
    let file: KeysFile = serde_json::from_str(text).context("the keys file")?;
    let entry = file.keys.get(account).with_context(|| format!("the keys file has no key for {account}"))?;
    SigningKey::from_der_hex(&entry.private_key).with_context(|| format!("the key of {account}"))
}

/// The key `args` names: its account's in its keys file.
pub fn key(args: &LoginArgs) -> Result<SigningKey> {
    match &args.keys {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            key_for(&text, &args.account)
        }
        None => key_for(DEV_KEYS, &args.account),
    }
}

/// Challenge, sign with `key`, verify, with `client`; returns the verify
/// answer.
pub async fn login(client: &reqwest::Client, args: &LoginArgs, key: &SigningKey) -> Result<Value> {
    let base = args.base.trim_end_matches('/');
    let post = |path: &str, body: Value| {
        let request = client.post(format!("{base}/api/v1/auth/ledger/{path}")).json(&body);
        async move {
            let response = request.send().await.context("calling the api")?;
            let status = response.status();
            let body: Value = response.json().await.context("reading the answer")?;
            if !status.is_success() {
                bail!("{status}: {body}");
            }
            Ok(body)
        }
    };
    let challenge = post("challenge", json!({"accountId": args.account, "network": args.network})).await?;
    let message = challenge["message"].as_str().context("the challenge has no message")?;
    let signature = base64::engine::general_purpose::STANDARD.encode(key.sign(message.as_bytes()));
    post(
        "verify",
        json!({
            "challengeId": challenge["challengeId"],
            "accountId": args.account,
            "network": args.network,
            "signature": signature,
            "signatureKind": "raw",
            "publicKey": key.public_key().to_der_hex(),
        }),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::super::ledger::{KeySource, Network, DEV_ACCOUNTS};
    use super::*;

    #[test]
    fn every_dev_key_signs_for_its_dev_account() {
        let KeySource::Accounts(accounts) =
            KeySource::accounts(DEV_ACCOUNTS, &Network::Hedera("testnet".into())).unwrap()
        else {
            panic!("an accounts source")
        };
        for (account, entry) in &accounts {
            let key = key_for(DEV_KEYS, account).unwrap();
            assert_eq!(key.public_key(), entry.key, "{account}");
            assert!(entry.key.verifies(b"hello", &key.sign(b"hello")), "{account}");
            assert!(!entry.key.verifies(b"hello!", &key.sign(b"hello")), "{account}");
        }
    }
}
