//! Ledger signatures: how a client proves it controls an account
//! (`../shared/contracts/broker-live.md` section 4). The signed bytes are
//! the UTF-8 of the challenge message, verbatim.
//!
//! - Hedera ed25519: a 64-byte signature over the message.
//! - Hedera ECDSA secp256k1: a 64-byte `r‖s` over keccak256(message).
//! - EVM (`eip155:<chainId>`): EIP-191 `personal_sign`, 65 bytes `r‖s‖v`
//!   over keccak256("\x19Ethereum Signed Message:\n" + length + message);
//!   the signer is the address recovered from it.
//!
//! Pure functions: no key source and no clock here.

use k256::ecdsa::signature::hazmat::PrehashVerifier as _;
use sha3::{Digest, Keccak256};
use shared::http::hex;

/// A Hedera account key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    Ed25519(ed25519_dalek::VerifyingKey),
    Secp256k1(k256::ecdsa::VerifyingKey),
}

/// A key that is not one of the forms above.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadKey(pub &'static str);

/// DER prefixes of Hedera's `PublicKey.toString()`: SubjectPublicKeyInfo
/// with the ed25519 OID, and with the EC OID for secp256k1 (compressed
/// point).
const ED25519_DER: &str = "302a300506032b6570032100";
const SECP256K1_DER: &str = "302d300706052b8104000a032200";

impl PublicKey {
    /// From Hedera's DER hex (what a client sends as `publicKey`).
    pub fn from_der_hex(text: &str) -> Result<PublicKey, BadKey> {
        let text = text.trim().trim_start_matches("0x").to_ascii_lowercase();
        if let Some(raw) = text.strip_prefix(ED25519_DER) {
            return PublicKey::from_raw("ED25519", raw);
        }
        if let Some(raw) = text.strip_prefix(SECP256K1_DER) {
            return PublicKey::from_raw("ECDSA_SECP256K1", raw);
        }
        Err(BadKey("publicKey is not a DER-encoded ed25519 or secp256k1 key in hex"))
    }

    /// From a mirror node's account `key`: its `_type` and the raw key in
    /// hex (32 bytes for ed25519, a 33-byte compressed point for
    /// secp256k1).
    pub fn from_raw(kind: &str, hex: &str) -> Result<PublicKey, BadKey> {
        let bytes = decode_hex(hex.trim().trim_start_matches("0x")).ok_or(BadKey("the key is not hex"))?;
        match kind {
            "ED25519" => {
                let bytes: [u8; 32] = bytes.try_into().map_err(|_| BadKey("an ed25519 key is 32 bytes"))?;
                ed25519_dalek::VerifyingKey::from_bytes(&bytes)
                    .map(PublicKey::Ed25519)
                    .map_err(|_| BadKey("not an ed25519 point"))
            }
            "ECDSA_SECP256K1" => k256::ecdsa::VerifyingKey::from_sec1_bytes(&bytes)
                .map(PublicKey::Secp256k1)
                .map_err(|_| BadKey("not a secp256k1 point")),
            _ => Err(BadKey("the account's key is neither ED25519 nor ECDSA_SECP256K1")),
        }
    }

    /// Whether `signature` (64 raw bytes) is this key's over `message`.
    /// ed25519 is checked strictly (no small-order keys or non-canonical
    /// encodings). An ECDSA signature is taken in either S half: a
    /// challenge is single-use, so a second spelling of one signature
    /// gains nothing, and refusing high S would refuse wallets that do not
    /// normalise.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        match self {
            PublicKey::Ed25519(key) => ed25519_dalek::Signature::from_slice(signature)
                .is_ok_and(|signature| key.verify_strict(message, &signature).is_ok()),
            PublicKey::Secp256k1(key) => k256::ecdsa::Signature::from_slice(signature).is_ok_and(|signature| {
                let signature = signature.normalize_s().unwrap_or(signature);
                key.verify_prehash(&Keccak256::digest(message), &signature).is_ok()
            }),
        }
    }
}

/// The EVM address (20 bytes) that made an EIP-191 `personal_sign`
/// signature (65 bytes, `v` 27/28 or 0/1) over `message`; `None` when the
/// signature is malformed.
pub fn evm_signer(message: &[u8], signature: &[u8]) -> Option<[u8; 20]> {
    let [rs @ .., v] = signature else { return None };
    if rs.len() != 64 {
        return None;
    }
    let recovery = match v {
        0 | 27 => 0,
        1 | 28 => 1,
        _ => return None,
    };
    let signature = k256::ecdsa::Signature::from_slice(rs).ok()?;
    if signature.normalize_s().is_some() {
        return None;
    }
    let id = k256::ecdsa::RecoveryId::from_byte(recovery)?;
    let key = k256::ecdsa::VerifyingKey::recover_from_prehash(&eip191_digest(message), &signature, id).ok()?;
    Some(evm_address(&key))
}

