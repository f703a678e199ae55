//! A skill package's files as `POST /skills/publish` sends them: reading
//! never panics; a package read keeps the registry's bounds and a valid
//! name; a refusal names its field.
#![no_main]
use libfuzzer_sys::fuzz_target;

use api::broker::skills::package::{self, Bounds, Sent};

const BOUNDS: Bounds = Bounds { max_files: 8, max_total_bytes: 16_384 };

fuzz_target!(|data: &[u8]| {
    let Ok(sent) = serde_json::from_slice::<Vec<Sent>>(data) else { return };
    match package::read(&sent, BOUNDS) {
        Ok(read) => {
            assert!(read.files.len() <= BOUNDS.max_files);
            assert!(read.files.iter().map(|f| f.bytes.len()).sum::<usize>() <= BOUNDS.max_total_bytes);
            assert!(package::valid_name(&read.name));
        }
        Err(refused) => assert!(!refused.field.is_empty()),
    }
});
