//! An HCS-20 message body: decoding never panics, and a body that decodes
//! to an operation decodes the same way again.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let (header, decoded) = hcs20::message::decode(body);
    let (again_header, again) = hcs20::message::decode(body);
    assert_eq!(format!("{header:?}{decoded:?}"), format!("{again_header:?}{again:?}"));
});
