//! Request paths, normalised once (RFC 3986 section 6.2.2) before anything
//! looks at them, so that every spelling of a path is answered, limited and
//! logged as the same resource.
//!
//! A percent-encoded octet names the same character as the octet itself
//! (`/%67uard` is `/guard`) and is decoded, except two: an encoded `/`
//! separates nothing (a UAID may hold one inside a single segment, and
//! `/guard%2Ffacts.json` is not `/guard/facts.json`), and an encoded `%`
//! must not be decoded twice. Those stay encoded, in upper case
//! (section 6.2.2.1), until a path parameter is decoded ([`decode_segment`]).

use std::borrow::Cow;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidPath;

/// The normal form of a request path; an error when it is not UTF-8 once
/// decoded. A `%` not followed by two hex digits is kept as it is. Borrowed
/// when there is nothing to decode, as for nearly every request.
pub fn normalize(raw: &str) -> Result<Cow<'_, str>, InvalidPath> {
    if !raw.contains('%') {
        return Ok(Cow::Borrowed(raw));
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes.get(i..i + 3) {
            Some([b'%', high, low]) => hex(*high).zip(hex(*low)).map(|(h, l)| h << 4 | l),
            _ => None,
        };
        match escaped {
            Some(b'/') => out.extend_from_slice(b"%2F"),
            Some(b'%') => out.extend_from_slice(b"%25"),
            Some(octet) => out.push(octet),
            None => {
                out.push(bytes[i]);
                i += 1;
                continue;
            }
        }
        i += 3;
    }
    String::from_utf8(out).map(Cow::Owned).map_err(|_| InvalidPath)
}

/// A segment of a normalised path with its kept escapes (`%2F`, `%25`)
/// decoded: the value of a path parameter.
pub fn decode_segment(segment: &str) -> Cow<'_, str> {
    percent_encoding::percent_decode_str(segment).decode_utf8_lossy()
}

fn hex(digit: u8) -> Option<u8> {
    (digit as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: &str, expected: Result<&str, InvalidPath>) {
        assert_eq!(normalize(raw).as_deref().map_err(|e| *e), expected, "{raw:?}");
    }

    #[test]
    fn normal_forms() {
        check("/guard/facts.json", Ok("/guard/facts.json"));
        check("/%67uard/facts.json", Ok("/guard/facts.json"));
        check("/%67%75%61%72%64/%66acts.json", Ok("/guard/facts.json"));
        check("/%47uard", Ok("/Guard")); // case in the data is kept
        check("/guard%2Ffacts.json", Ok("/guard%2Ffacts.json"));
        check("/guard%2ffacts.json", Ok("/guard%2Ffacts.json")); // hex digits upper-cased
        check("/a%25b", Ok("/a%25b"));
        check("/a%252Fb", Ok("/a%252Fb")); // decoded once, never twice
        check("/api/v1/agents/uaid%3Aaid%3Ax%3Bnative%3D1%2F2", Ok("/api/v1/agents/uaid:aid:x;native=1%2F2"));
        check("/caf%C3%A9", Ok("/café"));
        check("/café", Ok("/café"));
        check("/%zz/%4", Ok("/%zz/%4")); // not escapes: kept
        check("/%", Ok("/%"));
        check("/%C3", Err(InvalidPath)); // half a UTF-8 sequence
        check("/%FF", Err(InvalidPath));
        check("", Ok(""));
    }

    #[test]
    fn parameters_decode_what_normalising_kept() {
        assert_eq!(decode_segment("uaid:aid:x;native=1%2F2"), "uaid:aid:x;native=1/2");
        assert_eq!(decode_segment("100%25"), "100%");
        assert_eq!(decode_segment(&normalize("/a%252Fb").unwrap()), "/a%2Fb");
    }
}