/// keccak256("\x19Ethereum Signed Message:\n" + decimal length + message).
fn eip191_digest(message: &[u8]) -> [u8; 32] {
    let mut hasher = Keccak256::new();
    hasher.update(format!("\x19Ethereum Signed Message:\n{}", message.len()).as_bytes());
    hasher.update(message);
    hasher.finalize().into()
}

/// The address of a secp256k1 key: the last 20 bytes of keccak256 of its
/// uncompressed point without the 0x04 prefix.
pub fn evm_address(key: &k256::ecdsa::VerifyingKey) -> [u8; 20] {
    let point = key.to_encoded_point(false);
    let hash = Keccak256::digest(&point.as_bytes()[1..]);
    hash[12..].try_into().expect("20 bytes")
}

/// A Hedera private key, to sign a challenge as a client does (the
/// `login` command and the tests; the api itself never holds one).
pub enum SigningKey {
    Ed25519(ed25519_dalek::SigningKey),
    Secp256k1(k256::ecdsa::SigningKey),
}

/// DER prefixes of Hedera's `PrivateKey.toStringDer()` (PKCS#8 for
/// ed25519, RFC 5915 for secp256k1), each followed by the 32-byte key.
const ED25519_PRIVATE_DER: &str = "302e020100300506032b657004220420";
const SECP256K1_PRIVATE_DER: &str = "3030020100300706052b8104000a04220420";

impl SigningKey {
    /// From Hedera's DER hex.
    pub fn from_der_hex(text: &str) -> Result<SigningKey, BadKey> {
        let text = text.trim().trim_start_matches("0x").to_ascii_lowercase();
        let raw = |rest: &str| -> Result<[u8; 32], BadKey> {
            decode_hex(rest).and_then(|b| b.try_into().ok()).ok_or(BadKey("a private key is 32 bytes of hex"))
        };
        if let Some(rest) = text.strip_prefix(ED25519_PRIVATE_DER) {
            return Ok(SigningKey::Ed25519(ed25519_dalek::SigningKey::from_bytes(&raw(rest)?)));
        }
        if let Some(rest) = text.strip_prefix(SECP256K1_PRIVATE_DER) {
            let key =
                k256::ecdsa::SigningKey::from_bytes(&raw(rest)?.into()).map_err(|_| BadKey("not a secp256k1 key"))?;
            return Ok(SigningKey::Secp256k1(key));
        }
        Err(BadKey("privateKey is not a DER-encoded ed25519 or secp256k1 key in hex"))
    }

    pub fn public_key(&self) -> PublicKey {
        match self {
            SigningKey::Ed25519(key) => PublicKey::Ed25519(key.verifying_key()),
            SigningKey::Secp256k1(key) => PublicKey::Secp256k1(*key.verifying_key()),
        }
    }

    /// The 64-byte signature a Hedera wallet makes over `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        use ed25519_dalek::Signer as _;
        match self {
            SigningKey::Ed25519(key) => key.sign(message).to_bytes(),
            SigningKey::Secp256k1(key) => {
                let (signature, _) =
                    key.sign_prehash_recoverable(&Keccak256::digest(message)).expect("a 32-byte prehash signs");
                signature.to_bytes().into()
            }
        }
    }
}

impl PublicKey {
    /// Hedera's DER hex (`PublicKey.toString()`).
    pub fn to_der_hex(&self) -> String {
        match self {
            PublicKey::Ed25519(key) => format!("{ED25519_DER}{}", hex(key.as_bytes())),
            PublicKey::Secp256k1(key) => format!("{SECP256K1_DER}{}", hex(key.to_encoded_point(true).as_bytes())),
        }
    }

    /// The raw key: ed25519's 32 bytes, secp256k1's compressed 33.
    pub fn raw(&self) -> Vec<u8> {
        match self {
            PublicKey::Ed25519(key) => key.as_bytes().to_vec(),
            PublicKey::Secp256k1(key) => key.to_encoded_point(true).as_bytes().to_vec(),
        }
    }
}

/// An EIP-191 `personal_sign` signature (65 bytes, `v` 27/28) by `key`.
pub fn evm_sign(key: &k256::ecdsa::SigningKey, message: &[u8]) -> [u8; 65] {
    let (signature, recovery) = key.sign_prehash_recoverable(&eip191_digest(message)).expect("a 32-byte prehash signs");
    let mut out = [0u8; 65];
    out[..64].copy_from_slice(&signature.to_bytes());
    out[64] = 27 + recovery.to_byte();
    out
}

