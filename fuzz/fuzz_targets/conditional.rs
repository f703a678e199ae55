//! RFC 9110 preconditions: evaluation never panics, and an If-None-Match
//! that lists the current tag is always 304 unless an If-Match fails first.
#![no_main]
use std::time::{Duration, UNIX_EPOCH};

use api::conditional::{evaluate, Outcome, Preconditions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let mut fields = text.split('\n');
    let mut next = || fields.next();
    let pre = Preconditions {
        if_match: next(),
        if_none_match: next(),
        if_modified_since: next(),
        if_unmodified_since: next(),
    };
    let etag = "\"e1\"";
    let modified = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let outcome = evaluate(&pre, etag, modified);
    let listed = Preconditions { if_none_match: Some("\"e1\""), ..pre };
    if evaluate(&listed, etag, modified) != Outcome::PreconditionFailed {
        assert_eq!(evaluate(&listed, etag, modified), Outcome::NotModified);
    }
    let _ = outcome;
});
