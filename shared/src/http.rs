//! The HTTP values every surface's answers are made of: the content type,
//! the cache policies (one table for sections A, B and C, so that the
//! generator's files, the manifest and the api's live answers agree), the
//! 400 error that names a parameter, and the spelling of names in files.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use sha2::{Digest, Sha256};

use crate::timestamp::Timestamp;

/// Content type of every JSON answer.
pub const JSON: &str = "application/json";

/// The Parquet media type (registered with IANA in 2024): the analysts'
/// exports.
pub const PARQUET: &str = "application/vnd.apache.parquet";

/// How long shared and private caches may keep an answer. Every answer of
/// the service, static or live, has one of these (spec section 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cache {
    /// Reference data that changes only with builds: catalogs, guard files.
    Catalog,
    /// An agent's detail, similar agents, resolution and feedback.
    Agent,
    /// HCS-20 account balances and holder lists: 60 s.
    Balances,
    /// The HCS-20 token list: 2 minutes.
    TokenLists,
    /// HCS-20 statistics and rankings: 5 minutes.
    EcosystemStats,
    /// Recent HCS-20 transactions: 30 s.
    Transactions,
    /// A live search answer: it changes with builds and the live store.
    Search,
    /// A shields.io badge (the badge says how long it may be kept).
    Badge,
    /// A pure function of the request (a UAID's validation): a day.
    Pure,
    /// Health, status, errors and anything per-caller: never stored.
    NoStore,
}

impl Cache {
    /// Every policy.
    pub const ALL: [Cache; 10] = [
        Cache::Catalog,
        Cache::Agent,
        Cache::Balances,
        Cache::TokenLists,
        Cache::EcosystemStats,
        Cache::Transactions,
        Cache::Search,
        Cache::Badge,
        Cache::Pure,
        Cache::NoStore,
    ];

    /// The `Cache-Control` value.
    pub fn header(self) -> &'static str {
        match self {
            Cache::Catalog => "public, max-age=300, s-maxage=3600, stale-while-revalidate=86400",
            Cache::Agent => "public, max-age=60, s-maxage=300, stale-while-revalidate=3600",
            Cache::Balances => "public, max-age=60, s-maxage=60, stale-while-revalidate=60",
            Cache::TokenLists => "public, max-age=120, s-maxage=120, stale-while-revalidate=120",
            Cache::EcosystemStats => "public, max-age=300, s-maxage=300, stale-while-revalidate=300",
            Cache::Transactions => "public, max-age=30, s-maxage=30, stale-while-revalidate=30",
            Cache::Search => "public, max-age=30",
            Cache::Badge => "public, max-age=300",
            Cache::Pure => "public, max-age=86400",
            Cache::NoStore => "no-store",
        }
    }
}

/// The content types the generator writes besides [`JSON`].
const CONTENT_TYPES: [&str; 4] = [JSON, "text/html; charset=utf-8", "text/html", "application/vnd.apache.parquet"];

/// The `'static` spelling of `text` when it is a header value the
/// generator writes (a `Cache-Control` of [`Cache`], a content type):
/// a server keeps such a value without a copy of its own, and its copies
/// for each answer are then free (no count shared between threads).
pub fn static_value(text: &str) -> Option<&'static str> {
    Cache::ALL.iter().map(|c| c.header()).chain(CONTENT_TYPES).find(|known| *known == text)
}

/// One answer: its exact bytes and what its headers are made of. The
/// generator writes it to a file and a manifest entry; the api serves it,
/// and makes live answers of the same type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Representation {
    pub body: Vec<u8>,
    /// The newest source time behind the answer (`Last-Modified`).
    pub last_modified: Timestamp,
    pub content_type: &'static str,
    pub cache: Cache,
}

impl Representation {
    /// `value` as compact JSON.
    pub fn json(value: &impl serde::Serialize, last_modified: Timestamp, cache: Cache) -> Representation {
        let body = serde_json::to_vec(value).expect("answers serialise");
        Representation { body, last_modified, content_type: JSON, cache }
    }

