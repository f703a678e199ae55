//! Conditional requests, RFC 9110 section 13.
//!
//! Preconditions are evaluated in the order of section 13.2.2: `If-Match`,
//! then `If-Unmodified-Since` (only without `If-Match`), then
//! `If-None-Match`, then `If-Modified-Since` (only without `If-None-Match`,
//! and only for GET and HEAD). `If-None-Match` compares weakly, `If-Match`
//! strongly. A date that does not parse is ignored, as the RFC requires.

use std::time::SystemTime;

/// What the request's preconditions say about a representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Send the representation.
    Proceed,
    /// 304 Not Modified (GET and HEAD).
    NotModified,
    /// 412 Precondition Failed.
    PreconditionFailed,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct Preconditions<'a> {
    pub if_match: Option<&'a str>,
    pub if_none_match: Option<&'a str>,
    pub if_modified_since: Option<&'a str>,
    pub if_unmodified_since: Option<&'a str>,
}

/// Evaluates the preconditions of a GET or HEAD for a representation with
/// strong `etag` (quoted) and `last_modified` (whole seconds).
pub fn evaluate(pre: &Preconditions, etag: &str, last_modified: SystemTime) -> Outcome {
    if let Some(list) = pre.if_match {
        if !matches(list, etag, Comparison::Strong) {
            return Outcome::PreconditionFailed;
        }
    } else if let Some(date) = pre.if_unmodified_since.and_then(parse_date) {
        if last_modified > date {
            return Outcome::PreconditionFailed;
        }
    }
    if let Some(list) = pre.if_none_match {
        if matches(list, etag, Comparison::Weak) {
            return Outcome::NotModified;
        }
    } else if let Some(date) = pre.if_modified_since.and_then(parse_date) {
        if last_modified <= date {
            return Outcome::NotModified;
        }
    }
    Outcome::Proceed
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Comparison {
    Strong,
    Weak,
}

/// Whether an `If-Match` / `If-None-Match` field value (`*` or a list of
/// entity tags) matches the current strong `etag`.
fn matches(list: &str, etag: &str, comparison: Comparison) -> bool {
    if list.trim() == "*" {
        return true;
    }
    entity_tags(list).any(|(weak, tag)| match comparison {
        Comparison::Weak => tag == etag,
        // Strong comparison: both must be strong. Ours always is.
        Comparison::Strong => !weak && tag == etag,
    })
}

/// Splits a list of entity tags: `W/"a", "b"` gives `(true, "\"a\"")` and
/// `(false, "\"b\"")`. Commas may appear inside quotes.
fn entity_tags(list: &str) -> impl Iterator<Item = (bool, &str)> {
    let mut rest = list;
    std::iter::from_fn(move || loop {
        rest = rest.trim_start_matches(|c: char| c == ',' || c.is_ascii_whitespace());
        if rest.is_empty() {
            return None;
        }
        let weak = rest.starts_with("W/");
        let body = if weak { &rest[2..] } else { rest };
        if !body.starts_with('"') {
            // Not an entity tag: skip to the next comma.
            rest = rest.find(',').map_or("", |i| &rest[i..]);
            continue;
        }
        match body[1..].find('"') {
            Some(end) => {
                let tag = &body[..end + 2];
                rest = &body[end + 2..];
                return Some((weak, tag));
            }
            None => {
                rest = "";
                return None;
            }
        }
    })
}

fn parse_date(value: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(value.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    const ETAG: &str = "\"abc\"";
    const LAST_MODIFIED: u64 = 1_700_000_000; // Tue, 14 Nov 2023 22:13:20 GMT

    fn check(name: &str, pre: Preconditions, expected: Outcome) {
        let lm = UNIX_EPOCH + Duration::from_secs(LAST_MODIFIED);
        assert_eq!(evaluate(&pre, ETAG, lm), expected, "{name}");
    }

    fn inm(v: &str) -> Preconditions<'_> {
        Preconditions { if_none_match: Some(v), ..Default::default() }
    }

    #[test]
    fn rfc9110_preconditions() {
        use Outcome::*;
        check("no preconditions", Preconditions::default(), Proceed);
        check("INM exact", inm("\"abc\""), NotModified);
        check("INM weak form matches weakly", inm("W/\"abc\""), NotModified);
        check("INM list", inm("\"x\", \"abc\""), NotModified);
        check("INM list without spaces", inm("\"x\",\"abc\""), NotModified);
        check("INM star", inm("*"), NotModified);
        check("INM other", inm("\"abd\""), Proceed);
        check("INM unquoted is no tag", inm("abc"), Proceed);
        check("INM comma inside a tag", inm("\"a,bc\", \"abc\""), NotModified);
        check(
            "IMS equal",
            Preconditions { if_modified_since: Some("Tue, 14 Nov 2023 22:13:20 GMT"), ..Default::default() },
            NotModified,
        );
        check(
            "IMS later",
            Preconditions { if_modified_since: Some("Wed, 15 Nov 2023 00:00:00 GMT"), ..Default::default() },
            NotModified,
        );
        check(
            "IMS earlier",
            Preconditions { if_modified_since: Some("Tue, 14 Nov 2023 22:13:19 GMT"), ..Default::default() },
            Proceed,
        );
        check(
            "IMS obsolete RFC 850 form",
            Preconditions { if_modified_since: Some("Tuesday, 14-Nov-23 22:13:20 GMT"), ..Default::default() },
            NotModified,
        );
        check(
            "IMS invalid date ignored",
            Preconditions { if_modified_since: Some("yesterday"), ..Default::default() },
            Proceed,
        );
        check(
            "INM wins over IMS (INM fails, IMS would match)",
            Preconditions {
                if_none_match: Some("\"old\""),
                if_modified_since: Some("Wed, 15 Nov 2023 00:00:00 GMT"),
                ..Default::default()
            },
            Proceed,
        );
        check(
            "INM wins over IMS (INM matches, IMS would not)",
            Preconditions {
                if_none_match: Some("\"abc\""),
                if_modified_since: Some("Mon, 01 Jan 2001 00:00:00 GMT"),
                ..Default::default()
            },
            NotModified,
        );
        check("IM strong match", Preconditions { if_match: Some("\"abc\""), ..Default::default() }, Proceed);
        check(
            "IM weak tag never matches strongly",
            Preconditions { if_match: Some("W/\"abc\""), ..Default::default() },
            PreconditionFailed,
        );
        check("IM star", Preconditions { if_match: Some("*"), ..Default::default() }, Proceed);
        check("IM other", Preconditions { if_match: Some("\"x\""), ..Default::default() }, PreconditionFailed);
        check(
            "IUS before change",
            Preconditions { if_unmodified_since: Some("Mon, 01 Jan 2001 00:00:00 GMT"), ..Default::default() },
            PreconditionFailed,
        );
        check(
            "IUS after change",
            Preconditions { if_unmodified_since: Some("Wed, 15 Nov 2023 00:00:00 GMT"), ..Default::default() },
            Proceed,
        );
        check(
            "IM wins over IUS",
            Preconditions {
                if_match: Some("\"abc\""),
                if_unmodified_since: Some("Mon, 01 Jan 2001 00:00:00 GMT"),
                ..Default::default()
            },
            Proceed,
        );
        check(
            "IM failure wins over INM",
            Preconditions { if_match: Some("\"x\""), if_none_match: Some("\"abc\""), ..Default::default() },
            PreconditionFailed,
        );
    }
}