/// Bytes from hex, an `0x` prefix and surrounding space allowed.
pub fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let text = text.trim();
    let text = text.strip_prefix("0x").unwrap_or(text);
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::Signer as _;

    use super::*;

    const MESSAGE: &[u8] = b"Sign in to almanac: challenge 7f3a, account 0.0.1234, expires 2026-11-23T18:00:00Z";

    #[test]
    fn hedera_ed25519_signatures() {
        let signing = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let der = format!("{ED25519_DER}{}", hex(signing.verifying_key().as_bytes()));
        let key = PublicKey::from_der_hex(&der).unwrap();
        assert_eq!(key, PublicKey::from_raw("ED25519", &hex(signing.verifying_key().as_bytes())).unwrap());
        let signature = signing.sign(MESSAGE).to_bytes();
        assert!(key.verifies(MESSAGE, &signature));
        let check_refused =
            |message: &[u8], signature: &[u8], why: &str| assert!(!key.verifies(message, signature), "{why}");
        check_refused(b"another message", &signature, "another message");
        let mut flipped = signature;
        flipped[10] ^= 1;
        check_refused(MESSAGE, &flipped, "a flipped bit");
        check_refused(MESSAGE, &signature[..63], "63 bytes");
        let other = ed25519_dalek::SigningKey::from_bytes(&[8; 32]).sign(MESSAGE).to_bytes();
        check_refused(MESSAGE, &other, "another key's signature");
    }

    #[test]
    fn hedera_secp256k1_signatures_are_over_keccak256() {
        let signing = k256::ecdsa::SigningKey::from_slice(&[9; 32]).unwrap();
        let compressed = signing.verifying_key().to_encoded_point(true);
        let key = PublicKey::from_der_hex(&format!("{SECP256K1_DER}{}", hex(compressed.as_bytes()))).unwrap();
        let (signature, _): (k256::ecdsa::Signature, _) =
            signing.sign_prehash_recoverable(&Keccak256::digest(MESSAGE)).unwrap();
        assert!(key.verifies(MESSAGE, &signature.to_bytes()));
        // Over SHA-256 instead of keccak256: refused.
        let (sha256, _): (k256::ecdsa::Signature, _) = signing.sign_prehash_recoverable(&sha2_digest(MESSAGE)).unwrap();
        assert!(!key.verifies(MESSAGE, &sha256.to_bytes()));
        // The same signature with S in the high half: the same proof.
        let (r, s) = signature.split_scalars();
        let high = k256::ecdsa::Signature::from_scalars(r, -*s).unwrap();
        assert!(key.verifies(MESSAGE, &high.to_bytes()));
        let other = k256::ecdsa::SigningKey::from_slice(&[10; 32]).unwrap();
        let (theirs, _): (k256::ecdsa::Signature, _) =
            other.sign_prehash_recoverable(&Keccak256::digest(MESSAGE)).unwrap();
        assert!(!key.verifies(MESSAGE, &theirs.to_bytes()), "another key's signature");
    }

    fn sha2_digest(message: &[u8]) -> [u8; 32] {
        use sha2::Digest as _;
        sha2::Sha256::digest(message).into()
    }

    #[test]
    fn keys_in_other_forms_are_refused() {
        let check = |text: &str| assert!(PublicKey::from_der_hex(text).is_err(), "{text}");
        check("");
        check("zz");
        check(&format!("{ED25519_DER}{}", "ab".repeat(31)));
        check(&format!("{SECP256K1_DER}{}", "00".repeat(33)));
        check(&"ab".repeat(32));
        assert!(PublicKey::from_raw("RSA_3072", &"ab".repeat(32)).is_err());
    }

    /// viem's documented `signMessage` example: the first development
    /// account of Anvil and Hardhat signing "hello world".
    #[test]
    fn evm_personal_sign_matches_viem() {
        let signature = decode_hex(
            "a461f509887bd19e312c0c58467ce8ff8e300d3c1a90b608a760c5b80318eaf15fe57c96f9175d6cd4daad4663763baa7e78836e067d0163e9a2ccf2ff753f5b1b",
        )
        .unwrap();
        let signer = evm_signer(b"hello world", &signature).unwrap();
        assert_eq!(hex(&signer), "f39fd6e51aad88f6f4ce6ab8827279cfffb92266");
        assert_ne!(evm_signer(b"hello world!", &signature), Some(signer));
        assert_eq!(evm_signer(b"hello world", &signature[..64]), None);
        let mut bad_v = signature.clone();
        bad_v[64] = 29;
        assert_eq!(evm_signer(b"hello world", &bad_v), None);
    }
}
