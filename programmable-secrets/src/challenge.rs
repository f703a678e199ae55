//! The key-release challenge a buyer signs, and the signer recovered from
//! its signature.
//!
//! The challenge binds one request to its chain, contracts, policy, buyer
//! and nonce, and says when it expires; the buyer signs its text with the
//! wallet (EIP-191 `personal_sign`). The signer is recovered over
//! secp256k1 from the 65-byte signature; a signature with a high `s` (a
//! second form of the same signature, which Ethereum's signers never
//! make) is refused, so one signature has one spelling.

use alloy_primitives::{keccak256, Address, B256};
use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};

/// What a challenge says, in its order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    pub network: String,
    pub chain_id: u64,
    pub payment_module: Address,
    pub policy_vault: Address,
    pub policy_id: u64,
    pub buyer: Address,
    /// 32 lower-case hex digits (16 random bytes).
    pub nonce: String,
    /// ISO 8601, UTC, with milliseconds.
    pub expires_at: String,
}

impl Challenge {
    /// The text signed: the title line, then one `name: value` line per
    /// field, addresses lower-case, joined by `\n`.
    pub fn text(&self) -> String {
        [
            "Programmable Secrets Access Request".to_string(),
            format!("network: {}", self.network),
            format!("chainId: {}", self.chain_id),
            format!("paymentModule: {:#x}", self.payment_module),
            format!("policyVault: {:#x}", self.policy_vault),
            format!("policyId: {}", self.policy_id),
            format!("buyer: {:#x}", self.buyer),
            format!("nonce: {}", self.nonce),
            format!("expiresAt: {}", self.expires_at),
        ]
        .join("\n")
    }
}

/// The EIP-191 hash of a personal message: keccak-256 of
/// `"\x19Ethereum Signed Message:\n" + len + message`.
pub fn personal_message_hash(message: &[u8]) -> B256 {
    let mut prefixed = format!("\x19Ethereum Signed Message:\n{}", message.len()).into_bytes();
    prefixed.extend_from_slice(message);
    keccak256(prefixed)
}

/// Why a signature names no signer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the signature is not 0x and 130 hex digits (65 bytes: r, s, v)")]
    Malformed,
    #[error("the signature's v is not 27, 28, 0 or 1")]
    RecoveryId,
    #[error("the signature's s is in the upper half of the curve order")]
    HighS,
    #[error("no public key recovers from the signature")]
    Unrecoverable,
}

/// The address whose key signed `message` with EIP-191, from a 65-byte
/// signature `r ‖ s ‖ v` in `0x` hex.
pub fn recover_personal_signer(message: &[u8], signature_hex: &str) -> Result<Address, SignatureError> {
    let digits = signature_hex.strip_prefix("0x").ok_or(SignatureError::Malformed)?;
    let bytes: [u8; 65] = alloy_primitives::hex::decode_to_array(digits).map_err(|_| SignatureError::Malformed)?;
    let signature = Signature::from_slice(&bytes[..64]).map_err(|_| SignatureError::Malformed)?;
    if signature.normalize_s().is_some() {
        return Err(SignatureError::HighS);
    }
    let v = match bytes[64] {
        27 | 28 => bytes[64] - 27,
        0 | 1 => bytes[64],
        _ => return Err(SignatureError::RecoveryId),
    };
    let id = RecoveryId::from_byte(v).ok_or(SignatureError::RecoveryId)?;
    let hash = personal_message_hash(message);
    let key = VerifyingKey::recover_from_prehash(hash.as_slice(), &signature, id)
        .map_err(|_| SignatureError::Unrecoverable)?;
    Ok(address_of(&key))
}

/// The Ethereum address of a public key: the last 20 bytes of keccak-256
/// of its uncompressed point without the leading 0x04.
pub fn address_of(key: &VerifyingKey) -> Address {
    let point = key.to_encoded_point(false);
    Address::from_slice(&keccak256(&point.as_bytes()[1..])[12..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::SigningKey;

    /// The first development account of anvil and hardhat: a key and
    /// address published with them.
    const KEY: &str = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
    const ADDRESS: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";

    fn sign(key: &SigningKey, message: &[u8]) -> String {
        let (signature, id) = key.sign_prehash_recoverable(personal_message_hash(message).as_slice()).unwrap();
        let mut bytes = signature.to_bytes().to_vec();
        bytes.push(27 + id.to_byte());
        format!("0x{}", shared::http::hex(&bytes))
    }

    #[test]
    fn the_signer_is_recovered() {
        let key = SigningKey::from_slice(
            &(0..32).map(|i| u8::from_str_radix(&KEY[2 * i..2 * i + 2], 16).unwrap()).collect::<Vec<_>>(),
        )
        .unwrap();
        assert_eq!(format!("{:#x}", address_of(key.verifying_key())), ADDRESS);
        let message = b"Programmable Secrets Access Request\nnonce: 00";
        let signature = sign(&key, message);
        assert_eq!(format!("{:#x}", recover_personal_signer(message, &signature).unwrap()), ADDRESS);
        // Another message recovers another address, not an error.
        assert_ne!(format!("{:#x}", recover_personal_signer(b"other", &signature).unwrap()), ADDRESS);
        // v as 0/1 is the same signature.
        let low_v = format!("{}{:02x}", &signature[..130], u8::from_str_radix(&signature[130..], 16).unwrap() - 27);
        assert_eq!(format!("{:#x}", recover_personal_signer(message, &low_v).unwrap()), ADDRESS);
    }

    #[test]
    fn malformed_signatures_are_refused() {
        let key = SigningKey::from_slice(&[7u8; 32]).unwrap();
        let good = sign(&key, b"m");
        // s replaced by n - s: the same point, the other spelling.
        let bytes: Vec<u8> = (0..64).map(|i| u8::from_str_radix(&good[2 + 2 * i..4 + 2 * i], 16).unwrap()).collect();
        let low = Signature::from_slice(&bytes).unwrap();
        let high = Signature::from_scalars(low.r().to_bytes(), (-*low.s()).to_bytes()).unwrap();
        let flipped = format!("0x{}1b", shared::http::hex(&high.to_bytes()));
        let cases = [
            ("0x1234".to_string(), SignatureError::Malformed),
            (good[2..].to_string(), SignatureError::Malformed),
            (format!("{}1d", &good[..130]), SignatureError::RecoveryId),
            (flipped, SignatureError::HighS),
        ];
        for (signature, error) in cases {
            assert_eq!(recover_personal_signer(b"m", &signature), Err(error), "{signature}");
        }
    }

    #[test]
    fn the_challenge_text() {
        let challenge = Challenge {
            network: "anvil".into(),
            chain_id: 31337,
            payment_module: Address::repeat_byte(0xAB),
            policy_vault: Address::repeat_byte(0x01),
            policy_id: 4,
            buyer: Address::repeat_byte(0xCD),
            nonce: "00ff".into(),
            expires_at: "2026-11-29T15:00:00.000Z".into(),
        };
        assert_eq!(
            challenge.text(),
            format!(
                "Programmable Secrets Access Request\nnetwork: anvil\nchainId: 31337\npaymentModule: 0x{}\npolicyVault: 0x{}\npolicyId: 4\nbuyer: 0x{}\nnonce: 00ff\nexpiresAt: 2026-11-29T15:00:00.000Z",
                "ab".repeat(20),
                "01".repeat(20),
                "cd".repeat(20)
            )
        );
    }
}
