//! A UAID: parsing never panics, and a parsed UAID's canonical text parses
//! to the same UAID (and prints the same).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(uaid) = text.parse::<shared::uaid::Uaid>() {
        let canonical = uaid.to_string();
        let again: shared::uaid::Uaid = canonical.parse().expect("canonical text parses");
        assert_eq!(again.to_string(), canonical);
    }
});