    /// The api's OpenAPI document as the api serves it and the build
    /// publishes it (same bytes, same ETag): it describes code, not data,
    /// so its `Last-Modified` is the epoch.
    pub fn openapi(document: &serde_json::Value) -> Representation {
        Representation::json(document, Timestamp(0), Cache::Catalog)
    }
}

/// Where the api's OpenAPI document is served and published.
pub const OPENAPI_ROUTE: &str = "/api/v1/openapi.json";

/// A request the api must answer 400: names the parameter at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BadParameter {
    pub parameter: &'static str,
    pub message: String,
}

impl BadParameter {
    pub fn new(parameter: &'static str, message: impl Into<String>) -> Self {
        BadParameter { parameter, message: message.into() }
    }

    /// A parameter that takes one value, given several times: which one
    /// was meant is not ours to guess.
    pub fn repeated(parameter: &'static str) -> Self {
        BadParameter::new(parameter, format!("query parameter {parameter} is given more than once"))
    }
}

/// The whole-number query parameter `name` (digits only) within
/// `min..=max`; every surface reads its numbers this way.
pub fn number(name: &'static str, raw: &str, min: usize, max: usize) -> Result<usize, BadParameter> {
    let n: usize =
        raw.parse().ok().filter(|_| raw.bytes().all(|b| b.is_ascii_digit())).ok_or_else(|| {
            BadParameter::new(name, format!("query parameter {name} must be an integer, got {raw:?}"))
        })?;
    if n < min || n > max {
        let range = match max {
            usize::MAX => format!("at least {min}"),
            max => format!("between {min} and {max}"),
        };
        return Err(BadParameter::new(name, format!("query parameter {name} must be {range}, got {n}")));
    }
    Ok(n)
}

/// Characters left as they are in a file name: no dots, so no `..`, and
/// nothing a static host might treat specially.
const FILE_NAME: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_');

/// A name (a tick, a UAID) as one file name: unreserved characters kept,
/// the rest percent-encoded; a very long name is named by its hash instead.
pub fn file_name(name: &str) -> String {
    let encoded = utf8_percent_encode(name, FILE_NAME).to_string();
    if encoded.len() <= 120 {
        return encoded;
    }
    let digest = Sha256::digest(name.as_bytes());
    format!("~{}", hex(&digest[..16]))
}

/// Lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 64-bit FNV-1a of `bytes`: a hash that is the same on every machine and
/// in every release, for tables written into files (routes, UAIDs).
pub fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_cannot_climb_out_of_their_folder() {
        for (name, expected) in [("pts", "pts"), ("../x", "%2E%2E%2Fx"), ("é", "%C3%A9"), ("a b", "a%20b")] {
            assert_eq!(file_name(name), expected, "{name}");
        }
        let long = file_name(&"x".repeat(500));
        assert!(long.starts_with('~') && long.len() == 33, "{long}");
    }

    #[test]
    fn every_stored_policy_is_public_and_bounded() {
        for cache in Cache::ALL.into_iter().filter(|c| *c != Cache::NoStore) {
            let header = cache.header();
            assert!(header.starts_with("public, max-age="), "{cache:?}: {header}");
        }
        assert_eq!(Cache::NoStore.header(), "no-store");
    }

    /// The values a server may keep as `'static`: every policy's header and
    /// the content types written, spelled exactly; nothing else.
    #[test]
    fn static_values_are_the_written_headers_exactly() {
        for cache in Cache::ALL {
            assert_eq!(static_value(cache.header()), Some(cache.header()), "{cache:?}");
        }
        for (text, known) in [
            (JSON, true),
            ("text/html; charset=utf-8", true),
            ("application/vnd.apache.parquet", true),
            ("application/json ", false),
            ("public, max-age=31", false),
            ("", false),
        ] {
            assert_eq!(static_value(text).is_some(), known, "{text:?}");
        }
    }
}
