//! Ledger sign-in (`broker-live.md` section 4): a single-use challenge,
//! signed by the account's key, exchanged for an API key.
//!
//! The account's key comes from a [`KeySource`]: a mirror node
//! (`GET {mirror}/api/v1/accounts/{id}`, `key._type` and `key.key`), or an
//! accounts file (the checked-in dev accounts when no mirror is
//! configured). EVM accounts (`eip155:<chainId>`) need no source: the
//! signer's address is recovered from the signature.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use serde::Deserialize;
use shared::entity::EntityId;
use warp::http::StatusCode;

use super::signature::{self, decode_hex, PublicKey};
use crate::reply::Error;
use shared::http::hex;

/// A ledger network as the client names it, with its canonical form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Network {
    /// `mainnet`, `testnet`, `previewnet`.
    Hedera(String),
    /// `eip155:<chainId>`.
    Evm(u64),
}

impl Network {
    /// Reads `mainnet`, `hedera:testnet`, `hedera-testnet`,
    /// `hedera_testnet`, `eip155:84532`.
    pub fn parse(text: &str) -> Option<Network> {
        let text = text.trim().to_ascii_lowercase();
        if let Some(chain) = text.strip_prefix("eip155:") {
            return chain
                .parse()
                .ok()
                .filter(|c| *c > 0 && chain.bytes().all(|b| b.is_ascii_digit()))
                .map(Network::Evm);
        }
        let bare = ["hedera:", "hedera-", "hedera_"].iter().find_map(|p| text.strip_prefix(p)).unwrap_or(&text);
        matches!(bare, "mainnet" | "testnet" | "previewnet").then(|| Network::Hedera(bare.to_string()))
    }

    /// What the client sends: Hedera bare, EVM as CAIP-2.
    pub fn wire(&self) -> String {
        match self {
            Network::Hedera(name) => name.clone(),
            Network::Evm(chain) => format!("eip155:{chain}"),
        }
    }

    /// CAIP-2 style: `hedera:testnet`, `eip155:84532`.
    pub fn canonical(&self) -> String {
        match self {
            Network::Hedera(name) => format!("hedera:{name}"),
            Network::Evm(chain) => format!("eip155:{chain}"),
        }
    }
}

/// An account id in its canonical spelling for `network`: `0.0.N` for
/// Hedera (a checksum suffix dropped), a lower-case `0x` address for EVM.
pub fn account(network: &Network, text: &str) -> Option<String> {
    let text = text.trim();
    match network {
        Network::Hedera(_) => text.parse::<EntityId>().ok().map(|id| id.to_string()),
        Network::Evm(_) => {
            let hex = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"))?;
            (hex.len() == 40 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| format!("0x{}", hex.to_ascii_lowercase()))
        }
    }
}

/// Where Hedera account keys come from.
pub enum KeySource {
    /// A mirror node of the deployment's network.
    Mirror { client: reqwest::Client, base: String },
    /// A fixed list (the dev accounts), with credits granted at first
    /// sign-in.
    Accounts(BTreeMap<String, Account>),
}

/// An entry of an accounts file.
#[derive(Clone, Debug)]
pub struct Account {
    pub key: PublicKey,
    /// Credits granted once, at the first sign-in.
    pub credits: i64,
}

/// An accounts file: `{"network", "accounts": {"0.0.N": {"_type", "key",
/// "credits"?}}}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AccountsFile {
    network: String,
    accounts: BTreeMap<String, AccountEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AccountEntry {
    #[serde(rename = "_type")]
    kind: String,
    key: String,
    #[serde(default)]
    credits: i64,
}

/// The dev accounts checked in beside the datasets.
pub const DEV_ACCOUNTS: &str = include_str!("../../../datasets/live/dev-accounts.json");

