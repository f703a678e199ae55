//! The protocol's hashes, written as the chain and the wire carry them:
//! `0x` and 64 lower-case hex digits.

use alloy_primitives::{keccak256, B256};
use sha2::{Digest, Sha256};

pub fn sha256(bytes: &[u8]) -> B256 {
    B256::from(<[u8; 32]>::from(Sha256::digest(bytes)))
}

pub fn keccak(bytes: &[u8]) -> B256 {
    keccak256(bytes)
}

/// `0x` and lower-case hex.
pub fn hex(hash: &B256) -> String {
    format!("{hash:#x}")
}

/// Which hash a commitment was made with. Publication through the broker
/// uses SHA-256; bundles made by the contracts' command-line tools use
/// keccak-256; the chain stores whichever the provider sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Commitment {
    Sha256,
    Keccak256,
}

impl Commitment {
    /// The commitment `bytes` match, if either.
    pub fn of(bytes: &[u8], committed: &B256) -> Option<Commitment> {
        if sha256(bytes) == *committed {
            Some(Commitment::Sha256)
        } else if keccak(bytes) == *committed {
            Some(Commitment::Keccak256)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        assert_eq!(hex(&sha256(b"abc")), "0xba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(hex(&keccak(b"")), "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470");
        assert_eq!(Commitment::of(b"abc", &sha256(b"abc")), Some(Commitment::Sha256));
        assert_eq!(Commitment::of(b"abc", &keccak(b"abc")), Some(Commitment::Keccak256));
        assert_eq!(Commitment::of(b"abd", &keccak(b"abc")), None);
    }
}
