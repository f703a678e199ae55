//! `GET /search`'s query string: parsing never panics; a refusal names a
//! parameter.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &str| {
    if let Err(bad) = api::broker::search_parameters::parse(raw) {
        assert!(!bad.parameter.is_empty());
    }
});
