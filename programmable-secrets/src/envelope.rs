//! The content key's two envelopes.
//!
//! **At rest**, under the operator's master key: AES-256-GCM with a
//! random 12-byte IV and associated data that names what the key belongs
//! to (`stage:<chainId>:<ciphertextHash>:<providerUaidHash>` while staged,
//! `policy:<policyId>:<chainId>:<ciphertextHash>` once on chain), so a
//! wrapped key copied onto another policy's row does not open. Master
//! keys are versioned: the newest wraps, any listed unwraps, so an
//! operator rotates by adding a version and rewrapping.
//!
//! **To a buyer**, RSA-OAEP with SHA-256 (and MGF1-SHA-256) to the
//! buyer's per-request public key of 3,072 to 8,192 bits, fingerprinted
//! as SHA-256 of its SPKI DER. The broker holds the key only long enough
//! to re-encrypt it and never sees the content's plaintext.

use std::fmt;

use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use rsa::pkcs8::DecodePublicKey;
use rsa::traits::PublicKeyParts;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A content key: 32 bytes for AES-256-GCM.
pub type ContentKey = [u8; 32];

/// One version of the master key. Its bytes never reach a log: `Debug`
/// shows the version only.
#[derive(Clone)]
pub struct MasterKey {
    pub version: u32,
    key: [u8; 32],
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MasterKey {{ version: {}, .. }}", self.version)
    }
}

/// The master keys the operator configured.
#[derive(Clone, Debug)]
pub struct MasterKeys {
    /// Newest first: the first wraps.
    keys: Vec<MasterKey>,
}

/// Why the master key text was refused (it names no key material).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MasterKeyError {
    #[error("no master key is given")]
    Empty,
    #[error("line {0}: a version is a positive integer before `:`")]
    Version(usize),
    #[error("line {0}: the key is neither 64 hex digits nor base64")]
    Encoding(usize),
    #[error("line {0}: the key decodes to fewer than 16 bytes")]
    Short(usize),
    #[error("version {0} is given twice")]
    Repeated(u32),
}

impl MasterKeys {
    /// Reads the master keys: one per line as `<version>:<key>`, or a
    /// single bare key (version 1). A key is 64 hex digits or base64; one
    /// that does not decode to 32 bytes is hashed to 32 with SHA-256 (as
    /// the protocol's reference service reads its key).
    pub fn parse(text: &str) -> Result<MasterKeys, MasterKeyError> {
        let lines: Vec<(usize, &str)> =
            text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty()).collect();
        let mut keys = Vec::new();
        for &(number, line) in &lines {
            let (version, encoded) = match line.split_once(':') {
                Some((version, key)) => (
                    version.trim().parse::<u32>().ok().filter(|v| *v > 0).ok_or(MasterKeyError::Version(number))?,
                    key.trim(),
                ),
                None if lines.len() == 1 => (1, line),
                None => return Err(MasterKeyError::Version(number)),
            };
            let decoded = decode_key(encoded).ok_or(MasterKeyError::Encoding(number))?;
            if decoded.len() < 16 {
                return Err(MasterKeyError::Short(number));
            }
            let key: [u8; 32] = match <[u8; 32]>::try_from(decoded.as_slice()) {
                Ok(key) => key,
                Err(_) => Sha256::digest(&decoded).into(),
            };
            if keys.iter().any(|k: &MasterKey| k.version == version) {
                return Err(MasterKeyError::Repeated(version));
            }
            keys.push(MasterKey { version, key });
        }
        if keys.is_empty() {
            return Err(MasterKeyError::Empty);
        }
        keys.sort_by_key(|k| std::cmp::Reverse(k.version));
        Ok(MasterKeys { keys })
    }

    /// The version new keys are wrapped with.
    pub fn current_version(&self) -> u32 {
        self.keys[0].version
    }

    /// Wraps `key` under the newest master key, bound to `aad`.
    pub fn wrap(&self, key: &ContentKey, aad: &str) -> WrappedKey {
        let master = &self.keys[0];
        let iv: [u8; 12] = random();
        let sealing = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &master.key).expect("a 32-byte key"));
        let mut sealed = key.to_vec();
        let tag = sealing
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(iv), Aad::from(aad.as_bytes()), &mut sealed)
            .expect("32 bytes seal");
        WrappedKey {
            ciphertext: B64.encode(&sealed),
            iv: B64.encode(iv),
            tag: B64.encode(tag.as_ref()),
            aad: aad.to_string(),
            version: 1,
            key_version: master.version,
        }
    }

    /// The content key inside `wrapped`, which must be bound to `aad`.
    pub fn unwrap(&self, wrapped: &WrappedKey, aad: &str) -> Result<ContentKey, UnwrapError> {
        if wrapped.aad != aad {
            return Err(UnwrapError::OtherPurpose);
        }
        let master = self
            .keys
            .iter()
            .find(|k| k.version == wrapped.key_version)
            .ok_or(UnwrapError::UnknownVersion(wrapped.key_version))?;
        let field = |text: &str| B64.decode(text).map_err(|_| UnwrapError::Malformed);
        let (mut sealed, iv, tag) = (field(&wrapped.ciphertext)?, field(&wrapped.iv)?, field(&wrapped.tag)?);
        let iv: [u8; 12] = iv.try_into().map_err(|_| UnwrapError::Malformed)?;
        if tag.len() != 16 {
            return Err(UnwrapError::Malformed);
        }
        sealed.extend_from_slice(&tag);
        let opening = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &master.key).expect("a 32-byte key"));
        let plain = opening
            .open_in_place(Nonce::assume_unique_for_key(iv), Aad::from(aad.as_bytes()), &mut sealed)
            .map_err(|_| UnwrapError::Forged)?;
        plain.try_into().map_err(|_| UnwrapError::Malformed)
    }
}

