//! `POST /register`'s body against the datasets' catalog: reading it and
//! making the agent never panic; a refusal names a field; an agent made
//! has a UAID that parses back.
#![no_main]
use libfuzzer_sys::fuzz_target;

use broker_model::catalog::Catalog;
use broker_model::registration::{self, Owner};

fuzz_target!(|data: &[u8]| {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    let catalog = CATALOG.get_or_init(|| {
        serde_json::from_str(include_str!("../../datasets/broker/catalog.json")).expect("the datasets' catalog")
    });
    let Ok(body) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let read = match registration::read(&body, catalog) {
        Ok(read) => read,
        Err(invalid) => return assert!(!invalid.field.is_empty()),
    };
    let owner = Owner { account: "0.0.1001".into(), caip10: "hedera:testnet:0.0.1001".into() };
    match registration::agent(&read, &owner, catalog, "2026-11-29T00:00:00.000Z") {
        Ok(agent) => assert!(agent.uaid.to_string().parse::<shared::uaid::Uaid>().is_ok()),
        Err(invalid) => assert!(!invalid.field.is_empty()),
    }
});