impl KeySource {
    /// Reads an accounts file's text; its network must be `network`.
    pub fn accounts(text: &str, network: &Network) -> Result<KeySource> {
        let file: AccountsFile = serde_json::from_str(text).context("the accounts file")?;
        if Network::parse(&file.network).as_ref() != Some(network) {
            bail!("the accounts file is for {:?}, the api for {}", file.network, network.wire());
        }
        let mut accounts = BTreeMap::new();
        for (id, entry) in file.accounts {
            let canonical = account(network, &id).with_context(|| format!("account {id:?} is not an account id"))?;
            let key = PublicKey::from_raw(&entry.kind, &entry.key).with_context(|| format!("account {id}"))?;
            accounts.insert(canonical, Account { key, credits: entry.credits.max(0) });
        }
        Ok(KeySource::Accounts(accounts))
    }

    pub fn mirror(base: &str, timeout: Duration) -> Result<KeySource> {
        let client = http_client::builder().timeout(timeout).build().context("the mirror node client")?;
        Ok(KeySource::Mirror { client, base: base.trim_end_matches('/').to_string() })
    }

    /// The account's key and its first sign-in grant; `None` when the
    /// account does not exist.
    pub async fn key(&self, account: &str) -> Result<Option<Account>, Error> {
        match self {
            KeySource::Accounts(accounts) => Ok(accounts.get(account).cloned()),
            KeySource::Mirror { client, base } => {
                let unreachable = |detail: String| {
                    tracing::warn!(detail, "mirror node: account key lookup failed");
                    Error::new(
                        StatusCode::BAD_GATEWAY,
                        "key_source_failed",
                        "the mirror node did not answer; try again",
                    )
                };
                let url = format!("{base}/api/v1/accounts/{account}");
                let response = client.get(&url).send().await.map_err(|e| unreachable(e.to_string()))?;
                if response.status() == StatusCode::NOT_FOUND {
                    return Ok(None);
                }
                if !response.status().is_success() {
                    return Err(unreachable(format!("{url}: {}", response.status())));
                }
                #[derive(Deserialize)]
                struct MirrorAccount {
                    key: Option<MirrorKey>,
                }
                #[derive(Deserialize)]
                struct MirrorKey {
                    #[serde(rename = "_type")]
                    kind: String,
                    key: String,
                }
                let body: MirrorAccount = response.json().await.map_err(|e| unreachable(e.to_string()))?;
                let Some(key) = body.key else { return Ok(None) };
                match PublicKey::from_raw(&key.kind, &key.key) {
                    Ok(key) => Ok(Some(Account { key, credits: 0 })),
                    // A key list or threshold key cannot sign a challenge alone.
                    Err(_) => Err(Error::unauthorized(
                        "unsupported_account_key",
                        format!(
                            "the account's key is {}: only a single ED25519 or ECDSA_SECP256K1 key can sign in",
                            key.kind
                        ),
                    )),
                }
            }
        }
    }
}

/// A signature as the client sends it, checked against the challenge.
pub struct Proof<'a> {
    pub network: &'a Network,
    pub account: &'a str,
    pub signature: &'a str,
    pub kind: Option<&'a str>,
    pub public_key: Option<&'a str>,
}

