//! Programmable Secrets without IO: what the broker's publication, key
//! release and indexing compute, and what the tests check them against.
//!
//! The protocol (`../shared/contracts/programmable-secrets.md`) keeps only
//! hashes on chain: a provider's dataset (the ciphertext's hash, the
//! content key's commitment, the metadata's hash and the provider UAID's
//! hash) and the policies that sell access to it under conditions. The
//! broker holds the ciphertext and the content key, wrapped under the
//! operator's master key, and releases the key to a buyer who proves
//! control of a wallet holding access, encrypted to a key only that buyer
//! has.
//!
//! This crate knows nothing of the async runtime, HTTP or the store; the
//! api calls it, and so do the tests that play provider and buyer.

pub mod canonical;
pub mod challenge;
pub mod conditions;
pub mod contracts;
pub mod deployment;
pub mod envelope;
pub mod hashes;

pub use alloy_primitives::{Address, Bytes, B256, U256};