fn decode_key(text: &str) -> Option<Vec<u8>> {
    if text.len() == 64 {
        if let Ok(key) = alloy_primitives::hex::decode(text) {
            return Some(key);
        }
    }
    B64.decode(text).ok()
}

/// `N` bytes from the operating system's random source.
pub fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).expect("the system's random source");
    bytes
}

/// A content key wrapped at rest: its fields in base64 (the protocol's
/// payload, `version` 1), and the master key's version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WrappedKey {
    pub ciphertext: String,
    pub iv: String,
    pub tag: String,
    pub aad: String,
    pub version: u32,
    pub key_version: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnwrapError {
    #[error("the wrapped key is bound to another purpose")]
    OtherPurpose,
    #[error("master key version {0} is not configured")]
    UnknownVersion(u32),
    #[error("the wrapped key is malformed")]
    Malformed,
    #[error("the wrapped key does not open under its master key")]
    Forged,
}

/// The associated data of a staged key.
pub fn stage_aad(chain_id: u64, ciphertext_hash: &str, provider_uaid_hash: &str) -> String {
    format!("stage:{chain_id}:{ciphertext_hash}:{provider_uaid_hash}")
}

/// The associated data of a key whose policy is on chain.
pub fn policy_aad(policy_id: u64, chain_id: u64, ciphertext_hash: &str) -> String {
    format!("policy:{policy_id}:{chain_id}:{ciphertext_hash}")
}

/// The smallest and largest buyer keys taken, in bits.
pub const MIN_BUYER_KEY_BITS: usize = 3072;
pub const MAX_BUYER_KEY_BITS: usize = 8192;

/// A buyer's RSA public key, read from SPKI PEM.
#[derive(Clone, Debug)]
pub struct BuyerKey {
    key: rsa::RsaPublicKey,
    /// SHA-256 of the SPKI DER, 64 lower-case hex digits.
    pub fingerprint: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuyerKeyError {
    #[error("is not an RSA public key in SPKI PEM (-----BEGIN PUBLIC KEY-----)")]
    Unreadable,
    #[error("is {0} bits; RSA keys of {MIN_BUYER_KEY_BITS} to {MAX_BUYER_KEY_BITS} bits are taken")]
    Size(usize),
}

impl BuyerKey {
    pub fn from_pem(pem: &str) -> Result<BuyerKey, BuyerKeyError> {
        let (label, der) = rsa::pkcs8::Document::from_pem(pem.trim()).map_err(|_| BuyerKeyError::Unreadable)?;
        if label != "PUBLIC KEY" {
            return Err(BuyerKeyError::Unreadable);
        }
        let key = rsa::RsaPublicKey::from_public_key_der(der.as_bytes()).map_err(|_| BuyerKeyError::Unreadable)?;
        let bits = key.size() * 8;
        if !(MIN_BUYER_KEY_BITS..=MAX_BUYER_KEY_BITS).contains(&bits) {
            return Err(BuyerKeyError::Size(bits));
        }
        let fingerprint = shared::http::hex(&Sha256::digest(der.as_bytes()));
        Ok(BuyerKey { key, fingerprint })
    }