/// Whether `proof` signs `message` for its account, the key fetched from
/// `keys` for Hedera. Returns the first sign-in grant.
pub async fn check(keys: &KeySource, proof: &Proof<'_>, message: &str) -> Result<i64, Error> {
    let refused = Error::unauthorized;
    match proof.network {
        Network::Evm(_) => {
            if proof.kind.is_some_and(|k| k != "evm") {
                return Err(bad_field("signatureKind", "an eip155 account signs with signatureKind \"evm\""));
            }
            let bytes = decode_hex(proof.signature)
                .filter(|b| b.len() == 65)
                .ok_or_else(|| bad_field("signature", "an EVM signature is 65 bytes of 0x hex"))?;
            let signer = signature::evm_signer(message.as_bytes(), &bytes)
                .ok_or_else(|| refused("signature_invalid", "the signature is not valid"))?;
            if format!("0x{}", hex(&signer)) != proof.account {
                return Err(refused("signature_invalid", "the signature was not made by the account"));
            }
            if let Some(public_key) = proof.public_key {
                let key = decode_hex(public_key)
                    .and_then(|b| k256::ecdsa::VerifyingKey::from_sec1_bytes(&b).ok())
                    .ok_or_else(|| bad_field("publicKey", "an EVM public key is a 0x04… secp256k1 point in hex"))?;
                if signature::evm_address(&key) != signer {
                    return Err(refused("public_key_mismatch", "publicKey is not the account's key"));
                }
            }
            Ok(0)
        }
        Network::Hedera(_) => {
            match proof.kind {
                None | Some("raw") => {}
                Some("map") => {
                    return Err(Error::new(
                        StatusCode::BAD_REQUEST,
                        "signature_kind_unsupported",
                        "signatureKind \"map\" is not supported: send the raw signature (signatureKind \"raw\")",
                    )
                    .naming("signatureKind"))
                }
                Some(_) => return Err(bad_field("signatureKind", "a Hedera account signs with signatureKind \"raw\"")),
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(proof.signature.trim())
                .ok()
                .filter(|b| b.len() == 64)
                .ok_or_else(|| bad_field("signature", "a Hedera signature is 64 bytes in base64"))?;
            let supplied = proof
                .public_key
                .map(|k| PublicKey::from_der_hex(k).map_err(|e| bad_field("publicKey", e.0)))
                .transpose()?;
            let account = keys
                .key(proof.account)
                .await?
                .ok_or_else(|| refused("account_not_found", "the ledger account does not exist"))?;
            if supplied.is_some_and(|k| k != account.key) {
                return Err(refused("public_key_mismatch", "publicKey is not the account's key"));
            }
            if !account.key.verifies(message.as_bytes(), &bytes) {
                return Err(refused("signature_invalid", "the signature is not the account's over the challenge"));
            }
            Ok(account.credits)
        }
    }
}

fn bad_field(field: &'static str, message: &str) -> Error {
    Error::invalid_body(format!("{field}: {message}")).naming(field)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_network(text: &str, expected: Option<(&str, &str)>) {
        let got = Network::parse(text).map(|n| (n.wire(), n.canonical()));
        let expected = expected.map(|(w, c)| (w.to_string(), c.to_string()));
        assert_eq!(got, expected, "{text}");
    }

    #[test]
    fn networks_are_read_in_every_spelling_the_client_may_send() {
        check_network("testnet", Some(("testnet", "hedera:testnet")));
        check_network("hedera:mainnet", Some(("mainnet", "hedera:mainnet")));
        check_network("hedera-testnet", Some(("testnet", "hedera:testnet")));
        check_network("Hedera_Previewnet", Some(("previewnet", "hedera:previewnet")));
        check_network("eip155:84532", Some(("eip155:84532", "eip155:84532")));
        check_network("eip155:0", None);
        check_network("eip155:+1", None);
        check_network("eip155:", None);
        check_network("devnet", None);
        check_network("", None);
    }

    #[test]
    fn account_ids_take_their_network_s_canonical_form() {
        let hedera = Network::Hedera("testnet".into());
        let evm = Network::Evm(1);
        let cases: &[(&Network, &str, Option<&str>)] = &[
            (&hedera, "0.0.1001", Some("0.0.1001")),
            (&hedera, " 0.0.1001 ", Some("0.0.1001")),
            (&hedera, "0.0.x", None),
            (&hedera, "0xABCDEFabcdef0123456789012345678901234567", None),
            (&evm, "0xABCDEFabcdef0123456789012345678901234567", Some("0xabcdefabcdef0123456789012345678901234567")),
            (&evm, "0xabc", None),
            (&evm, "0.0.1001", None),
        ];
        for (network, text, expected) in cases {
            assert_eq!(account(network, text).as_deref(), *expected, "{text}");
        }
    }

    #[test]
    fn the_checked_in_dev_accounts_are_read() {
        let KeySource::Accounts(accounts) =
            KeySource::accounts(DEV_ACCOUNTS, &Network::Hedera("testnet".into())).unwrap()
        else {
            panic!("an accounts source");
        };
        assert!(accounts.len() >= 2);
        assert!(KeySource::accounts(DEV_ACCOUNTS, &Network::Hedera("mainnet".into())).is_err());
    }
}