    /// Whether `claimed` is this key's fingerprint (colons and case
    /// ignored, as clients write it either way).
    pub fn matches(&self, claimed: &str) -> bool {
        normalize_fingerprint(claimed) == self.fingerprint
    }

    /// `key` encrypted to this key with RSA-OAEP-SHA-256, in base64.
    pub fn encrypt(&self, key: &ContentKey) -> String {
        let padding = rsa::Oaep::new::<Sha256>();
        let sealed = self.key.encrypt(&mut rsa::rand_core::OsRng, padding, key).expect("32 bytes fit any taken key");
        B64.encode(sealed)
    }
}

/// A fingerprint as stored: lower-case hex without colons.
pub fn normalize_fingerprint(text: &str) -> String {
    text.trim().chars().filter(|c| *c != ':').collect::<String>().to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_keys_read_and_rotate() {
        let old = MasterKeys::parse(&"11".repeat(32)).unwrap();
        assert_eq!(old.current_version(), 1);
        let wrapped = old.wrap(&[9u8; 32], "policy:1:31337:0xab");
        assert_eq!(old.unwrap(&wrapped, "policy:1:31337:0xab").unwrap(), [9u8; 32]);
        assert_eq!(old.unwrap(&wrapped, "policy:2:31337:0xab"), Err(UnwrapError::OtherPurpose));
        let rebound = WrappedKey { aad: "policy:2:31337:0xab".into(), ..wrapped.clone() };
        assert_eq!(old.unwrap(&rebound, "policy:2:31337:0xab"), Err(UnwrapError::Forged));

        let both = MasterKeys::parse(&format!("1:{}\n2:{}", "11".repeat(32), B64.encode([2u8; 32]))).unwrap();
        assert_eq!(both.current_version(), 2);
        assert_eq!(both.unwrap(&wrapped, "policy:1:31337:0xab").unwrap(), [9u8; 32]);
        let newer = both.wrap(&[9u8; 32], "x");
        assert_eq!(newer.key_version, 2);
        assert_eq!(old.unwrap(&newer, "x"), Err(UnwrapError::UnknownVersion(2)));
        // A passphrase-like key is hashed to 32 bytes.
        assert!(MasterKeys::parse(&B64.encode(b"a long operator passphrase")).is_ok());
        assert!(format!("{both:?}").contains("version: 2") && !format!("{both:?}").contains("1111"));
    }

    #[test]
    fn master_key_refusals() {
        let cases = [
            ("", MasterKeyError::Empty),
            ("x:abc", MasterKeyError::Version(1)),
            ("not base64 !!", MasterKeyError::Encoding(1)),
            ("AAAA", MasterKeyError::Short(1)),
            (&*format!("1:{}\n1:{}", "11".repeat(32), "22".repeat(32)), MasterKeyError::Repeated(1)),
            (&*format!("{}\n{}", "11".repeat(32), "22".repeat(32)), MasterKeyError::Version(1)),
        ];
        for (text, error) in cases {
            assert_eq!(MasterKeys::parse(text).unwrap_err(), error, "{text:?}");
        }
    }

    #[test]
    fn a_key_reaches_only_the_buyer() {
        use rsa::pkcs8::{EncodePublicKey, LineEnding};
        let private = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 3072).unwrap();
        let public = private.to_public_key();
        let pem = public.to_public_key_pem(LineEnding::LF).unwrap();
        let buyer = BuyerKey::from_pem(&pem).unwrap();
        let der = public.to_public_key_der().unwrap();
        let expected = shared::http::hex(&Sha256::digest(der.as_bytes()));
        assert_eq!(buyer.fingerprint, expected);
        let colons = expected
            .as_bytes()
            .chunks(2)
            .map(|c| std::str::from_utf8(c).unwrap().to_uppercase())
            .collect::<Vec<_>>()
            .join(":");
        assert!(buyer.matches(&colons));
        assert!(!buyer.matches(&"00".repeat(32)));
        let sealed = B64.decode(buyer.encrypt(&[5u8; 32])).unwrap();
        assert_eq!(private.decrypt(rsa::Oaep::new::<Sha256>(), &sealed).unwrap(), vec![5u8; 32]);

        let small = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).unwrap().to_public_key();
        let small_pem = small.to_public_key_pem(LineEnding::LF).unwrap();
        assert_eq!(BuyerKey::from_pem(&small_pem).unwrap_err(), BuyerKeyError::Size(2048));
        assert_eq!(
            BuyerKey::from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----").unwrap_err(),
            BuyerKeyError::Unreadable
        );
    }
}
